//! An upstream that cannot be reached when the gateway starts does not stop
//! it: the gateway serves the others, says so in one line, and lists the
//! late one's tools (telling listening clients) once it answers; and the
//! shipped `examples/gateway.toml` starts as shipped, leaving nothing behind.

use std::time::Duration;

use rmcp::model::SubscriptionFilter;

use super::{Folder, call, demo, gateway, prefixed, sorted, tools};
use crate::serving::{Logs, Served, client_of};
use crate::support::BIN;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_down_at_start_is_served_once_it_answers() {
    let port = mcp_tasks_testkit::wait::free_port();
    let folder = Folder::new();
    let file = folder.write(
        "gw.toml",
        &format!(
            "store = \"memory\"\npoll-interval = 50\n\n[[upstream]]\nname = \"up\"\ncommand = {}\n\n\
             [[upstream]]\nname = \"late\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n",
            demo()
        ),
    );
    let served = {
        let file = file.clone();
        tokio::task::spawn_blocking(move || gateway(&file, &["--admin", "127.0.0.1:0"]))
            .await
            .expect("the gateway starts")
    };
    let url = served.url.clone();
    let line = served.stderr_line("\"late\"", Duration::from_secs(10));
    assert!(
        line.contains("the upstream \"late\" cannot be reached")
            && line.contains("starts without its tools"),
        "{line}"
    );
    // Operators see it waited for: the gauge is 1 for it alone.
    let admin = served.admin.clone();
    let waited = move || {
        let (_, scrape) = crate::operator::scrape(&admin, "no-admin-tokens");
        let gauge = "mcp_tasks_gateway_upstream_waiting";
        (
            crate::operator::value(&scrape, gauge, &[("upstream", "late")]),
            crate::operator::value(&scrape, gauge, &[("upstream", "up")]),
        )
    };
    let scraping = waited.clone();
    assert_eq!(
        tokio::task::spawn_blocking(scraping).await.unwrap(),
        (1.0, 0.0)
    );
    assert_eq!(
        {
            let url = url.clone();
            tokio::task::spawn_blocking(move || tools(&url, None))
                .await
                .unwrap()
        },
        sorted(prefixed("up"))
    );
    // Its tools, asked for before it answers, are said to be late.
    let (code, value) = {
        let url = url.clone();
        tokio::task::spawn_blocking(move || call(&url, None, "late__sleep", &["ms=1"]))
            .await
            .unwrap()
    };
    assert_ne!(code, 0, "{value}");
    assert!(
        value["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("\"late\" cannot be reached yet")),
        "{value}"
    );

    let client = client_of(&url, None).await;
    let mut subscription = client
        .running()
        .peer()
        .listen(SubscriptionFilter::builder().tools_list_changed().build())
        .await
        .expect("a listen stream for tool list changes");
    // The late upstream comes up on its port.
    let _late = tokio::task::spawn_blocking(move || {
        Served::start(BIN, &format!("127.0.0.1:{port}"), "memory", &[])
    })
    .await
    .expect("the late upstream starts");
    let next = tokio::time::timeout(Duration::from_secs(20), subscription.next())
        .await
        .expect("notifications/tools/list_changed within 20 s")
        .expect("the stream is well formed");
    assert!(
        matches!(
            next,
            Some(rmcp::model::ServerNotification::ToolListChangedNotification(_))
        ),
        "{next:?}"
    );
    let line = served.stderr_line("\"late\" answers now", Duration::from_secs(5));
    assert!(line.contains("its tools (4) are served"), "{line}");
    assert_eq!(
        tokio::task::spawn_blocking(waited).await.unwrap(),
        (0.0, 0.0),
        "no longer waited for"
    );
    let mut expected = prefixed("up");
    expected.extend(prefixed("late"));
    assert_eq!(
        tokio::task::spawn_blocking(move || tools(&url, None))
            .await
            .unwrap(),
        sorted(expected)
    );
}

#[test]
fn a_late_upstream_whose_tools_clash_is_not_served_and_no_longer_waited_for() {
    let port = mcp_tasks_testkit::wait::free_port();
    let folder = Folder::new();
    // Both unprefixed: the late one lists the same names.
    let file = folder.write(
        "gw.toml",
        &format!(
            "store = \"memory\"\npoll-interval = 50\n\n[[upstream]]\nname = \"up\"\ncommand = {}\n\
             prefix = false\n\n[[upstream]]\nname = \"late\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n\
             prefix = false\n",
            demo()
        ),
    );
    let served = gateway(&file, &["--admin", "127.0.0.1:0"]);
    served.stderr_line("\"late\" cannot be reached", Duration::from_secs(10));
    let _late = Served::start(BIN, &format!("127.0.0.1:{port}"), "memory", &[]);
    let line = served.stderr_line("\"late\" answers now", Duration::from_secs(20));
    assert!(
        line.contains("is not served") && line.contains("would be served by two upstreams"),
        "{line}"
    );
    // No longer waited for: its gauge is 0, and the tools are the first's.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let (_, scrape) = crate::operator::scrape(&served.admin, "no-admin-tokens");
        let gauge = "mcp_tasks_gateway_upstream_waiting";
        if crate::operator::value(&scrape, gauge, &[("upstream", "late")]) == 0.0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "still waited for");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut expected: Vec<String> = ["confirm_action", "failing_tool", "long_job", "sleep"]
        .map(str::to_owned)
        .to_vec();
    expected.sort();
    assert_eq!(tools(&served.url, None), expected);
}

/// The files of `examples/` that git does not track, nor ignore.
fn untracked_in_examples() -> String {
    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
    let output = std::process::Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=all", "."])
        .current_dir(examples)
        .output()
        .expect("git runs");
    assert!(output.status.success(), "git status in examples/");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| line.starts_with("??"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_shipped_gateway_example_starts_as_shipped_and_leaves_nothing() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/gateway.toml");
    let before = untracked_in_examples();
    let logs = Logs::default();
    // As shipped, but for its ports (8080 and 9090 may be taken here): its
    // "jobs" upstream is not running, and its "everything" upstream needs
    // npx, which may or may not fetch it here: either way it serves.
    let mut served = Served::spawn(
        BIN,
        &[
            "--config",
            example,
            "--http",
            "127.0.0.1:0",
            "--admin",
            "127.0.0.1:0",
        ],
        &[],
        Some(&logs),
    );
    let line = served.stderr_line("\"jobs\"", Duration::from_secs(60));
    assert!(line.contains("cannot be reached"), "{line}");
    let output = std::process::Command::new(BIN)
        .args(["tools", "--url", &served.url, "--json"])
        .output()
        .expect("tools runs");
    assert!(output.status.success(), "{output:?}");
    served.interrupt();
    assert_eq!(
        untracked_in_examples(),
        before,
        "the example left files behind"
    );
    for line in logs.lock().unwrap().iter() {
        assert!(!line.contains("\u{1b}["), "no colour in a pipe: {line:?}");
    }
}
