//! `mcp-tasks serve --config FILE`: the gateway for a team (issue 30) as a
//! process, in front of upstreams that are our own binary (`serve --stdio`
//! as a `command`, `serve --http` as a `url`), called over real HTTP by
//! the binary itself (`call`, `tools`, `admin`) and by the library's
//! client: prefixed names and each call on its own upstream, a clash
//! refused at start, access by token label with no oracle, a bad file
//! refused naming its line, a call timeout and a circuit breaker per
//! upstream. Identity and reload are in `team/identity.rs` and
//! `team/reload.rs`.

mod identity;
mod late;
mod reload;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::serving::{Logs, Served};
use crate::support::{BIN, json_of, run, stdio_server};

pub(crate) const ALICE: &str = "alice-token-0123456789abcdef";
pub(crate) const BOB: &str = "bob-token-0123456789abcdef";

/// The tools of our demo server, sorted.
const DEMO: [&str; 4] = ["confirm_action", "failing_tool", "long_job", "sleep"];

/// A folder for a gateway's files, removed when dropped.
pub(crate) struct Folder(tempfile::TempDir);

impl Folder {
    pub(crate) fn new() -> Self {
        Self(tempfile::tempdir().expect("a temp dir"))
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }

    /// Writes `text` to the file `name`; its path.
    pub(crate) fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, text).expect("write a file");
        path
    }

    /// A tokens file (`TOKEN LABEL` a line).
    pub(crate) fn tokens(&self, name: &str, entries: &[(&str, &str)]) -> PathBuf {
        let text: String = entries
            .iter()
            .map(|(token, label)| format!("{token} {label}\n"))
            .collect();
        self.write(name, &text)
    }
}

/// `text` as a TOML basic string.
pub(crate) fn quoted(text: &str) -> String {
    serde_json::to_string(text).expect("a string")
}

/// Our demo server on stdio, in memory, as a TOML string for `command`.
pub(crate) fn demo() -> String {
    quoted(&stdio_server())
}

/// `serve --http 127.0.0.1:0 --config FILE EXTRA...`, its stderr kept
/// (see [`Served::stderr_line`]); returns once it listens.
pub(crate) fn gateway(file: &Path, extra: &[&str]) -> Served {
    let logs = Logs::default();
    let mut args = vec!["--http", "127.0.0.1:0", "--config", path_str(file)];
    args.extend_from_slice(extra);
    Served::spawn(BIN, &args, &[], Some(&logs))
}

