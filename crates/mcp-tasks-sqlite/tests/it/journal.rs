//! The SQLite journal on a real file: entries, statuses, pruning, private
//! permissions, and several writers (each with its own connection, as
//! separate processes would have) sharing one file.

use std::sync::Arc;
use std::time::Duration;

use mcp_tasks::client::journal::{Journal, ServerRef, TaskRef};
use mcp_tasks::{Era, TaskId, TaskStatus, Ttl, UnixMillis};
use mcp_tasks_sqlite::SqliteJournal;

fn entry(server: &str, id: &str, created: u64) -> TaskRef {
    let json = serde_json::json!({
        "server": {"kind": "url", "at": server},
        "taskId": id,
        "era": "extension",
        "tool": "build",
        "createdAt": created,
        "ttl": 60_000,
        "status": "working",
        "seenAt": created,
    });
    serde_json::from_value(json).expect("a journal entry")
}

#[tokio::test]
async fn entries_are_kept_updated_listed_newest_first_and_pruned() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("private").join("journal.sqlite3");
    let journal = SqliteJournal::open(&path).unwrap();
    journal
        .record(&entry("http://a/mcp", "one", 1_000))
        .await
        .unwrap();
    journal
        .record(&entry("http://a/mcp", "two", 2_000))
        .await
        .unwrap();
    // The same id on another server is another task.
    journal
        .record(&entry("http://b/mcp", "one", 3_000))
        .await
        .unwrap();
    let listed = journal.list().await.unwrap();
    let order: Vec<_> = listed
        .iter()
        .map(|e| (e.server.to_string(), e.task_id.expose().to_owned()))
        .collect();
    assert_eq!(
        order,
        [
            ("http://b/mcp".to_owned(), "one".to_owned()),
            ("http://a/mcp".to_owned(), "two".to_owned()),
            ("http://a/mcp".to_owned(), "one".to_owned()),
        ]
    );
    assert_eq!(listed[0].era, Era::Extension);

    let a = ServerRef::Url("http://a/mcp".into());
    journal
        .update(
            &a,
            &TaskId::new("one"),
            &TaskStatus::Completed,
            None,
            UnixMillis::new(5_000),
        )
        .await
        .unwrap();
    // Unknown tasks are ignored.
    journal
        .update(
            &a,
            &TaskId::new("nope"),
            &TaskStatus::Failed,
            None,
            UnixMillis::new(5_000),
        )
        .await
        .unwrap();
    let one = journal
        .list()
        .await
        .unwrap()
        .into_iter()
        .find(|e| e.server == a && e.task_id.expose() == "one")
        .unwrap();
    assert_eq!(one.status, TaskStatus::Completed);
    assert_eq!(one.seen_at, UnixMillis::new(5_000));
    assert_eq!(one.ttl, Some(Ttl::from_millis(60_000)));

    // Finished and 60 s past when it was seen: pruned; the working ones stay.
    assert_eq!(journal.prune(UnixMillis::new(64_999)).await.unwrap(), 0);
    assert_eq!(journal.prune(UnixMillis::new(65_000)).await.unwrap(), 1);
    assert_eq!(journal.list().await.unwrap().len(), 2);
    journal.remove(&a, &TaskId::new("two")).await.unwrap();
    assert_eq!(journal.list().await.unwrap().len(), 1);

    // A reopened file has what was written.
    drop(journal);
    let reopened = SqliteJournal::open(&path).unwrap();
    assert_eq!(reopened.list().await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_task_marked_gone_stays_gone_across_a_reopen_until_its_server_reports_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.sqlite3");
    let journal = SqliteJournal::open(&path).unwrap();
    let a = ServerRef::Url("http://a/mcp".into());
    journal
        .record(&entry("http://a/mcp", "one", 1_000))
        .await
        .unwrap();
    journal
        .record(&entry("http://a/mcp", "two", 2_000))
        .await
        .unwrap();
    journal
        .mark_gone(&a, &TaskId::new("one"), UnixMillis::new(3_000))
        .await
        .unwrap();
    // Unknown tasks are ignored.
    journal
        .mark_gone(&a, &TaskId::new("nope"), UnixMillis::new(3_000))
        .await
        .unwrap();
    drop(journal);

    let journal = SqliteJournal::open(&path).unwrap();
    let find = |entries: Vec<TaskRef>, id: &str| {
        entries
            .into_iter()
            .find(|e| e.task_id.expose() == id)
            .unwrap()
    };
    let one = find(journal.list().await.unwrap(), "one");
    assert!(one.is_gone() && one.is_finished());
    assert_eq!(one.gone_at, Some(UnixMillis::new(3_000)));
    assert_eq!(one.status, TaskStatus::Working, "its last status is kept");
    assert!(!find(journal.list().await.unwrap(), "two").is_gone());

    // Kept a day after it went, as a finished task without a TTL.
    let day = 24 * 3600 * 1000;
    assert_eq!(
        journal
            .prune(UnixMillis::new(3_000 + day - 1))
            .await
            .unwrap(),
        0
    );

    // Its server reports on it after all (other credentials): not gone.
    journal
        .update(
            &a,
            &TaskId::new("one"),
            &TaskStatus::Working,
            None,
            UnixMillis::new(4_000),
        )
        .await
        .unwrap();
    let one = find(journal.list().await.unwrap(), "one");
    assert!(!one.is_gone() && !one.is_finished());

    journal
        .mark_gone(&a, &TaskId::new("two"), UnixMillis::new(5_000))
        .await
        .unwrap();
    assert_eq!(
        journal.prune(UnixMillis::new(5_000 + day)).await.unwrap(),
        1
    );
    let left: Vec<_> = journal.list().await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].task_id.expose(), "one");
}

