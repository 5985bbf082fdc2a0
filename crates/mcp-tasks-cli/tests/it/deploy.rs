//! `mcp-tasks serve` deployed as an operator would (the nginx recipe of
//! `docs/deployment.md`, read from that file):
//! Debian's nginx on a loopback port in front of two replicas, each on its
//! own SQLite file, routed by the caller's `Authorization` header (sticky:
//! a task lives in the one process that made it), bearer tokens required,
//! and `mcp-tasks call --url` driving it through the proxy with a real host
//! name in `Host`. Also what happens without sticky routing, the files'
//! permissions, and the flags' errors. Then two replicas on one Redis
//! behind round robin: any replica answers for any task.
//!
//! nginx must be installed (`.ci/run` installs it): without it the test
//! fails with a message saying so, it is never skipped.

use std::net::SocketAddr;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mcp_tasks_testkit::serve::Served;
use mcp_tasks_testkit::wait::free_port;
use serde_json::{Value, json};

use crate::support::{BIN, json_of, run};

const NAME: &str = "tasks.example.test";
const ALICE: &str = "alice-0123456789abcdef0123456789";
const BOB: &str = "bob-0123456789abcdef0123456789ab";

/// A `mcp-tasks serve --http` replica; killed when dropped.
struct Replica {
    _served: Served,
    address: SocketAddr,
}

fn replica(store: &Path, tokens: &Path) -> Replica {
    replica_on(&format!("sqlite:{}", store.display()), &[], tokens)
}

/// A replica on the store `store` (`--store`), with `extra` flags.
fn replica_on(store: &str, extra: &[&str], tokens: &Path) -> Replica {
    let mut command = Command::new(BIN);
    command
        .args(["serve", "--http", "127.0.0.1:0", "--store", store])
        .args(extra)
        .args(["--allowed-host", NAME, "--auth-tokens"])
        .arg(tokens)
        // A poll a minute: a wait that ends within seconds listened.
        .args(["--poll-interval", "60000"]);
    let served = Served::command(command, None);
    let address = served
        .address()
        .parse()
        .unwrap_or_else(|_| panic!("not an address: {}", served.url));
    Replica {
        _served: served,
        address,
    }
}

/// nginx in the foreground with a configuration of its own in `dir`;
/// stopped when dropped.
pub(crate) struct Nginx {
    child: Child,
    binary: PathBuf,
    dir: PathBuf,
    pub(crate) port: u16,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // `-s stop` reaches the workers too, which killing the master would not.
        let _ = Command::new(&self.binary)
            .arg("-p")
            .arg(&self.dir)
            .args(["-c", "nginx.conf", "-s", "stop"])
            .stderr(Stdio::null())
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn nginx_binary() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join("nginx"))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| {
            panic!(
                "nginx is not installed, and this test runs the reverse-proxy recipe of docs/deployment.md \
                 with it: install Debian's nginx (`apt-get install nginx`, as .ci/run does)"
            )
        })
}

/// The deployment guide, whose nginx recipe this test runs as it is written.
const GUIDE: &str = include_str!("../../../../docs/deployment.md");

/// The first `nginx` block of the deployment guide: the recipe.
fn recipe() -> &'static str {
    let start = GUIDE
        .find("```nginx\n")
        .expect("docs/deployment.md has an nginx block")
        + "```nginx\n".len();
    let length = GUIDE[start..]
        .find("```")
        .expect("the nginx block of docs/deployment.md ends");
    &GUIDE[start..start + length]
}

/// `text` with `from` replaced by `to`, which must be there: a recipe
/// changed past what this test knows fails here, by name.
fn replaced(text: &str, from: &str, to: &str) -> String {
    assert!(
        text.contains(from),
        "the nginx recipe of docs/deployment.md no longer has `{from}`: update this test with it"
    );
    text.replace(from, to)
}

