//! The common mistakes at a terminal, run through the binary: each ends in
//! one line on stderr saying what failed and what to do, with no Rust type
//! path, no dependency's log line and no colour (stderr is a pipe here);
//! `-v` adds the details.

use std::process::Output;
use std::sync::Arc;

use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::support::{http_server, http_server_with, run, serve_in_background};

/// Runs `tools` against `target` (`--url URL` or `--stdio CMD`) and returns
/// its one stderr line, checked to be an error for people.
fn mistake(target: &[&str]) -> String {
    let mut args = vec!["tools"];
    args.extend_from_slice(target);
    let output = run(&args);
    assert_eq!(output.status.code(), Some(69), "{}", said(&output));
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    // A stdio child's own complaint may come first: ours is the last line.
    let line = stderr.lines().last().unwrap_or_default().to_owned();
    assert!(line.starts_with("error: "), "{stderr}");
    for leak in [
        "\u{1b}[",
        "rmcp",
        "::",
        "ERROR",
        "Send message error",
        "lifecycle",
    ] {
        assert!(!stderr.contains(leak), "{leak:?} in {stderr}");
    }
    assert!(line.len() < 240, "one short line: {line}");
    line
}

fn said(output: &Output) -> String {
    format!(
        "exit {:?}; stdout {}; stderr {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn a_closed_port_says_nothing_listens_there() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let line = mistake(&["--url", &url]);
    assert!(
        line.contains(&format!("nothing answers at 127.0.0.1:{port}"))
            && line.contains("is the server running"),
        "{line}"
    );
}

#[test]
fn a_wrong_path_says_no_endpoint_is_there() {
    let server = http_server();
    let url = server.url.replace("/mcp", "/mpc");
    let line = mistake(&["--url", &url]);
    assert!(
        line.contains("answered HTTP 404: no MCP endpoint at this path"),
        "{line}"
    );
}

#[test]
fn https_to_a_plain_server_says_to_use_http() {
    let server = http_server();
    let url = server.url.replace("http://", "https://");
    let line = mistake(&["--url", &url]);
    assert!(
        line.contains("not HTTPS: try the URL with http://"),
        "{line}"
    );
}

/// A TLS server (a real rustls stack, the test's self-signed certificate)
/// that answers nothing but TLS; returns its `host:port`.
fn tls_server() -> String {
    let certs = vec![
        CertificateDer::from_pem_slice(include_bytes!("mistakes/cert.pem"))
            .expect("the test certificate"),
    ];
    let key =
        PrivateKeyDer::from_pem_slice(include_bytes!("mistakes/key.pem")).expect("the test key");
    let provider = Arc::new(tokio_rustls::rustls::crypto::aws_lc_rs::default_provider());
    let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("a certificate");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let url = serve_in_background(move |listener| async move {
        loop {
            let (socket, _) = listener.accept().await?;
            let acceptor = acceptor.clone();
            // A plain request fails the handshake, and the connection is dropped.
            tokio::spawn(async move { acceptor.accept(socket).await.map(drop) });
        }
    });
    url.trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned()
}

#[test]
fn http_where_https_is_needed_says_to_use_https() {
    let address = tls_server();
    let line = mistake(&["--url", &format!("http://{address}/mcp")]);
    assert!(
        line.contains(&format!(
            "{address} dropped the request without an HTTP answer"
        )) && line.contains("use the URL with https://"),
        "{line}"
    );
    // And the certificate is refused over https, said as such.
    let line = mistake(&["--url", &format!("https://{address}/mcp")]);
    assert!(line.contains("certificate is not trusted"), "{line}");
}

#[test]
fn a_server_that_is_not_mcp_says_so() {
    let url = serve_in_background(|listener| async move {
        let page = axum::Router::new()
            .fallback(|| async { axum::response::Html("<html><body>a web page</body></html>") });
        axum::serve(listener, page).await
    });
    let line = mistake(&["--url", &url]);
    assert!(
        line.contains("answered with text/html") && line.contains("not MCP"),
        "{line}"
    );
}

#[test]
fn a_bad_token_says_it_was_refused() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "a-good-token-0123456789 alice\n").expect("the token file");
    std::fs::set_permissions(&tokens, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("chmod 600");
    let server = http_server_with(&["--auth-tokens", tokens.to_str().expect("a path")]);
    let line = mistake(&[
        "--url",
        &server.url,
        "--header",
        "Authorization: Bearer a-wrong-token-0123456789",
    ]);
    assert!(line.contains("refused the token"), "{line}");
}

#[test]
fn a_command_that_is_not_a_server_says_it_ended() {
    let line = mistake(&["--stdio", "mcp-tasks-no-such-command --serve"]);
    assert!(
        line.contains("ended before the MCP handshake")
            && line.contains("check that the command runs"),
        "{line}"
    );
}

#[test]
fn verbose_adds_the_details_and_json_carries_the_same_line() {
    let server = http_server();
    let url = server.url.replace("/mcp", "/mpc");
    let output = run(&["-v", "tools", "--url", &url]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("\n  details: ") && stderr.contains("404 Not Found"),
        "{stderr}"
    );
    let output = run(&["tools", "--url", &url, "--json"]);
    let (code, value) = crate::support::json_of(&output);
    assert_eq!(code, 69);
    let message = value["error"]["message"].as_str().expect("a message");
    assert!(message.contains("no MCP endpoint at this path"), "{value}");
}

/// What `-v tools` against a closed port prints on a terminal, with the
/// environment `env`.
fn on_a_terminal(env: &[(&str, &str)]) -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let mut command = crate::support::bin();
    command
        .args([
            "-v",
            "tools",
            "--url",
            &format!("http://127.0.0.1:{port}/mcp"),
        ])
        .env_remove("NO_COLOR")
        .envs(env.iter().copied());
    let mut pty = rexpect::session::spawn_command(command, Some(30_000)).expect("a pty");
    pty.exp_eof().expect("the command ends")
}

#[test]
fn colour_only_on_a_terminal_and_never_with_no_color() {
    // -v shows rmcp's own error line, which tracing colours on a terminal.
    let coloured = on_a_terminal(&[]);
    assert!(
        coloured.contains("\u{1b}["),
        "a terminal gets colour: {coloured:?}"
    );
    let plain = on_a_terminal(&[("NO_COLOR", "1")]);
    assert!(!plain.contains("\u{1b}["), "NO_COLOR: {plain:?}");
    assert!(plain.contains("nothing answers at"), "{plain}");
}