#[cfg(unix)]
#[tokio::test]
async fn the_journal_is_private_to_its_user() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("data").join("mcp-tasks");
    let path = folder.join("journal.sqlite3");
    let journal = SqliteJournal::open(&path).unwrap();
    journal
        .record(&entry("http://a/mcp", "one", 1))
        .await
        .unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&folder), 0o700);
    assert_eq!(mode(&path), 0o600);
    let wal = folder.join("journal.sqlite3-wal");
    assert!(wal.exists(), "WAL mode keeps a -wal file");
    assert_eq!(mode(&wal), 0o600, "SQLite gives the WAL the file's mode");
}

#[tokio::test]
async fn writers_sharing_one_file_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.sqlite3");
    let mut writers = Vec::new();
    for writer in 0..4 {
        // Each its own connection, as each process would have.
        let journal = Arc::new(SqliteJournal::open(&path).unwrap());
        writers.push(tokio::spawn(async move {
            let server = ServerRef::Url(format!("http://{writer}/mcp"));
            for n in 0..50u64 {
                let id = format!("task-{n}");
                journal
                    .record(&entry(&format!("http://{writer}/mcp"), &id, n))
                    .await
                    .unwrap();
                journal
                    .update(
                        &server,
                        &TaskId::new(id),
                        &TaskStatus::Completed,
                        None,
                        UnixMillis::new(n + 1),
                    )
                    .await
                    .unwrap();
            }
        }));
    }
    for writer in writers {
        tokio::time::timeout(Duration::from_secs(60), writer)
            .await
            .expect("writers finish")
            .unwrap();
    }
    let all = SqliteJournal::open(&path).unwrap().list().await.unwrap();
    assert_eq!(all.len(), 200);
    assert!(all.iter().all(|e| e.status == TaskStatus::Completed));
}

/// Set in the child processes of the test below: the journal they open.
const CHILD_JOURNAL: &str = "MCP_TASKS_TEST_CHILD_JOURNAL";
/// And the moment they start, in microseconds since the epoch.
const CHILD_START: &str = "MCP_TASKS_TEST_CHILD_START";

fn now_micros() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros()
}

/// Not a test of its own: the body of each child process of the test below
/// (this test binary run again, filtered to this test). Opens the journal
/// and writes to it; without the variable it does nothing.
#[test]
fn child_process_opens_and_writes_the_journal() {
    let Some(path) = std::env::var_os(CHILD_JOURNAL) else {
        return;
    };
    // All the children start at the same moment, to the microsecond.
    let start: u128 = std::env::var(CHILD_START).unwrap().parse().unwrap();
    while now_micros() < start {
        std::hint::spin_loop();
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        for write in 0..5u64 {
            let journal = SqliteJournal::open(&path).expect("the child opens the journal");
            let id = format!("{}-{write}", std::process::id());
            journal
                .record(&entry("http://a/mcp", &id, 1))
                .await
                .expect("the child writes");
        }
    });
}

/// Processes that open one new journal file at the same moment (a `call`
/// creating it while `ls` reads it, as the CLI does) all get it, and lose no
/// entry: none is refused because another was switching the file to WAL or
/// closing it. Each round is a new file and six processes.
#[test]
fn processes_opening_one_new_file_at_once_are_never_refused() {
    let dir = tempfile::tempdir().unwrap();
    let me = std::env::current_exe().expect("the test binary");
    for round in 0..12 {
        let path = dir.path().join(format!("journal-{round}.sqlite3"));
        let start = now_micros() + 150_000;
        let children: Vec<_> = (0..6)
            .map(|_| {
                std::process::Command::new(&me)
                    .args([
                        "--exact",
                        "journal::child_process_opens_and_writes_the_journal",
                    ])
                    .args(["--test-threads", "1", "--quiet"])
                    .env(CHILD_JOURNAL, &path)
                    .env(CHILD_START, start.to_string())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .expect("a child starts")
            })
            .collect();
        for child in children {
            let output = child.wait_with_output().expect("the child ends");
            assert!(
                output.status.success(),
                "round {round}: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let entries = runtime
            .block_on(SqliteJournal::open(&path).unwrap().list())
            .unwrap();
        assert_eq!(entries.len(), 30, "round {round}: every write is kept");
    }
}