/// The nginx recipe of the deployment guide, with the replicas as its
/// upstreams (`/mcp`, sticky by `Authorization`), a loopback port for its
/// TLS one and the test's host name for its own, and, for the test of
/// what goes wrong without stickiness, `/round-robin/mcp` on the same
/// replicas.
fn nginx_conf(dir: &Path, port: u16, replicas: &[&Replica]) -> String {
    let servers: String = replicas
        .iter()
        .map(|replica| format!("        server {};\n", replica.address))
        .collect();
    // The recipe's example replicas become the test's.
    let mut lines = Vec::new();
    let mut replaced_servers = false;
    for line in recipe().lines() {
        if line.trim_start().starts_with("server 127.0.0.1:") {
            if !replaced_servers {
                lines.push(servers.trim_end().to_owned());
                replaced_servers = true;
            }
        } else {
            lines.push(format!("    {line}"));
        }
    }
    assert!(
        replaced_servers,
        "the nginx recipe of docs/deployment.md names no `server 127.0.0.1:PORT` replica"
    );
    let recipe = lines.join("\n");
    let recipe = replaced(
        &recipe,
        "listen 443 ssl;",
        &format!("listen 127.0.0.1:{port};"),
    );
    let recipe = replaced(&recipe, "tasks.example.com", NAME);
    // The round-robin location, inside the recipe's server block (before
    // its last closing brace).
    let round_robin = r#"
        location = /round-robin/mcp {
            proxy_pass http://mcp_tasks_round_robin/mcp;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_buffering off;
        }
    }"#;
    let end = recipe
        .rfind('}')
        .expect("the nginx recipe of docs/deployment.md ends its server block");
    let recipe = format!(
        "{}{round_robin}{}",
        &recipe[..end].trim_end(),
        &recipe[end + 1..]
    );
    nginx_main(
        dir,
        &format!("    upstream mcp_tasks_round_robin {{\n{servers}    }}\n\n{recipe}"),
    )
}

/// A whole nginx configuration whose `http` block holds `http` (upstreams
/// and servers): one worker, in the foreground, its pid, logs and temp
/// files in `dir`.
pub(crate) fn nginx_main(dir: &Path, http: &str) -> String {
    // Workers as root when the test runs as root: they keep the temp dirs,
    // which live in the test's 0700 folder.
    let user = match std::fs::metadata("/proc/self") {
        Ok(metadata) if metadata.uid() == 0 => "user root;",
        _ => "",
    };
    let dir = dir.display();
    format!(
        r#"{user}
worker_processes 1;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log notice;
events {{ worker_connections 1024; }}
http {{
    access_log {dir}/access.log;
    client_body_temp_path {dir}/client_body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;

{http}
}}
"#
    )
}

fn start_nginx(dir: &Path, replicas: &[&Replica]) -> Nginx {
    let port = free_port();
    run_nginx(dir, port, &nginx_conf(dir, port, replicas))
}