pub(crate) fn path_str(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// `args` with `--header 'Authorization: Bearer TOKEN'` after the first.
fn with_token(args: &[&str], token: Option<&str>) -> Vec<String> {
    let mut all: Vec<String> = vec![args[0].to_owned()];
    if let Some(token) = token {
        all.push("--header".into());
        all.push(format!("Authorization: Bearer {token}"));
    }
    all.extend(args[1..].iter().map(|arg| (*arg).to_owned()));
    all
}

fn run_owned(args: &[String]) -> std::process::Output {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run(&args)
}

/// The names `mcp-tasks tools --url URL --json` lists for `token`, sorted.
pub(crate) fn tools(url: &str, token: Option<&str>) -> Vec<String> {
    let output = run_owned(&with_token(&["tools", "--url", url, "--json"], token));
    let (code, value) = json_of(&output);
    assert_eq!(code, 0, "tools: {value}");
    let mut names: Vec<String> = value["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("a tool list: {value}"))
        .iter()
        .map(|tool| tool["name"].as_str().expect("a name").to_owned())
        .collect();
    names.sort();
    names
}

/// `mcp-tasks call --url URL --json TOOL --arg ARG...` as `token`: the
/// exit code and the JSON object.
pub(crate) fn call(url: &str, token: Option<&str>, tool: &str, arguments: &[&str]) -> (i32, Value) {
    let mut args = vec!["call", "--url", url, "--json", tool];
    for argument in arguments {
        args.extend(["--arg", argument]);
    }
    json_of(&run_owned(&with_token(&args, token)))
}

/// [`call`], which must complete: the text of its result.
pub(crate) fn completed(url: &str, token: Option<&str>, tool: &str, arguments: &[&str]) -> String {
    let (code, value) = call(url, token, tool, arguments);
    assert_eq!(
        (code, &value["status"]),
        (0, &json!("completed")),
        "{tool} {arguments:?}: {value}"
    );
    assert!(value["taskId"].is_string(), "a task: {value}");
    value["result"]["content"][0]["text"]
        .as_str()
        .expect("a text result")
        .to_owned()
}

/// The answer to a call of `tool`, which no upstream serves to `token`,
/// with the tool's name replaced by `TOOL` (so that two such answers
/// compare equal when they say the same thing).
pub(crate) fn refused(url: &str, token: Option<&str>, tool: &str) -> String {
    let (code, value) = call(url, token, tool, &[]);
    assert_ne!(code, 0, "{tool}: {value}");
    assert_eq!(
        value["error"],
        json!({"code": -32602, "message": format!("unknown tool: {tool}")}),
        "{tool}: {value}"
    );
    value.to_string().replace(tool, "TOOL")
}

/// `NAME__TOOL` for each demo tool.
fn prefixed(name: &str) -> Vec<String> {
    DEMO.iter().map(|tool| format!("{name}__{tool}")).collect()
}

fn sorted(mut names: Vec<String>) -> Vec<String> {
    names.sort();
    names
}

/// The tools and statuses of the tasks in the SQLite file `store` (`admin
/// ls --store`), sorted, once no process holds it any more (within 20 s).
fn tools_run_on(store: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let output = run(&["admin", "ls", "--store", store, "--json"]);
        if output.status.success() {
            let (_, listed) = json_of(&output);
            let tools = listed
                .as_array()
                .unwrap_or_else(|| panic!("an array: {listed}"))
                .iter()
                .map(|task| {
                    format!(
                        "{} {}",
                        task["tool"].as_str().expect("a tool"),
                        task["status"].as_str().expect("a status")
                    )
                })
                .collect();
            return sorted(tools);
        }
        assert!(
            Instant::now() < deadline,
            "admin ls --store {store}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn upstreams_are_listed_by_prefix_and_each_call_runs_on_its_own() {
    let folder = Folder::new();
    // Each upstream keeps its tasks in a file of its own: read after the
    // gateway is gone, they say which upstream ran which call.
    let store = |name: &str| format!("sqlite:{}", folder.path(&format!("{name}.db")).display());
    let upstream = |name: &str| {
        quoted(&format!(
            "{BIN} serve --stdio --store {} --poll-interval 50",
            store(name)
        ))
    };
    let file = folder.write(
        "gw.toml",
        &format!(
            r#"# top-level keys are serve's flags
store = "memory"
poll-interval = 50

[[upstream]]
name = "a"
command = {a}

[[upstream]]
name = "b"
command = {b}
connections = 1

[[upstream]]
name = "plain"
command = {plain}
prefix = false
deny-tools = ["confirm_*", "failing_tool"]
"#,
            a = upstream("a"),
            b = upstream("b"),
            plain = upstream("plain"),
        ),
    );
    let served = gateway(&file, &[]);
    let url = served.url.clone();

    let mut expected = prefixed("a");
    expected.extend(prefixed("b"));
    expected.extend(["long_job".to_owned(), "sleep".to_owned()]);
    assert_eq!(tools(&url, None), sorted(expected));

    assert_eq!(completed(&url, None, "a__sleep", &["ms=50"]), "slept 50 ms");
    assert_eq!(
        completed(&url, None, "b__long_job", &["steps=2", "step_ms=10"]),
        "done: 2 steps"
    );
    assert_eq!(completed(&url, None, "sleep", &["ms=70"]), "slept 70 ms");
    assert_eq!(
        completed(&url, None, "long_job", &["steps=1", "step_ms=10"]),
        "done: 1 steps"
    );
    // Denied on the unprefixed upstream: unknown, as a name nobody serves.
    assert_eq!(
        refused(&url, None, "confirm_action"),
        refused(&url, None, "no_such_tool")
    );
    // The upstream's own name is not a name the gateway serves.
    refused(&url, None, "a__no_such_tool");

    // Input goes to the upstream that asked, and back.
    let (code, value) = json_of(&run(&[
        "call",
        "--url",
        &url,
        "--json",
        "a__confirm_action",
        "--answer",
        "confirm=true",
    ]));
    assert_eq!(
        (code, &value["result"]["content"][0]["text"]),
        (0, &json!("confirmed: run the demo")),
        "{value}"
    );
    // A cancel goes to the upstream that runs the task.
    let output = run(&[
        "call",
        "--url",
        &url,
        "b__sleep",
        "--arg",
        "ms=60000",
        "--no-wait",
    ]);
    assert!(output.status.success(), "{output:?}");
    let id = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let (code, value) = json_of(&run(&["cancel", "--url", &url, "--json", &id]));
    assert_eq!(value["status"], "cancelled", "{code}: {value}");

    drop(served);
    assert_eq!(
        tools_run_on(&store("a")),
        ["confirm_action completed", "sleep completed"]
    );
    assert_eq!(
        tools_run_on(&store("b")),
        ["long_job completed", "sleep cancelled"]
    );
    assert_eq!(
        tools_run_on(&store("plain")),
        ["long_job completed", "sleep completed"]
    );
}

#[test]
fn two_unprefixed_upstreams_listing_one_name_are_refused_at_start() {
    let folder = Folder::new();
    let file = folder.write(
        "gw.toml",
        &format!(
            "store = \"memory\"\n\n[[upstream]]\nname = \"first\"\ncommand = {demo}\nprefix = \
             false\n\n[[upstream]]\nname = \"second\"\ncommand = {demo}\nprefix = false\n",
            demo = demo()
        ),
    );
    let output = run(&[
        "serve",
        "--http",
        "127.0.0.1:0",
        "--config",
        path_str(&file),
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(64), "{stderr}");
    assert!(
        stderr.contains("\"first\"") && stderr.contains("\"second\""),
        "both upstreams named: {stderr}"
    );
    assert!(stderr.contains("long_job"), "the tool named: {stderr}");
}

#[test]
fn a_label_not_allowed_neither_lists_nor_calls_the_tool() {
    let folder = Folder::new();
    folder.tokens("tokens.txt", &[(ALICE, "alice"), (BOB, "bob")]);
    let file = folder.write(
        "gw.toml",
        &format!(
            r#"store = "memory"
poll-interval = 50
auth-tokens = "tokens.txt"

[[upstream]]
name = "ops"
command = {demo}
labels = ["alice"]

[[upstream]]
name = "shared"
command = {demo}

[[upstream.access]]
tools = ["sleep"]
labels = ["alice"]
"#,
            demo = demo()
        ),
    );
    let served = gateway(&file, &[]);
    let url = served.url.clone();

    let mut everything = prefixed("ops");
    everything.extend(prefixed("shared"));
    assert_eq!(tools(&url, Some(ALICE)), sorted(everything));
    assert_eq!(
        tools(&url, Some(BOB)),
        [
            "shared__confirm_action",
            "shared__failing_tool",
            "shared__long_job"
        ]
    );

    // Bob: the same answer for a tool he may not reach as for one that
    // does not exist, whether the upstream or the tool is closed to him.
    let unknown = refused(&url, Some(BOB), "shared__no_such_tool");
    assert_eq!(refused(&url, Some(BOB), "ops__long_job"), unknown);
    assert_eq!(refused(&url, Some(BOB), "shared__sleep"), unknown);
    assert_eq!(refused(&url, Some(BOB), "ops__no_such_tool"), unknown);
    assert_eq!(
        completed(
            &url,
            Some(BOB),
            "shared__long_job",
            &["steps=1", "step_ms=10"]
        ),
        "done: 1 steps"
    );

    // Alice reaches both.
    assert_eq!(
        completed(
            &url,
            Some(ALICE),
            "ops__long_job",
            &["steps=1", "step_ms=10"]
        ),
        "done: 1 steps"
    );
    assert_eq!(
        completed(&url, Some(ALICE), "shared__sleep", &["ms=20"]),
        "slept 20 ms"
    );
}

/// Runs `serve --http 127.0.0.1:0 --config FILE EXTRA` with the file
/// `text`, which must be refused with exit 64: stderr.
fn refused_config(folder: &Folder, text: &str, extra: &[&str]) -> (PathBuf, String) {
    let file = folder.write("bad.toml", text);
    let mut args = vec![
        "serve",
        "--http",
        "127.0.0.1:0",
        "--config",
        path_str(&file),
    ];
    args.extend_from_slice(extra);
    let output = run(&args);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(64), "{text}: {stderr}");
    (file, stderr)
}

/// Refused with `error: FILE:LINE: ...` naming `what`.
fn refused_at(folder: &Folder, text: &str, line: usize, what: &str) {
    let (file, stderr) = refused_config(folder, text, &[]);
    let at = format!("error: {}:{line}: ", file.display());
    assert!(stderr.contains(&at), "{at:?} for {text:?}: {stderr}");
    assert!(stderr.contains(what), "{what:?} for {text:?}: {stderr}");
}

#[test]
fn a_bad_config_file_is_refused_naming_its_file_and_line() {
    let folder = Folder::new();
    let demo = demo();
    refused_at(
        &folder,
        "store = \"memory\"\ncolour = \"red\"\n",
        2,
        "colour",
    );
    refused_at(
        &folder,
        "store = \"memory\"\n\npoll-interval = \"fast\"\n",
        3,
        "poll-interval",
    );
    refused_at(
        &folder,
        &format!(
            "store = \"memory\"\n\n[[upstream]]\nname = \"a\"\ncommand = {demo}\nprefixed = true\n"
        ),
        6,
        "prefixed",
    );
    refused_at(
        &folder,
        &format!("[[upstream]]\nname = \"a\"\ncommand = {demo}\ncall-timeout = \"soon\"\n"),
        4,
        // The line names the key; the reason, the value.
        "\"soon\"",
    );
    refused_at(
        &folder,
        &format!(
            "store = \"memory\"\n\n[[upstream]]\nname = \"a\"\ncommand = {demo}\nurl = \
             \"http://127.0.0.1:9/mcp\"\n"
        ),
        3,
        "url",
    );
    // A file that is not TOML.
    refused_at(&folder, "store = \"memory\"\n[[upstream]\n", 2, "");
}

#[test]
fn upstream_flags_beside_the_files_upstreams_are_refused_naming_the_file() {
    let folder = Folder::new();
    let demo = demo();
    let file_upstream =
        format!("store = \"memory\"\n[[upstream]]\nname = \"a\"\ncommand = {demo}\n");
    for flag in ["--upstream", "--upstream-url"] {
        let value = match flag {
            "--upstream" => stdio_server(),
            _ => "http://127.0.0.1:9/mcp".to_owned(),
        };
        let (file, stderr) = refused_config(&folder, &file_upstream, &[flag, &value]);
        assert!(stderr.contains(flag), "{flag}: {stderr}");
        // It names the file, as every other config error does.
        assert!(
            stderr.contains(path_str(&file)),
            "the refusal of {flag} does not name the config file: {stderr}"
        );
    }
}

#[test]
fn a_slow_call_fails_at_its_timeout_and_a_broken_upstream_fails_fast() {
    let folder = Folder::new();
    // Serves the first time it is started, exits at once every later time
    // (its pid is written so that the test can kill the first).
    let flag = folder.path("started");
    let pid = folder.path("pid");
    // (The gateway runs `exec LINE` with sh -c: a script needs a shell of its own.)
    let flaky = format!(
        "sh -c 'if [ -e {flag} ]; then exit 1; fi; touch {flag}; echo $$ > {pid}; exec {server}'",
        flag = flag.display(),
        pid = pid.display(),
        server = stdio_server()
    );
    let file = folder.write(
        "gw.toml",
        &format!(
            r#"store = "memory"
poll-interval = 50

[[upstream]]
name = "slow"
command = {demo}
call-timeout = 1

[[upstream]]
name = "flaky"
command = {flaky}
breaker-failures = 2
breaker-cool-down = 60
"#,
            demo = demo(),
            flaky = quoted(&flaky)
        ),
    );
    let served = gateway(&file, &[]);
    let url = served.url.clone();

    // The call timeout: the task fails at the limit, naming the upstream.
    let began = Instant::now();
    let (code, value) = call(&url, None, "slow__sleep", &["ms=5000"]);
    let took = began.elapsed();
    assert_eq!((code, &value["status"]), (2, &json!("failed")), "{value}");
    let message = value["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("slow") && message.contains("1s") && message.contains("call timeout"),
        "{value}"
    );
    assert!(took < Duration::from_millis(4500), "failed after {took:?}");
    assert_eq!(
        completed(&url, None, "flaky__sleep", &["ms=10"]),
        "slept 10 ms"
    );

    // The flaky upstream dies; every restart exits at once: after two
    // failures in a row its calls fail fast, saying so.
    let pid = std::fs::read_to_string(&pid).expect("the pid file");
    let killed = std::process::Command::new("kill")
        .args(["-9", pid.trim()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let message = loop {
        let began = Instant::now();
        let (code, value) = call(&url, None, "flaky__sleep", &["ms=10"]);
        let took = began.elapsed();
        assert_ne!(code, 0, "the dead upstream completed a call: {value}");
        let message = value["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if message.contains("is unavailable") {
            assert_eq!(value["status"], "failed", "{value}");
            assert!(took < Duration::from_secs(3), "not fast: {took:?}");
            break message;
        }
        assert!(Instant::now() < deadline, "no breaker within 30 s: {value}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        message.contains("the upstream flaky is unavailable")
            && message.contains("calls fail fast for 60s"),
        "{message}"
    );
    // The other upstream's tasks do not notice.
    assert_eq!(
        completed(&url, None, "slow__sleep", &["ms=100"]),
        "slept 100 ms"
    );
    drop(served);
}
