//! Reload under load: `mcp-tasks admin reload` and SIGHUP reread the config
//! file and the tokens file while tasks run; an upstream added, one removed
//! (its running task completes), one replaced (its running task completes
//! too); the change heard on a listen stream; a file that does not parse
//! refused naming its line, the old upstreams serving on.

use std::time::Duration;

use mcp_tasks::TaskStatus;
use rmcp::model::{ServerNotification, SubscriptionFilter};
use rmcp::service::Subscription;
use serde_json::json;

use super::{ALICE, BOB, Folder, demo, gateway, path_str, prefixed, refused, sorted, tools};
use crate::serving::{client_of, start, text_of, until};
use crate::support::{json_of, run};

/// A config of our demo server as each of `upstreams` (name, extra lines).
fn config(upstreams: &[(&str, &str)]) -> String {
    let mut text =
        String::from("store = \"memory\"\npoll-interval = 50\nauth-tokens = \"tokens.txt\"\n");
    for (name, extra) in upstreams {
        text.push_str(&format!(
            "\n[[upstream]]\nname = \"{name}\"\ncommand = {}\n{extra}",
            demo()
        ));
    }
    text
}

/// Waits (at most 10 s) for a `notifications/tools/list_changed`.
async fn heard_tools_changed(subscription: &mut Subscription) {
    let next = tokio::time::timeout(Duration::from_secs(10), subscription.next())
        .await
        .expect("notifications/tools/list_changed within 10 s")
        .expect("the stream is well formed");
    assert!(
        matches!(
            next,
            Some(ServerNotification::ToolListChangedNotification(_))
        ),
        "{next:?}"
    );
}

/// Reads what was sent already, so that the next one heard is new.
async fn drain(subscription: &mut Subscription) {
    while let Ok(next) = tokio::time::timeout(Duration::from_millis(300), subscription.next()).await
    {
        assert!(next.is_ok(), "{next:?}");
    }
}