/// nginx with the configuration `conf` (listening on 127.0.0.1:`port`),
/// its files in `dir`; ready when this returns.
pub(crate) fn run_nginx(dir: &Path, port: u16, conf: &str) -> Nginx {
    let binary = nginx_binary();
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    let child = Command::new(&binary)
        .arg("-p")
        .arg(dir)
        .arg("-e")
        .arg(dir.join("error.log"))
        .args(["-c", "nginx.conf"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot run {}: {error}", binary.display()));
    let mut nginx = Nginx {
        child,
        binary,
        dir: dir.to_owned(),
        port,
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return nginx;
        }
        let exited = nginx.child.try_wait().ok().flatten();
        if exited.is_some() || Instant::now() > deadline {
            let mut stderr = String::new();
            if let Some(mut pipe) = nginx.child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
            }
            let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
            panic!(
                "nginx did not start on 127.0.0.1:{port} ({exited:?}): {stderr}\n{log}\n\
                 configuration:\n{conf}"
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The flags of a command through the proxy, as `token`'s caller.
fn through(nginx: &Nginx, path: &str, token: Option<&str>) -> Vec<String> {
    let mut flags = vec![
        "--url".to_owned(),
        format!("http://{NAME}:{}{path}", nginx.port),
        "--resolve".to_owned(),
        format!("{NAME}=127.0.0.1"),
    ];
    if let Some(token) = token {
        flags.extend([
            "--header".to_owned(),
            format!("Authorization: Bearer {token}"),
        ]);
    }
    flags
}

/// Listening through the proxy: every step of a `long_job` heard, done
/// long before the minute a poll would take (`--listen` fails if the
/// stream does). Steps 400 ms apart: on a loaded machine the stream may
/// open a few hundred milliseconds after the task starts.
fn listen_to_a_long_job(flags: &[String], caller: &str) {
    let job = r#"{"steps": 3, "step_ms": 400}"#;
    let output = run(&command(
        &["call", "long_job", job, "--listen", "--timeout", "30"],
        flags,
    ));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{caller}: {stderr}");
    for step in ["step 1 of 3", "step 2 of 3", "step 3 of 3"] {
        assert!(stderr.contains(step), "{caller}: no {step:?} in {stderr}");
    }
}

fn command<'a>(words: &[&'a str], flags: &'a [String]) -> Vec<&'a str> {
    let mut args = vec![words[0]];
    args.extend(flags.iter().map(String::as_str));
    args.extend_from_slice(&words[1..]);
    args
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn two_replicas_behind_nginx_with_tokens_and_a_public_host_name() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("# callers\n{ALICE} alice\n{BOB} bob\n")).unwrap();
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    let stores = [
        dir.path().join("replica-1.db"),
        dir.path().join("replica-2.db"),
    ];
    let first = replica(&stores[0], &tokens);
    let second = replica(&stores[1], &tokens);
    let nginx_dir = dir.path().join("nginx");
    std::fs::create_dir(&nginx_dir).unwrap();
    let nginx = start_nginx(&nginx_dir, &[&first, &second]);

    for (caller, token) in [("alice", ALICE), ("bob", BOB)] {
        let flags = through(&nginx, "/mcp", Some(token));
        listen_to_a_long_job(&flags, caller);

        // A task made, read, waited on briefly and cancelled, each command
        // a new connection through the proxy: all reach its replica.
        let output = run(&command(
            &["call", "sleep", "--arg", "ms=60000", "--no-wait", "--json"],
            &flags,
        ));
        let (exit, value) = json_of(&output);
        assert_eq!((exit, &value["status"]), (0, &json!("working")), "{value}");
        let id = value["taskId"].as_str().expect("a task id").to_owned();
        for _ in 0..3 {
            let (exit, value) = json_of(&run(&command(&["get", &id, "--json"], &flags)));
            assert_eq!(
                (exit, &value["status"]),
                (0, &json!("working")),
                "{caller}: {value}"
            );
        }
        let (exit, value) = json_of(&run(&command(
            &["wait", &id, "--listen", "--timeout", "0.5", "--json"],
            &flags,
        )));
        assert_eq!(
            (exit, &value["status"]),
            (5, &json!("working")),
            "{caller}: {value}"
        );
        let (exit, value) = json_of(&run(&command(&["cancel", &id, "--json"], &flags)));
        assert_eq!(
            (exit, &value["status"]),
            (3, &json!("cancelled")),
            "{caller}: {value}"
        );

        // The task lives in exactly one replica, which knows it as the
        // caller's; asked directly (a loopback Host), the other has no such task.
        let auth = format!("Authorization: Bearer {token}");
        let mut owners = 0;
        for replica in [&first, &second] {
            let url = format!("http://{}/mcp", replica.address);
            let (exit, value) = json_of(&run(&[
                "get", "--url", &url, "--header", &auth, &id, "--json",
            ]));
            match exit {
                3 => owners += 1,
                2 => assert_eq!(value["error"]["code"], -32602, "{value}"),
                _ => panic!("{caller} on {url}: exit {exit}: {value}"),
            }
        }
        assert_eq!(owners, 1, "{caller}'s task is in one replica");
        // Another caller, through the same proxy, sees no such task.
        let other = if caller == "alice" { BOB } else { ALICE };
        let flags = through(&nginx, "/mcp", Some(other));
        let (exit, value) = json_of(&run(&command(&["get", &id, "--json"], &flags)));
        assert_eq!(
            (exit, &value["error"]["code"]),
            (2, &json!(-32602)),
            "{value}"
        );
    }

    // No token, or an unknown one: refused (401) before any MCP.
    for token in [None, Some("mallory-0123456789abcdef0123")] {
        let flags = through(&nginx, "/mcp", token);
        let output = run(&command(&["tools"], &flags));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(69), "{token:?}: {stderr}");
        assert!(
            stderr.contains("Bearer"),
            "the challenge is shown: {stderr}"
        );
    }
    // A Host the replicas do not serve, through the same proxy: 403.
    let other = "other.example.test";
    let url = format!("http://{other}:{}/mcp", nginx.port);
    let resolve = format!("{other}=127.0.0.1");
    let auth = format!("Authorization: Bearer {ALICE}");
    let output = run(&[
        "tools",
        "--url",
        &url,
        "--resolve",
        &resolve,
        "--header",
        &auth,
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(69), "{stderr}");
    assert!(stderr.contains("403"), "{stderr}");

    // Without sticky routing, a caller's requests alternate between the
    // replicas, and every other one finds no such task: docs/deployment.md
    // says to route by caller for this reason.
    let flags = through(&nginx, "/round-robin/mcp", Some(ALICE));
    let output = run(&command(
        &["call", "sleep", "--arg", "ms=60000", "--no-wait"],
        &flags,
    ));
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let id = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let found = round_robin_gets(nginx.port, &id, 4);
    assert_eq!(
        found.iter().filter(|&&found| found).count(),
        2,
        "round robin over two replicas: half the polls find the task ({found:?})"
    );

    // The replicas' files are their owner's only.
    for store in &stores {
        for suffix in ["", "-wal", "-shm"] {
            let mut path = store.as_os_str().to_owned();
            path.push(suffix);
            let path = PathBuf::from(path);
            assert_eq!(mode(&path), 0o600, "{}", path.display());
        }
    }
    drop(nginx);
}

/// The same recipe in front of two replicas sharing one `redis-server`:
/// now round robin is fine, each request of a caller may reach either
/// replica and finds its task; a cancel that reaches the replica not
/// running the tool stops it, and a listen stream on either hears it.
#[test]
fn two_replicas_on_redis_behind_round_robin_nginx_share_every_task() {
    let redis = mcp_tasks_redis::testing::RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("{ALICE} alice\n{BOB} bob\n")).unwrap();
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    let store = redis.url();
    let extra = ["--redis-key-prefix", "deploy-test:"];
    let first = replica_on(&store, &extra, &tokens);
    let second = replica_on(&store, &extra, &tokens);
    let nginx_dir = dir.path().join("nginx");
    std::fs::create_dir(&nginx_dir).unwrap();
    let nginx = start_nginx(&nginx_dir, &[&first, &second]);
    let flags = through(&nginx, "/round-robin/mcp", Some(ALICE));

    // Whichever replica runs the tool and whichever holds the stream.
    listen_to_a_long_job(&flags, "alice");

    let output = run(&command(
        &["call", "sleep", "--arg", "ms=60000", "--no-wait"],
        &flags,
    ));
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let id = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let found = round_robin_gets(nginx.port, &id, 4);
    assert_eq!(found, [true; 4], "every replica knows the task");
    // Bob, through the same proxy, still sees no such task.
    let bob = through(&nginx, "/round-robin/mcp", Some(BOB));
    let (exit, value) = json_of(&run(&command(&["get", &id, "--json"], &bob)));
    assert_eq!(
        (exit, &value["error"]["code"]),
        (2, &json!(-32602)),
        "{value}"
    );
    // A cancel stops the tool whichever replica it reaches; the get after
    // it, on either, reads the task cancelled.
    let (exit, value) = json_of(&run(&command(&["cancel", &id, "--json"], &flags)));
    assert_eq!(
        (exit, &value["status"]),
        (3, &json!("cancelled")),
        "{value}"
    );
    let (exit, value) = json_of(&run(&command(&["get", &id, "--json"], &flags)));
    assert_eq!(
        (exit, &value["status"]),
        (3, &json!("cancelled")),
        "{value}"
    );
    drop(nginx);
}

/// `count` raw `tasks/get`s of `id` through the round-robin location, one
/// after the other: whether each found the task.
fn round_robin_gets(port: u16, id: &str, count: usize) -> Vec<bool> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = reqwest::Client::builder()
            .resolve(NAME, SocketAddr::from(([127, 0, 0, 1], 0)))
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {
            "taskId": id, "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities":
                {"extensions": {"io.modelcontextprotocol/tasks": {}}}}}});
        let mut found = Vec::new();
        for _ in 0..count {
            let answer: Value = client
                .post(format!("http://{NAME}:{port}/round-robin/mcp"))
                .header("authorization", format!("Bearer {ALICE}"))
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json")
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", "tasks/get")
                .header("mcp-name", id)
                .body(body.to_string())
                .send()
                .await
                .expect("an answer through nginx")
                .json()
                .await
                .expect("a JSON answer");
            found.push(answer["result"]["status"] == "working");
        }
        found
    })
}

