//! The operator page of `mcp-tasks serve --admin` in a real browser:
//! a server with a steady workload (tasks working, waiting for input, one
//! listened to, a refused request), then `interop/page/check.mjs`, which
//! drives Debian's chromium with playwright-core through the sign-in, the
//! dashboard's numbers against `/metrics`, the tasks table, a cancel, the
//! sign-out, and leaves a screenshot in `target/ci-artifacts/`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::operator::{ALICE, scrape, serve_alice_and_ops, value};
use crate::support::{bin, raw_http, run};

const OPERATOR: &str = "s3cret-operator-token";

/// How long the browser's run may take.
const CHECK_LIMIT: Duration = Duration::from_secs(180);

/// A child process killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `interop/page`, where the driver and its `node_modules` are.
fn driver_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../interop/page")
}

/// `target/ci-artifacts/operator-page.png` of the workspace's target dir.
fn screenshot_path() -> PathBuf {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("CARGO_TARGET_TMPDIR is TARGET/tmp");
    target.join("ci-artifacts").join("operator-page.png")
}

/// `call TOOL ARGS... --no-wait` as alice: the task id it prints.
fn start(url: &str, tool: &str, args: &[&str]) -> String {
    let header = format!("Authorization: Bearer {ALICE}");
    let mut argv = vec!["call", "--url", url, "--header", &header, tool];
    for arg in args {
        argv.extend(["--arg", arg]);
    }
    argv.push("--no-wait");
    let output = run(&argv);
    let id = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    assert!(
        output.status.success() && !id.is_empty() && !id.contains(char::is_whitespace),
        "mcp-tasks {argv:?}: {id:?}; {}",
        String::from_utf8_lossy(&output.stderr)
    );
    id
}

#[test]
fn the_operator_page_in_chromium_signs_in_shows_the_metrics_and_cancels() {
    let modules = driver_dir().join("node_modules").join("playwright-core");
    assert!(
        modules.is_dir(),
        "{} is missing: install the browser driver with `(cd interop/page && npm ci)` \
         (and Debian's chromium: `apt-get install -y chromium`)",
        modules.display()
    );

    let dir = tempfile::tempdir().unwrap();
    let server = serve_alice_and_ops(dir.path(), OPERATOR);
    let url = server.url.clone();
    let auth = format!("Authorization: Bearer {ALICE}");

    // Ended: one completed, one failed (counted, not in the table).
    let done = run(&[
        "call",
        "--url",
        &url,
        "--header",
        &auth,
        "long_job",
        "--arg",
        "steps=1",
        "--arg",
        "step_ms=0",
    ]);
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let failed = run(&["call", "--url", &url, "--header", &auth, "failing_tool"]);
    assert!(!failed.status.success(), "failing_tool fails");
    // Live: three working, two waiting for input, one listened to.
    let mut live = [
        start(&url, "sleep", &["ms=600000"]),
        start(&url, "sleep", &["ms=600000"]),
        start(&url, "long_job", &["steps=10000", "step_ms=60000"]),
        start(&url, "confirm_action", &[]),
        start(&url, "confirm_action", &[]),
    ];
    let _listener = Killed(
        bin()
            .args([
                "wait", "--url", &url, "--header", &auth, "--listen", &live[1],
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("mcp-tasks wait starts"),
    );
    // Refused: no token.
    let refused = raw_http(
        server.address(),
        "POST",
        "/mcp",
        &[
            "Content-Type: application/json",
            "Accept: application/json, text/event-stream",
        ],
        r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"x"}}"#,
    );
    assert_eq!(refused.status, 401, "{}", refused.body);

    // Steady before the browser looks.
    let steady = [
        ("mcp_tasks_tasks_live", Some(("status", "working")), 3.0),
        (
            "mcp_tasks_tasks_live",
            Some(("status", "input_required")),
            2.0,
        ),
        ("mcp_tasks_listen_streams_open", None, 1.0),
    ];
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (text, metrics) = scrape(&server.admin, OPERATOR);
        let unmet: Vec<_> = steady
            .iter()
            .filter(|(name, label, want)| value(&metrics, name, label.as_slice()) != *want)
            .collect();
        if unmet.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the workload is not steady within 30 s: {unmet:?}\n{text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    let screenshot = screenshot_path();
    std::fs::create_dir_all(screenshot.parent().unwrap()).expect("target/ci-artifacts");
    let _ = std::fs::remove_file(&screenshot);
    let _ = std::fs::remove_file(screenshot.with_file_name("operator-page-failed.png"));
    let (out, err) = (dir.path().join("check.out"), dir.path().join("check.err"));
    live.sort();
    let ids = live.join(",");
    let page = format!("http://{}/", server.admin);
    let mut node = Killed(
        Command::new("node")
            .arg("check.mjs")
            .current_dir(driver_dir())
            .env("MCP_TASKS_PAGE_URL", &page)
            .env("MCP_TASKS_OPERATOR_TOKEN", OPERATOR)
            .env("MCP_TASKS_SCREENSHOT", &screenshot)
            .env("MCP_TASKS_LIVE_TASKS", live.len().to_string())
            .env("MCP_TASKS_TASK_IDS", &ids)
            .env(
                "MCP_TASKS_WORKLOAD_WORDS",
                "long_job,sleep,confirm_action,failing_tool,alice",
            )
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .expect("`node` runs (Node.js 20 or later on PATH)"),
    );
    let started = Instant::now();
    let status = loop {
        if let Some(status) = node.0.try_wait().expect("wait for node") {
            break Some(status);
        }
        if started.elapsed() > CHECK_LIMIT {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let said = format!(
        "{}{}",
        std::fs::read_to_string(&out).unwrap_or_default(),
        std::fs::read_to_string(&err).unwrap_or_default()
    );
    eprintln!("{said}");
    let status = status.unwrap_or_else(|| panic!("check.mjs ran past {CHECK_LIMIT:?}:\n{said}"));
    assert!(
        status.success(),
        "check.mjs failed ({status}): its output is above"
    );

    let png = std::fs::read(&screenshot)
        .unwrap_or_else(|error| panic!("{}: {error}", screenshot.display()));
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000,
        "{} is not a PNG of a whole page: {} bytes",
        screenshot.display(),
        png.len()
    );
}
