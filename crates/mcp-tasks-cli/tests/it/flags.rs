//! Every flag that cannot apply to the command as given is refused, exit 64,
//! with a sentence naming it and why: [`REFUSED`] is the list (one row per
//! flag and the combination it cannot apply in), each row run against the
//! real binary. And the same flags where they apply still start and work,
//! one test per family, so that a refusal cannot hide a flag that works.

use std::path::Path;

use crate::serving::Served;
use crate::support::{BIN, json_of, run, run_with_env, stdio_server};

/// The list: what is refused, its command line, and what the refusal says.
/// In the arguments `{S}` is a server on stdio, `{URL}` an HTTP endpoint
/// nothing answers at, `{TOKENS}` a tokens file, `{DB}` a SQLite path,
/// `{DIR}` a folder, `{ENTRIES}` a `--config` file with `[[upstream]]`
/// entries, `{FLAGS}` one whose key `lease-period` is a flag, and
/// `{STDIO_TASK}` the id of a task the journal has on a server on stdio.
#[rustfmt::skip]
const REFUSED: &[(&str, &[&str], &str)] = &[
    // A server on stdio has no HTTP and is not signed in to.
    ("a header for a child", &["call", "--stdio", "{S}", "sleep", "--header", "X-A: b"], "--header applies to a server reached by URL (--url); this server is a command run on stdio, which has no HTTP headers"),
    ("--resolve for a child", &["tools", "--stdio", "{S}", "--resolve", "a.test=127.0.0.1"], "--resolve applies to a server reached by URL (--url); this server is a command run on stdio, which is not connected to by name"),
    ("scopes for a child", &["discover", "--stdio", "{S}", "--oauth-scopes", "tasks"], "--oauth-scopes applies to a server reached by URL (--url); this server is a command run on stdio, which is not signed in to"),
    ("a client id for a child", &["call", "--stdio", "{S}", "sleep", "--oauth-client-id", "c"], "--oauth-client-id applies to a server reached by URL"),
    ("client credentials for a child", &["call", "--stdio", "{S}", "sleep", "--oauth-client-credentials", "--oauth-client-id", "c"], "--oauth-client-credentials applies to a server reached by URL"),
    ("a token file for a child", &["call", "--stdio", "{S}", "sleep", "--oauth-tokens", "{DIR}/t.json"], "--oauth-tokens applies to a server reached by URL"),
    ("a sign-in timeout for a child", &["call", "--stdio", "{S}", "sleep", "--oauth-timeout", "5"], "--oauth-timeout applies to a server reached by URL"),
    ("a header for a child of the journal", &["get", "{STDIO_TASK}", "--header", "X-A: b"], "--header applies to a server reached by URL (--url); this server is a command run on stdio"),
    ("a header for a child, several tasks", &["wait", "--stdio", "{S}", "a", "b", "--header", "X-A: b"], "--header applies to a server reached by URL"),
    // Over HTTP.
    ("--resolve for another host", &["call", "--url", "http://tasks.example.test:9/mcp", "sleep", "--resolve", "other.test=127.0.0.1"], "--resolve other.test=127.0.0.1 names a host that http://tasks.example.test:9/mcp does not (its host is tasks.example.test): no connection would use it"),
    ("a sign-in beside a token", &["tools", "--url", "{URL}", "--header", "Authorization: Bearer t", "--oauth-client-id", "c"], "--oauth-client-id is for signing in, and --header 'Authorization: ...' gives the token itself, so no sign-in happens: give one or the other"),
    ("a browser timeout for a machine", &["call", "--url", "{URL}", "sleep", "--oauth-client-credentials", "--oauth-client-id", "c", "--oauth-timeout", "5"], "--oauth-timeout bounds a sign-in in the browser, and --oauth-client-credentials signs in without one"),
    // How to wait, without a wait.
    ("--detach without a wait", &["call", "--url", "{URL}", "sleep", "--no-wait", "--detach"], "--detach says what Ctrl-C does to a wait, and --no-wait does not wait: it prints the task id once the task exists"),
    ("--listen without a wait", &["call", "--url", "{URL}", "sleep", "--no-wait", "--listen"], "--listen chooses how a wait hears its task, and --no-wait does not wait: it prints the task id once the task exists"),
    ("--poll without a wait", &["call", "--url", "{URL}", "sleep", "--no-wait", "--poll"], "--poll chooses how a wait hears its task, and --no-wait does not wait"),
    ("ls: a header without --refresh", &["ls", "--header", "X-A: b"], "--header goes with the requests of --refresh; without it ls reads the journal alone and asks no server"),
    // admin.
    ("admin: a key prefix for SQLite", &["admin", "ls", "--store", "sqlite:{DB}", "--redis-key-prefix", "x:"], "--redis-key-prefix applies to a Redis store (--store redis://...); this command reaches the store sqlite:"),
    ("admin: a key prefix for a server", &["admin", "ls", "--server", "http://127.0.0.1:9", "--redis-key-prefix", "x:"], "--redis-key-prefix applies to a Redis store (--store redis://...); this command reaches a server's operator listener (--server), whose server has its own"),
    ("admin: an audit log for hash", &["admin", "hash", "--store", "sqlite:{DB}", "--audit-log", "{DIR}/audit", "some-id"], "--audit-log receives the audit line of an action, and hash writes none"),
    // serve: HTTP's flags over stdio.
    ("serve: connections over stdio", &["serve", "--stdio", "--store", "memory", "--max-connections", "8"], "--max-connections applies to --http only: over stdio the one connection is stdin and stdout"),
    ("serve: an idle timeout over stdio", &["serve", "--stdio", "--store", "memory", "--idle-timeout", "30"], "--idle-timeout applies to --http only: over stdio the one connection is stdin and stdout"),
    ("serve: a host over stdio", &["serve", "--store", "memory", "--allowed-host", "tasks.example.test"], "--allowed-host applies to --http only: over stdio no request has a Host header"),
    ("serve: an origin over stdio", &["serve", "--store", "memory", "--allowed-origin", "https://tasks.example.test"], "--allowed-origin applies to --http only: over stdio no request has an Origin header"),
    ("serve: tokens over stdio", &["serve", "--store", "memory", "--auth-tokens", "{TOKENS}"], "--auth-tokens applies to --http only: over stdio the one caller is the process that started the server"),
    ("serve: an issuer over stdio", &["serve", "--store", "memory", "--oauth-issuer", "https://issuer.example.test"], "--oauth-issuer applies to --http only"),
    ("serve: an audience over stdio", &["serve", "--store", "memory", "--oauth-audience", "https://tasks.example.test/mcp"], "--oauth-audience applies to --http only"),
    ("serve: a count by header over stdio", &["serve", "--store", "memory", "--quota-by-header"], "--quota-by-header applies to --http only: over stdio the one caller is the process that started the server"),
    // serve: who may call.
    ("serve: scopes without an issuer", &["serve", "--http", "127.0.0.1:0", "--store", "memory", "--oauth-scopes", "tasks"], "--oauth-scopes needs --oauth-issuer: it says how that issuer's tokens are checked"),
    ("serve: a count by header with tokens", &["serve", "--http", "127.0.0.1:0", "--store", "memory", "--auth-tokens", "{TOKENS}", "--quota-by-header"], "--quota-by-header counts unauthenticated callers apart by their Authorization header, and with --auth-tokens or --oauth-issuer every caller is authenticated and counted by its token"),
    // serve: who runs when.
    ("serve: a weight without labels", &["serve", "--http", "127.0.0.1:0", "--store", "memory", "--weight", "alice=2"], "--weight gives the callers of a token label their share of the running slots, and without --auth-tokens (or --oauth-issuer) no caller has a label"),
    ("serve: a weight where nothing waits", &["serve", "--http", "127.0.0.1:0", "--store", "memory", "--auth-tokens", "{TOKENS}", "--weight", "alice=2", "--max-running", "0"], "--weight shares the running slots among callers waiting for one, and with --max-running 0 and no --tool-concurrency no task ever waits"),
    ("serve: a queue where nothing waits", &["serve", "--store", "memory", "--max-running", "0", "--max-queued", "5"], "--max-queued bounds the tasks waiting for a running slot, and with --max-running 0 and no --tool-concurrency no task ever waits"),
    ("serve: a bound for no tool", &["serve", "--store", "memory", "--tool-concurrency", "nosuch=2"], "--tool-concurrency nosuch=2 names no tool of this server: it serves the demo tools, long_job, confirm_action, failing_tool, sleep"),
    // serve: a store's flags for another store.
    ("serve: SQLite's sync for memory", &["serve", "--store", "memory", "--sqlite-sync", "full"], "--sqlite-sync applies to a SQLite store (--store sqlite:PATH); this server's store is memory, not a SQLite file"),
    ("serve: a lease for memory", &["serve", "--store", "memory", "--lease-period", "5000"], "--lease-period applies to a store replicas share (--store redis://... or postgres://...); this server's store is memory, which one process holds: it has no leases"),
    ("serve: a lease for the default store", &["serve", "--lease-period", "5000"], "this server's store is SQLite in the user's data directory (the default), which one process holds: it has no leases"),
    ("serve: a key prefix for SQLite", &["serve", "--store", "sqlite:{DB}", "--redis-key-prefix", "x:"], "--redis-key-prefix applies to a Redis store (--store redis://...); this server's store is sqlite:"),
    ("serve: a schema for Redis", &["serve", "--store", "redis://127.0.0.1:1/0", "--postgres-schema", "x"], "--postgres-schema applies to a PostgreSQL store (--store postgres://...); this server's store is redis://127.0.0.1:1/0, which has no schema"),
    ("serve: a key of --config", &["serve", "--config", "{FLAGS}"], "--lease-period applies to a store replicas share (--store redis://... or postgres://...); this server's store is memory"),
    // serve: one upstream's flags without it.
    ("serve: a policy without an upstream", &["serve", "--store", "memory", "--tasks", "sleep=required"], "--tasks applies to --upstream or --upstream-url only (a gateway); without one this server serves the demo tools"),
    ("serve: a default policy without an upstream", &["serve", "--store", "memory", "--tasks-default", "optional"], "--tasks-default applies to --upstream or --upstream-url only"),
    ("serve: a header without an upstream", &["serve", "--store", "memory", "--upstream-header", "X-A: b"], "--upstream-header applies to --upstream or --upstream-url only"),
    ("serve: connections without an upstream", &["serve", "--store", "memory", "--upstream-connections", "2"], "--upstream-connections applies to --upstream or --upstream-url only"),
    ("serve: a root without an upstream", &["serve", "--store", "memory", "--upstream-root", "{DIR}"], "--upstream-root applies to --upstream or --upstream-url only"),
    ("serve: a header for a command", &["serve", "--store", "memory", "--upstream", "true", "--upstream-header", "X-A: b"], "--upstream-header applies to --upstream-url only: the upstream of --upstream is a command on stdio, which has no HTTP headers"),
    ("serve: one upstream's flag beside entries", &["serve", "--config", "{ENTRIES}", "--tasks", "x=optional"], "--tasks cannot be used with the [[upstream]] entries of"),
    // serve: the operator listener's.
    ("serve: admin tokens without --admin", &["serve", "--store", "memory", "--admin-tokens", "{TOKENS}"], "--admin-tokens applies to --admin only: it guards the operator listener, and without --admin there is none"),
];