#[test]
fn a_store_file_open_to_others_is_named_in_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.db");
    std::fs::write(&path, b"").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let store = format!("sqlite:{}", path.display());
    // stdin is closed at once: the server opens its store and ends.
    let output = run(&["serve", "--stdio", "--store", &store]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("WARN") && stderr.contains(&path.display().to_string()),
        "{stderr}"
    );
    assert_eq!(mode(&path), 0o644, "left as the operator set it");

    // A new file: private, and no warning.
    let fresh = dir.path().join("fresh.db");
    let store = format!("sqlite:{}", fresh.display());
    let output = run(&["serve", "--stdio", "--store", &store]);
    assert!(!String::from_utf8_lossy(&output.stderr).contains("WARN"));
    assert_eq!(mode(&fresh), 0o600);
}

#[test]
fn bad_access_flags_are_refused_before_serving() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    let secret = "s3cr3t-s3cr3t-s3cr3t";
    std::fs::write(&tokens, format!("# ok\n{secret} alice\n{secret} bob\n")).unwrap();
    let http = ["serve", "--http", "127.0.0.1:0", "--store", "memory"];
    let refused = |extra: &[&str], expected: &str| {
        let mut args = http.to_vec();
        args.extend_from_slice(extra);
        let output = run(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_ne!(output.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(!stderr.contains(secret), "never the token: {stderr}");
    };
    let path = tokens.display().to_string();
    refused(
        &["--auth-tokens", &path],
        "line 3: the same token as line 2",
    );
    std::fs::write(&tokens, format!("{secret} alice extra\n")).unwrap();
    refused(&["--auth-tokens", &path], "line 1: more than two fields");
    std::fs::write(&tokens, "# nobody\n").unwrap();
    refused(&["--auth-tokens", &path], "holds no token");
    refused(
        &["--auth-tokens", "/nonexistent/tokens"],
        "cannot read the tokens file",
    );
    refused(
        &["--allowed-host", "http://tasks.example.test"],
        "is not a host name",
    );
    refused(
        &["--allowed-origin", "tasks.example.test"],
        "is not an origin",
    );
    // They only mean something over HTTP.
    for flag in [["--allowed-host", NAME], ["--auth-tokens", &path]] {
        let output = run(&["serve", "--stdio", "--store", "memory", flag[0], flag[1]]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_ne!(output.status.code(), Some(0), "{stderr}");
        assert!(stderr.contains("applies to --http only"), "{stderr}");
    }
}