/// Runs `mcp-tasks ARGS` off the runtime's threads.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(work)
        .await
        .expect("the work ends")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_under_load_adds_and_removes_upstreams_and_fails_no_task() {
    let folder = Folder::new();
    folder.tokens("tokens.txt", &[(ALICE, "alice")]);
    let file = folder.write("gw.toml", &config(&[("a", ""), ("b", "")]));
    let served = {
        let file = file.clone();
        blocking(move || gateway(&file, &["--admin", "127.0.0.1:0"])).await
    };
    let url = served.url.clone();
    let admin = format!("http://{}", served.admin);
    let client = client_of(&url, Some(ALICE)).await;
    let mut subscription = client
        .running()
        .peer()
        .listen(SubscriptionFilter::builder().tools_list_changed().build())
        .await
        .expect("the gateway serves subscriptions/listen for tool list changes");
    assert_eq!(subscription.acknowledged().tools_list_changed, Some(true));

    // Under load: a task on a, which stays, and one on b, which goes.
    let on_a = start(&client, "a__sleep", json!({"ms": 5000})).await;
    let on_b = start(&client, "b__sleep", json!({"ms": 5000})).await;

    // b removed, c added, bob's token added: `admin reload`.
    std::fs::write(&file, config(&[("a", ""), ("c", "")])).unwrap();
    folder.tokens("tokens.txt", &[(ALICE, "alice"), (BOB, "bob")]);
    let reload = {
        let admin = admin.clone();
        blocking(move || run(&["admin", "reload", "--server", &admin, "--json"])).await
    };
    let (code, report) = json_of(&reload);
    assert_eq!(code, 0, "{report}");
    assert_eq!(
        report,
        json!({
            "added": ["c"],
            "removed": ["b"],
            "replaced": [],
            "unchanged": ["a"],
            "tokens": 2,
            "unapplied": [],
            "summary": "reloaded: upstreams added: c; removed: b; replaced: none; unchanged: a; 2 tokens"
        })
    );
    let line = served.stderr_line("reloaded", Duration::from_secs(10));
    assert!(
        line.ends_with(
            "admin reload: reloaded: upstreams added: c; removed: b; replaced: none; unchanged: \
             a; 2 tokens"
        ),
        "{line}"
    );
    heard_tools_changed(&mut subscription).await;
    for task in [&on_a, &on_b] {
        let now = client.get(&task.id).await.expect("tasks/get");
        assert_eq!(
            now.status,
            TaskStatus::Working,
            "reloaded after the task ended"
        );
    }
    let listed = {
        let url = url.clone();
        blocking(move || (tools(&url, Some(ALICE)), tools(&url, Some(BOB)))).await
    };
    let mut expected = prefixed("a");
    expected.extend(prefixed("c"));
    assert_eq!(listed, (sorted(expected.clone()), sorted(expected)));
    {
        let url = url.clone();
        blocking(move || {
            assert_eq!(
                refused(&url, Some(ALICE), "b__sleep"),
                refused(&url, Some(ALICE), "b__no_such_tool")
            );
        })
        .await;
    }
    // The running tasks, on a and on the removed b, complete.
    for task in [&on_a, &on_b] {
        let done = until(&client, &task.id, Duration::from_secs(30), |state| {
            state.status.is_terminal()
        })
        .await;
        assert_eq!(
            text_of(&done.outcome().expect("an outcome")),
            "slept 5000 ms"
        );
    }

    // SIGHUP: a replaced (a new key), d added, while a task runs on a.
    drain(&mut subscription).await;
    let on_a = start(&client, "a__sleep", json!({"ms": 3000})).await;
    let on_c = start(&client, "c__sleep", json!({"ms": 3000})).await;
    std::fs::write(
        &file,
        config(&[("a", "call-timeout = 60\n"), ("c", ""), ("d", "")]),
    )
    .unwrap();
    served.signal("HUP");
    let line = served.stderr_line("reloaded", Duration::from_secs(20));
    assert!(
        line.ends_with(
            "SIGHUP: reloaded: upstreams added: d; removed: none; replaced: a; unchanged: c; 2 \
             tokens"
        ),
        "{line}"
    );
    heard_tools_changed(&mut subscription).await;
    let new_call = client.get(&on_a.id).await.expect("tasks/get");
    assert_eq!(new_call.status, TaskStatus::Working);
    for task in [&on_a, &on_c] {
        let done = until(&client, &task.id, Duration::from_secs(30), |state| {
            state.status.is_terminal()
        })
        .await;
        assert_eq!(
            text_of(&done.outcome().expect("an outcome")),
            "slept 3000 ms"
        );
    }
    let on_d = start(&client, "d__sleep", json!({"ms": 10})).await;
    let done = until(&client, &on_d.id, Duration::from_secs(30), |state| {
        state.status.is_terminal()
    })
    .await;
    assert_eq!(text_of(&done.outcome().expect("an outcome")), "slept 10 ms");

    // A file that does not parse: refused by both, naming its line; the
    // running config stays.
    drain(&mut subscription).await;
    std::fs::write(&file, "store = \"memory\"\n[[upstream]\nname = \"a\"\n").unwrap();
    let reload = {
        let admin = admin.clone();
        blocking(move || run(&["admin", "reload", "--server", &admin, "--json"])).await
    };
    let stderr = String::from_utf8_lossy(&reload.stderr);
    assert_eq!(reload.status.code(), Some(1), "{stderr}");
    let at = format!("{}:2", path_str(&file));
    assert!(
        stderr.contains("error: ") && stderr.contains(&at),
        "{at}: {stderr}"
    );
    let line = served.stderr_line("reload refused", Duration::from_secs(10));
    assert!(
        line.contains(&at) && line.contains("the running config stays"),
        "{line}"
    );
    served.signal("HUP");
    let line = served.stderr_line("reload refused", Duration::from_secs(10));
    assert!(line.contains(&at), "{line}");
    let quiet = tokio::time::timeout(Duration::from_millis(500), subscription.next()).await;
    assert!(
        quiet.is_err(),
        "a refused reload changed the tools: {quiet:?}"
    );
    let mut expected = prefixed("a");
    expected.extend(prefixed("c"));
    expected.extend(prefixed("d"));
    let listed = {
        let url = url.clone();
        blocking(move || tools(&url, Some(ALICE))).await
    };
    assert_eq!(listed, sorted(expected));
    let on_a = start(&client, "a__sleep", json!({"ms": 10})).await;
    let done = until(&client, &on_a.id, Duration::from_secs(30), |state| {
        state.status.is_terminal()
    })
    .await;
    assert_eq!(text_of(&done.outcome().expect("an outcome")), "slept 10 ms");
}