/// A token of the tokens file, labelled alice.
const ALICE: &str = "alice-token-0123456789abcdef";

/// The files the rows and the starts name, in `dir`.
struct Files {
    tokens: String,
    db: String,
    entries: String,
    flags: String,
}

fn files(dir: &Path) -> Files {
    let tokens = dir.join("tokens");
    std::fs::write(&tokens, format!("{ALICE} alice\n")).unwrap();
    std::fs::set_permissions(&tokens, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let entries = dir.join("entries.toml");
    std::fs::write(
        &entries,
        "store = \"memory\"\n[[upstream]]\nname = \"a\"\ncommand = \"true\"\n",
    )
    .unwrap();
    let flags = dir.join("flags.toml");
    std::fs::write(&flags, "store = \"memory\"\nlease-period = 5000\n").unwrap();
    let text = |path: &Path| path.display().to_string();
    Files {
        tokens: text(&tokens),
        db: text(&dir.join("tasks.db")),
        entries: text(&entries),
        flags: text(&flags),
    }
}

#[test]
fn every_flag_that_cannot_apply_is_refused_with_why() {
    let dir = tempfile::tempdir().unwrap();
    let files = files(dir.path());
    let server = stdio_server();
    // A task the journal has on a server on stdio (the server ends with
    // the call: the refusal comes before anything is sent).
    let created = run(&[
        "call",
        "--stdio",
        &server,
        "sleep",
        "--arg",
        "ms=60000",
        "--no-wait",
        "--json",
    ]);
    let (_, created) = json_of(&created);
    let stdio_task = created["taskId"].as_str().expect("a task id").to_owned();
    let dir_text = dir.path().display().to_string();
    let fill = |arg: &str| {
        arg.replace("{S}", &server)
            .replace("{URL}", "http://127.0.0.1:9/mcp")
            .replace("{TOKENS}", &files.tokens)
            .replace("{DB}", &files.db)
            .replace("{DIR}", &dir_text)
            .replace("{ENTRIES}", &files.entries)
            .replace("{FLAGS}", &files.flags)
            .replace("{STDIO_TASK}", &stdio_task)
    };
    let mut wrong = Vec::new();
    for (what, args, says) in REFUSED {
        let args: Vec<String> = args.iter().map(|arg| fill(arg)).collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = run(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let said = stderr.trim_end();
        if output.status.code() != Some(64) || !said.contains(&fill(says)) {
            wrong.push(format!(
                "{what}: exit {:?}, stderr {said:?}, expected 64 and {says:?}",
                output.status.code()
            ));
        } else if !output.stdout.is_empty() || said.lines().count() != 1 {
            wrong.push(format!("{what}: more than the one sentence: {output:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // Nothing was written where a refused flag named.
    assert!(
        !Path::new(&files.db).exists(),
        "a refused serve opened its store"
    );
    assert!(!dir.path().join("audit").exists());
}

#[test]
fn http_and_sign_in_flags_where_they_apply_still_start() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(
        BIN,
        "127.0.0.1:0",
        "memory",
        &[
            "--max-connections",
            "8",
            "--idle-timeout",
            "30",
            "--allowed-host",
            "tasks.example.test",
            "--allowed-origin",
            "https://tasks.example.test:*",
            "--quota-by-header",
            "--tool-concurrency",
            "sleep=2",
            "--max-queued",
            "5",
        ],
    );
    let port = served.address().rsplit(':').next().unwrap().to_owned();
    let named = format!("http://tasks.example.test:{port}/mcp");
    let tokens = dir.path().join("t.json").display().to_string();
    let ran = |args: &[&str], code: i32| {
        let output = run(args);
        assert_eq!(output.status.code(), Some(code), "{args:?}: {output:?}");
        output
    };
    // --resolve for the URL's own host, a header, a wait that polls.
    ran(
        &[
            "call",
            "--url",
            &named,
            "--resolve",
            "tasks.example.test=127.0.0.1",
            "--header",
            "X-Tenant: a",
            "--poll",
            "sleep",
            "--arg",
            "ms=10",
        ],
        0,
    );
    // How to wait, with a wait.
    ran(
        &[
            "call",
            "--url",
            &served.url,
            "--listen",
            "--detach",
            "sleep",
            "--arg",
            "ms=10",
        ],
        0,
    );
    // Sign-in flags for a URL that needs none: kept, unused, no error.
    ran(
        &[
            "tools",
            "--url",
            &served.url,
            "--oauth-scopes",
            "tasks",
            "--oauth-tokens",
            &tokens,
            "--oauth-timeout",
            "5",
        ],
        0,
    );
    // --no-wait alone, then ls --refresh with its header (on a journal of
    // its own: the test process's has other tests' servers).
    let journal = dir.path().join("journal.sqlite3").display().to_string();
    let env = [("MCP_TASKS_JOURNAL", journal.as_str())];
    let started = run_with_env(
        &[
            "call",
            "--url",
            &served.url,
            "sleep",
            "--arg",
            "ms=60000",
            "--no-wait",
        ],
        &env,
    );
    assert_eq!(started.status.code(), Some(0), "{started:?}");
    let id = String::from_utf8_lossy(&started.stdout).trim().to_owned();
    // And one on a server on stdio, gone with it: the headers, a URL's,
    // do not keep its refresh from asking a new one.
    let server = stdio_server();
    let on_stdio = run_with_env(
        &[
            "call",
            "--stdio",
            &server,
            "sleep",
            "--arg",
            "ms=60000",
            "--no-wait",
        ],
        &env,
    );
    assert_eq!(on_stdio.status.code(), Some(0), "{on_stdio:?}");
    let gone = String::from_utf8_lossy(&on_stdio.stdout).trim().to_owned();
    let listed = run_with_env(
        &["ls", "--refresh", "--header", "X-Tenant: a", "--json"],
        &env,
    );
    let (code, rows) = json_of(&listed);
    assert_eq!(code, 0, "{listed:?}");
    let rows = rows.as_array().expect("an array").clone();
    let status = |id: &str| {
        let row = rows.iter().find(|row| row["taskId"] == id);
        row.unwrap_or_else(|| panic!("{id} in {rows:?}"))["status"].clone()
    };
    assert_eq!(status(&id), "working", "asked again: {rows:?}");
    assert_eq!(status(&gone), "gone", "asked again: {rows:?}");
}

#[test]
fn access_admission_and_operator_flags_where_they_apply_still_start() {
    let dir = tempfile::tempdir().unwrap();
    let files = files(dir.path());
    let served = Served::start(
        BIN,
        "127.0.0.1:0",
        "memory",
        &[
            "--auth-tokens",
            &files.tokens,
            "--weight",
            "alice=2",
            "--max-running",
            "4",
            "--admin",
            "127.0.0.1:0",
            "--admin-tokens",
            &files.tokens,
        ],
    );
    let header = format!("Authorization: Bearer {ALICE}");
    let output = run(&["tools", "--url", &served.url, "--header", &header]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(!served.admin.is_empty(), "the operator listener started");
}

#[test]
fn store_and_gateway_flags_where_they_apply_still_start() {
    let dir = tempfile::tempdir().unwrap();
    let files = files(dir.path());
    let store = format!("sqlite:{}", files.db);
    // SQLite's flag on SQLite; then admin on that file (no server holds it
    // once this one is gone), with its audit log.
    drop(Served::start(
        BIN,
        "127.0.0.1:0",
        &store,
        &["--sqlite-sync", "full"],
    ));
    let audit = dir.path().join("audit");
    let audit_text = audit.display().to_string();
    let output = run(&["admin", "ls", "--store", &store, "--audit-log", &audit_text]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(std::fs::read_to_string(&audit).is_ok_and(|text| !text.is_empty()));
    // Redis's flags on Redis, for serve and for admin.
    let redis = mcp_tasks_redis::testing::RedisServer::start();
    let prefix = [
        "--lease-period",
        "5000",
        "--redis-key-prefix",
        "flags-test:",
    ];
    drop(Served::start(BIN, "127.0.0.1:0", &redis.url(), &prefix));
    let output = run(&[
        "admin",
        "ls",
        "--store",
        &redis.url(),
        "--redis-key-prefix",
        "flags-test:",
    ]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    // One upstream's flags with it.
    let upstream = format!("{BIN} serve --stdio --store memory");
    let gateway = Served::start(
        BIN,
        "127.0.0.1:0",
        "memory",
        &[
            "--upstream",
            &upstream,
            "--tasks",
            "sleep=required",
            "--tasks-default",
            "optional",
            "--upstream-connections",
            "2",
            "--upstream-root",
            &dir.path().display().to_string(),
        ],
    );
    let output = run(&["call", "--url", &gateway.url, "sleep", "--arg", "ms=10"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
}
