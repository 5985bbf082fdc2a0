//! What the binary prints for people, and on which stream: the outcome on
//! stdout (a result, else the task's status line: `get`, `cancel`, a
//! timeout), why on stderr; `ls` and `tools` in columns as wide as what
//! they hold; durations rounded.

use std::path::Path;

use crate::support::{BIN, fixture_server, http_server, run};
use crate::wait_last_and_ls::{wait_output, with_journal};

/// Runs the binary with `journal` to its end.
fn cli(journal: &Path, args: &[&str]) -> std::process::Output {
    wait_output(with_journal(journal, args).spawn().expect("starts"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A task that sleeps a minute, made with `--no-wait`: its id.
fn sleeping(journal: &Path, server: &[&str]) -> String {
    let mut args = vec!["call"];
    args.extend_from_slice(server);
    args.extend_from_slice(&["sleep", "--arg", "ms=60000", "--no-wait"]);
    let output = cli(journal, &args);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    text(&output.stdout).trim().to_owned()
}

/// Where `column` (a word of `header`) starts, in characters.
fn start_of(header: &str, column: &str) -> usize {
    let at = header.find(column).expect("the column is in the header");
    header[..at].chars().count()
}

#[test]
fn get_and_cancel_print_the_state_line_on_stdout() {
    let server = http_server();
    let dir = tempfile::tempdir().expect("a temp dir");
    let journal = dir.path().join("journal.sqlite3");
    let id = sleeping(&journal, &["--url", &server.url]);

    let got = cli(&journal, &["get", "--url", &server.url, &id]);
    assert_eq!(got.status.code(), Some(0), "{got:?}");
    // The state is the result: stdout, a whole line, no trailing space.
    assert_eq!(text(&got.stdout), "working\n", "{got:?}");
    assert_eq!(text(&got.stderr), "", "{got:?}");

    let cancelled = cli(&journal, &["cancel", &id]);
    assert_eq!(cancelled.status.code(), Some(3), "{cancelled:?}");
    // Its status message says it was cancelled, and by whom.
    assert_eq!(
        text(&cancelled.stdout),
        "cancelled by the caller\n",
        "{cancelled:?}"
    );

    // A failed task: its status on stdout, why on stderr.
    let failed = cli(&journal, &["call", "--url", &server.url, "failing_tool"]);
    assert_eq!(failed.status.code(), Some(2), "{failed:?}");
    assert_eq!(text(&failed.stdout), "failed\n", "{failed:?}");
    let stderr = text(&failed.stderr);
    assert!(
        stderr.contains("error -32603: the demo job failed on purpose"),
        "{stderr}"
    );
    // An unknown id: no task, so no status line; the error on stderr.
    let unknown = cli(
        &journal,
        &[
            "get",
            "--url",
            &server.url,
            "0123456789abcdef0123456789abcdef",
        ],
    );
    assert_eq!(unknown.status.code(), Some(2), "{unknown:?}");
    assert_eq!(text(&unknown.stdout), "", "{unknown:?}");
    assert!(text(&unknown.stderr).contains("-32602"), "{unknown:?}");
}

#[test]
fn a_timeout_says_how_long_it_waited_rounded() {
    let server = http_server();
    let dir = tempfile::tempdir().expect("a temp dir");
    let journal = dir.path().join("journal.sqlite3");
    let output = cli(
        &journal,
        &[
            "call",
            "--url",
            &server.url,
            "sleep",
            "--arg",
            "ms=60000",
            "--timeout",
            "1",
        ],
    );
    assert_eq!(output.status.code(), Some(5), "{output:?}");
    let stderr = text(&output.stderr);
    let waited = stderr
        .split("gave up after ")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .unwrap_or_else(|| panic!("no 'gave up after': {stderr}"));
    // Tenths of a second, as people read it ("1.0s"), not Debug's 1.001550807s.
    let (whole, tenths) = waited
        .strip_suffix('s')
        .and_then(|secs| secs.split_once('.'))
        .unwrap_or_else(|| panic!("{waited:?} is not N.Ns: {stderr}"));
    assert_eq!(whole, "1", "{stderr}");
    assert_eq!(tenths.len(), 1, "{stderr}");
    // The task is still working: that is the outcome, on stdout.
    assert_eq!(text(&output.stdout), "working\n", "{output:?}");
    // The status lines (no terminal) are on stderr, after the rounded
    // time since the call started.
    let first = stderr.lines().next().unwrap_or("");
    assert!(
        first.starts_with('[') && first.ends_with("] working"),
        "{stderr}"
    );
    let elapsed = first[1..first.len() - "] working".len()].trim();
    assert!(
        elapsed.ends_with("ms") || (elapsed.ends_with('s') && elapsed.len() <= 4),
        "{elapsed:?} is not rounded: {stderr}"
    );
}

#[test]
fn ls_has_a_header_and_columns_as_wide_as_their_cells() {
    let server = http_server();
    let dir = tempfile::tempdir().expect("a temp dir");
    let journal = dir.path().join("journal.sqlite3");
    let on_http = sleeping(&journal, &["--url", &server.url]);
    // A server on stdio is named by its command: long, past the column's
    // 60 characters whatever the path of the binary.
    let command = format!("{BIN} serve --stdio --store memory --poll-interval 100");
    let on_stdio = sleeping(&journal, &["--stdio", &command]);

    let output = cli(&journal, &["ls"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let stdout = text(&output.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "a header and two rows: {stdout}");
    let header = lines[0];
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["STATUS", "AGE", "TOOL", "SERVER", "TASK"],
        "{stdout}"
    );
    let server_at = start_of(header, "SERVER");
    let task_at = start_of(header, "TASK");
    for (line, id) in [(lines[1], &on_stdio), (lines[2], &on_http)] {
        // Newest first; the id last, whole, in its column.
        assert!(line.ends_with(id.as_str()), "{stdout}");
        assert_eq!(
            line.chars().count() - id.chars().count(),
            task_at,
            "{stdout}"
        );
        assert!(!line.ends_with(' '), "{line:?}");
        let server: String = line.chars().skip(server_at).collect();
        assert!(
            server.starts_with("http://") || server.starts_with("stdio: "),
            "{stdout}"
        );
    }
    // The stdio command, past 60 characters, is cut with an ellipsis; the
    // URL is whole.
    let cut: String = lines[1].chars().skip(server_at).take(60).collect();
    assert!(cut.ends_with('…'), "{stdout}");
    assert!(lines[2].contains(&server.url), "{stdout}");
    // The JSON has no header, and every value whole.
    let json = cli(&journal, &["ls", "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(rows.as_array().map(Vec::len), Some(2), "{rows}");
    let named = rows[0]["server"].as_str().unwrap_or("");
    assert!(named.ends_with(&command), "{rows}");
}

#[test]
fn tools_align_their_descriptions_after_the_longest_name() {
    let url = fixture_server();
    let output = run(&["tools", "--url", &url]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let stdout = text(&output.stdout);
    let longest = "test_input_required_result_multiple_inputs";
    assert!(stdout.contains(longest), "{stdout}");
    let width = stdout
        .lines()
        .map(|line| line.split("  ").next().unwrap_or("").chars().count())
        .max()
        .unwrap_or(0);
    assert_eq!(width, longest.len(), "{stdout}");
    for line in stdout.lines() {
        assert!(!line.ends_with(' '), "{line:?}");
        let name = line.split_whitespace().next().unwrap_or("");
        let rest = &line[name.len()..];
        if rest.is_empty() {
            continue;
        }
        // Every description starts two spaces after the longest name.
        let description_at = line.len() - rest.trim_start().len();
        assert_eq!(description_at, width + 2, "{line:?} in\n{stdout}");
    }
}
