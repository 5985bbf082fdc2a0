//! The CLI signs in to `mcp-tasks serve --oauth-issuer`, against the real
//! OpenID provider (`oidc.rs`), through the real binary: client credentials,
//! the authorization code flow driven without a browser (the test follows
//! the printed URL's redirects itself up to the CLI's loopback callback),
//! tokens refreshed past their life, a journaled wait resumed after the CLI
//! is killed, and logout.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::oidc::{MACHINE_ALICE, NATIVE_CLIENT, Provider, SCOPES, secret_of};
use crate::serving::Served;
use crate::support::{BIN, raw_http};

/// A provider, a server that accepts its tokens, and a CLI home (journal
/// and token file) of this test's own.
struct Setup {
    idp: Provider,
    server: Served,
    home: tempfile::TempDir,
    _state: tempfile::TempDir,
}

impl Setup {
    /// `ttl`: the access tokens' life, in seconds.
    fn start(ttl: u64) -> Self {
        let state = tempfile::tempdir().unwrap();
        let idp = Provider::start_with(state.path(), 0, &["--access-token-ttl", &ttl.to_string()]);
        let server = Served::start(
            BIN,
            "127.0.0.1:0",
            "memory",
            &["--oauth-issuer", &idp.issuer, "--oauth-scopes", SCOPES],
        );
        Self {
            idp,
            server,
            home: tempfile::tempdir().unwrap(),
            _state: state,
        }
    }

    fn tokens(&self) -> PathBuf {
        self.home.path().join("oauth-tokens.json")
    }

    /// The token file's entry for the server.
    fn entry(&self) -> Option<Value> {
        let text = std::fs::read_to_string(self.tokens()).ok()?;
        let file: Value = serde_json::from_str(&text).unwrap();
        file["servers"].get(&self.server.url).cloned()
    }

    fn access_token(&self) -> String {
        let entry = self.entry().expect("tokens kept for the server");
        entry["token_response"]["access_token"]
            .as_str()
            .expect("an access token")
            .to_owned()
    }

    /// The binary with this test's journal (the token file beside it) and
    /// no browser.
    fn bin(&self) -> Command {
        let mut command = Command::new(BIN);
        command
            .env(
                "MCP_TASKS_JOURNAL",
                self.home.path().join("journal.sqlite3"),
            )
            .env("BROWSER", "none")
            .env_remove("MCP_TASKS_OAUTH_TOKENS")
            .env_remove("MCP_TASKS_OAUTH_CLIENT_SECRET")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    /// A file holding machine-alice's secret.
    fn secret_file(&self) -> PathBuf {
        let path = self.home.path().join("client-secret");
        std::fs::write(&path, format!("{}\n", secret_of(MACHINE_ALICE))).unwrap();
        path
    }

    /// `ARGS` then the client-credentials flags of machine-alice.
    fn as_machine(&self, args: &[&str], secret: &Path) -> Vec<String> {
        let mut all: Vec<String> = args.iter().map(|arg| (*arg).to_owned()).collect();
        all.extend(
            [
                "--oauth-client-credentials",
                "--oauth-client-id",
                MACHINE_ALICE,
                "--oauth-client-secret-file",
            ]
            .map(str::to_owned),
        );
        all.push(secret.display().to_string());
        all
    }

    /// Runs the binary with `args` to its end (60 s at most).
    fn run<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Output {
        let child = self.bin().args(args).spawn().expect("the binary starts");
        finish(child, Duration::from_secs(60))
    }

    /// Starts `args`, which will ask for a browser sign-in: reads the
    /// authorization URL from its stderr, follows it at the provider as a
    /// person who approves would, and brings the browser back to the CLI's
    /// loopback callback. Returns the child, still running.
    fn signing_in(&self, args: &[&str]) -> (Child, mpsc::Receiver<String>) {
        let mut child = self.bin().args(args).spawn().expect("the binary starts");
        let stderr = child.stderr.take().expect("stderr");
        let (lines, read) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("cli: {line}");
                let _ = lines.send(line);
            }
        });
        let auth_url = loop {
            let Ok(line) = read.recv_timeout(Duration::from_secs(30)) else {
                let _ = child.kill();
                let output = child.wait_with_output().expect("output");
                panic!(
                    "the CLI printed no authorization URL; stdout: {}",
                    String::from_utf8_lossy(&output.stdout)
                );
            };
            if line.starts_with(&format!("{}/", self.idp.issuer)) {
                break line;
            }
        };
        assert!(
            auth_url.contains("code_challenge_method=S256"),
            "PKCE: {auth_url}"
        );
        let callback = self.idp.authorize(&auth_url);
        let rest = callback
            .strip_prefix("http://")
            .expect("a loopback http redirect");
        let (address, path) = rest.split_once('/').expect("a path");
        assert!(address.starts_with("127.0.0.1:"), "{callback}");
        let page = raw_http(address, "GET", &format!("/{path}"), &[], "");
        assert_eq!(page.status, 200, "{}", page.body);
        (child, read)
    }
}

/// Waits for `child` to end within `limit` (killing it past that), with
/// what it printed.
fn finish(mut child: Child, limit: Duration) -> Output {
    let deadline = Instant::now() + limit;
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("mcp-tasks ran past {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn a_machine_signs_in_with_client_credentials_and_keeps_its_token_private() {
    let setup = Setup::start(300);
    let secret = setup.secret_file();
    let args = setup.as_machine(
        &[
            "call",
            "--url",
            &setup.server.url,
            "long_job",
            "--arg",
            "steps=2",
            "--arg",
            "step_ms=50",
            "--json",
        ],
        &secret,
    );
    let output = setup.run(&args);
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    let report: Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    assert_eq!(report["status"], "completed", "{report}");
    #[cfg(unix)]
    assert_eq!(mode(&setup.tokens()), 0o600);
    let token = setup.access_token();
    let claims = crate::oidc::claims_of(&token);
    assert_eq!(claims["sub"], MACHINE_ALICE);
    assert_eq!(
        claims["aud"],
        setup.server.url.as_str(),
        "a token for this server alone"
    );
    for printed in [&stdout, &stderr] {
        assert!(
            !printed.contains(&secret_of(MACHINE_ALICE)),
            "the secret is printed"
        );
        assert!(!printed.contains(&token), "the token is printed");
    }
    // The next command uses the kept token: no flag, no sign-in, no new token.
    let issued = setup.idp.stats()["token"].as_u64().unwrap();
    let output = setup.run(&["tools", "--url", &setup.server.url, "--oauth-timeout", "3"]);
    assert_eq!(output.status.code(), Some(0), "{:?}", text(&output));
    assert_eq!(setup.idp.stats()["token"].as_u64().unwrap(), issued);

    // `ls --refresh` asks the server with the kept token too: a task the
    // journal last saw working is seen completed (without the token the
    // server would not answer, and the journal's status would stay).
    let output = setup.run(&[
        "call",
        "--url",
        &setup.server.url,
        "long_job",
        "--arg",
        "steps=1",
        "--arg",
        "step_ms=50",
        "--no-wait",
    ]);
    assert_eq!(output.status.code(), Some(0), "{:?}", text(&output));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let listed = setup.run(&["ls", "--refresh", "--all", "--json"]);
        let rows: Value = serde_json::from_slice(&listed.stdout).expect("a JSON array");
        if rows[0]["status"] == "completed" {
            break;
        }
        assert!(Instant::now() < deadline, "never seen completed: {rows}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_wrong_secret_is_refused_by_name_and_never_printed() {
    let setup = Setup::start(300);
    let secret = setup.home.path().join("wrong");
    std::fs::write(&secret, "not-the-secret-at-all").unwrap();
    let args = setup.as_machine(&["tools", "--url", &setup.server.url], &secret);
    let output = setup.run(&args);
    let (stdout, stderr) = text(&output);
    assert_ne!(output.status.code(), Some(0));
    assert!(stderr.contains("invalid_client"), "{stderr}");
    assert!(stderr.contains(MACHINE_ALICE), "{stderr}");
    assert!(!format!("{stdout}{stderr}").contains("not-the-secret-at-all"));
    assert!(setup.entry().is_none(), "nothing kept");
}

#[test]
fn a_person_signs_in_through_the_browser_flow_and_logout_forgets_it() {
    let setup = Setup::start(300);
    let url = setup.server.url.clone();
    let (child, _) = setup.signing_in(&[
        "call",
        "--url",
        &url,
        "long_job",
        "--arg",
        "steps=1",
        "--arg",
        "step_ms=10",
        "--json",
    ]);
    let output = finish(child, Duration::from_secs(60));
    let (stdout, _) = text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    let report: Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    assert_eq!(report["status"], "completed", "{report}");
    let entry = setup.entry().expect("tokens kept");
    assert!(
        entry["token_response"]["refresh_token"].is_string(),
        "a refresh token is kept"
    );
    let claims = crate::oidc::claims_of(&setup.access_token());
    assert_eq!(claims["sub"], "alice");
    assert_eq!(claims["aud"], url.as_str());
    #[cfg(unix)]
    assert_eq!(mode(&setup.tokens()), 0o600);

    // Signed in: the next command needs no browser.
    let output = setup.run(&["tools", "--url", &url, "--oauth-timeout", "3"]);
    assert_eq!(output.status.code(), Some(0), "{:?}", text(&output));

    let output = setup.run(&["logout", &url]);
    let (_, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("Signed out"), "{stderr}");
    assert!(setup.entry().is_none(), "the tokens are gone");
    let output = setup.run(&["logout", &url]);
    assert_eq!(output.status.code(), Some(0));
    assert!(text(&output).1.contains("No tokens"), "{:?}", text(&output));

    // Signed out: the next command asks for a sign-in again (and gives up).
    let output = setup.run(&["tools", "--url", &url, "--oauth-timeout", "1"]);
    let (_, stderr) = text(&output);
    assert_ne!(output.status.code(), Some(0));
    assert!(stderr.contains("Sign in to"), "{stderr}");
    assert!(stderr.contains("within 1 s"), "{stderr}");
}

#[test]
fn tokens_are_refreshed_past_their_life_during_a_wait_and_after() {
    // Tokens live 4 s: refreshed when less than 2 s are left.
    let setup = Setup::start(4);
    let url = setup.server.url.clone();
    let (child, _) =
        setup.signing_in(&["tools", "--url", &url, "--oauth-client-id", NATIVE_CLIENT]);
    let output = finish(child, Duration::from_secs(60));
    assert_eq!(output.status.code(), Some(0));
    let first = setup.access_token();
    let issued = setup.idp.stats()["token"].as_u64().unwrap();

    // A wait of 9 s, polling: its requests go on past two token lives.
    let output = setup.run(&[
        "call",
        "--url",
        &url,
        "long_job",
        "--arg",
        "steps=9",
        "--arg",
        "step_ms=1000",
        "--poll",
        "--json",
        "--oauth-timeout",
        "1",
    ]);
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(!stderr.contains("Sign in"), "no new sign-in: {stderr}");
    let refreshed = setup.access_token();
    assert_ne!(refreshed, first, "the kept token was refreshed");
    let refreshes = setup.idp.stats()["token"].as_u64().unwrap() - issued;
    assert!(
        refreshes >= 2,
        "{refreshes} refreshes over 9 s of 4 s tokens"
    );

    // Later, with the kept token expired: refreshed, no sign-in.
    std::thread::sleep(Duration::from_secs(5));
    let output = setup.run(&["tools", "--url", &url, "--oauth-timeout", "1"]);
    assert_eq!(output.status.code(), Some(0), "{:?}", text(&output));
    assert_ne!(setup.access_token(), refreshed);
}

#[test]
fn a_machine_asks_for_client_credentials_again_when_its_token_runs_out() {
    let setup = Setup::start(4);
    let secret = setup.secret_file();
    let args = setup.as_machine(
        &[
            "call",
            "--url",
            &setup.server.url,
            "long_job",
            "--arg",
            "steps=7",
            "--arg",
            "step_ms=1000",
            "--poll",
            "--json",
        ],
        &secret,
    );
    let output = setup.run(&args);
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    let issued = setup.idp.stats()["token"].as_u64().unwrap();
    assert!(issued >= 3, "{issued} tokens over 7 s of 4 s tokens");
    assert!(setup.entry().unwrap()["token_response"]["refresh_token"].is_null());

    // A new process, the kept token expired: client credentials again.
    std::thread::sleep(Duration::from_secs(5));
    let kept = setup.access_token();
    let args = setup.as_machine(&["tools", "--url", &setup.server.url], &secret);
    let output = setup.run(&args);
    assert_eq!(output.status.code(), Some(0), "{:?}", text(&output));
    assert_ne!(setup.access_token(), kept);
    assert_eq!(setup.idp.stats()["token"].as_u64().unwrap(), issued + 1);
}

#[test]
fn a_journaled_wait_resumes_after_the_cli_is_killed_with_the_kept_token() {
    let setup = Setup::start(300);
    let secret = setup.secret_file();
    let args = setup.as_machine(
        &[
            "call",
            "--url",
            &setup.server.url,
            "long_job",
            "--arg",
            "steps=6",
            "--arg",
            "step_ms=500",
            "--json",
        ],
        &secret,
    );
    let mut child = setup.bin().args(&args).spawn().expect("the binary starts");
    // Killed once the task is in the journal.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let listed = setup.run(&["ls", "--json"]);
        let rows: Value = serde_json::from_slice(&listed.stdout).unwrap_or(Value::Null);
        if rows.as_array().is_some_and(|rows| !rows.is_empty()) {
            break;
        }
        assert!(Instant::now() < deadline, "the task is never journaled");
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    let _ = child.wait();
    // A new process, no sign-in flags: the journal names the server, the
    // token file has the token.
    let output = setup.run(&["wait", "--last", "--json", "--oauth-timeout", "1"]);
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    let report: Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    assert_eq!(report["status"], "completed", "{report}");
    assert!(!stderr.contains("Sign in"), "{stderr}");
}

#[test]
fn a_token_without_a_scope_the_server_needs_is_reported_by_that_scope() {
    let setup = Setup::start(300);
    let secret = setup.secret_file();
    let mut args = setup.as_machine(&["tools", "--url", &setup.server.url], &secret);
    args.extend(["--oauth-scopes".to_owned(), "tasks:read".to_owned()]);
    let output = setup.run(&args);
    let (stdout, stderr) = text(&output);
    assert_ne!(output.status.code(), Some(0), "{stdout}");
    assert!(stderr.contains("needs the scope"), "{stderr}");
    assert!(stderr.contains("tasks:write"), "{stderr}");
    let claims = crate::oidc::claims_of(&setup.access_token());
    assert_eq!(
        claims["scope"], "tasks:read",
        "asked for what --oauth-scopes said"
    );
}

#[test]
fn a_server_that_wants_a_token_but_names_no_authorization_server_says_so() {
    let home = tempfile::tempdir().unwrap();
    let tokens = home.path().join("tokens");
    std::fs::write(&tokens, "static-token-0123456789abcdef tester\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let server = Served::start(
        BIN,
        "127.0.0.1:0",
        "memory",
        &["--auth-tokens", &tokens.display().to_string()],
    );
    let child = Command::new(BIN)
        .args(["tools", "--url", &server.url, "--oauth-timeout", "1"])
        .env("MCP_TASKS_JOURNAL", home.path().join("journal.sqlite3"))
        .env("BROWSER", "none")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let output = finish(child, Duration::from_secs(60));
    let (_, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(69), "{stderr}");
    assert!(stderr.contains("publishes no OAuth metadata"), "{stderr}");
    assert!(!stderr.contains("Sign in to"), "no browser flow: {stderr}");
}
