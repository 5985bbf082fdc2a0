//! Listen mode end to end against our runtime, on both transports (the
//! stdio framing in process, and Streamable HTTP on 127.0.0.1).
//!
//! The server suggests a poll interval of 10 minutes and the waits allow
//! it, with a deadline of 20 s: a wait that finishes is one that heard the
//! task's notifications (a poll would come 10 minutes late), and a wait
//! that falls back to polling runs against a server that suggests 20 ms.

mod edges;
mod peers;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_tasks::store::MemoryStore;
use mcp_tasks::{AwaitOptions, ListenMode, TaskOutcome, TaskState};
use serde_json::json;
use tokio::sync::mpsc;

use crate::support::listening::{TRANSPORTS, client, listening, patient_server, until_closed};
use crate::support::runtime_server::{runtime_on, serve_http};
use crate::support::{Handler, RuntimeServer, completed_text, task_of};

/// A server that suggests polling every 20 ms.
fn eager_server() -> RuntimeServer {
    RuntimeServer::new(runtime_on(MemoryStore::new()).build())
}

/// `options` with an observer that sends every state it sees.
fn observed(options: AwaitOptions) -> (AwaitOptions, mpsc::UnboundedReceiver<TaskState>) {
    let (sender, states) = mpsc::unbounded_channel();
    let options = options.with_observer(move |state| {
        let _ = sender.send(state.clone());
    });
    (options, states)
}

/// Receives states until one has `message`; fails after 10 s.
async fn until_message(states: &mut mpsc::UnboundedReceiver<TaskState>, message: &str) {
    tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(state) = states.recv().await {
            if state.status_message.as_deref() == Some(message) {
                return;
            }
        }
        panic!("the wait ended before {message:?} was seen");
    })
    .await
    .unwrap_or_else(|_| panic!("{message:?} was not seen within 10 s"));
}

#[tokio::test]
async fn completion_is_seen_through_the_notification() {
    for transport in TRANSPORTS {
        let server = patient_server();
        let client = client(&server, transport).await;
        assert!(client.can_listen());
        let seed = task_of(&client, "slow", json!({"ms": 200})).await;
        let outcome = client
            .await_task(&seed, &listening(ListenMode::Required))
            .await
            .unwrap_or_else(|error| panic!("{transport:?}: {error}"));
        assert_eq!(completed_text(&outcome), "slept 200 ms", "{transport:?}");
        // The stream ends with the task.
        until_closed(&server).await;
    }
}

#[tokio::test]
async fn input_required_is_heard_and_answered_with_tasks_update() {
    for transport in TRANSPORTS {
        let server = patient_server();
        let client = client(&server, transport).await;
        let seed = task_of(&client, "ask", json!({})).await;
        let (options, mut states) = observed(listening(ListenMode::Required));
        let outcome = client.await_task(&seed, &options).await.unwrap();
        assert_eq!(completed_text(&outcome), "Hello, Ada!", "{transport:?}");
        let mut saw_input_required = false;
        while let Ok(state) = states.try_recv() {
            saw_input_required |= state.status == mcp_tasks::TaskStatus::InputRequired
                && state.input_requests.contains_key("name");
        }
        assert!(saw_input_required, "{transport:?}");
    }
}

#[tokio::test]
async fn a_status_message_is_pushed_the_moment_the_tool_sets_it() {
    for transport in TRANSPORTS {
        let server = patient_server();
        let client = client(&server, transport).await;
        let seed = task_of(&client, "gated", json!({})).await;
        let (options, mut states) = observed(listening(ListenMode::Required));
        let waiting = tokio::spawn({
            let client = client.clone();
            async move { client.await_task(&seed, &options).await }
        });
        // The tool is held at each gate: what the wait sees of a step it
        // can only have heard (the next poll is 10 minutes away).
        until_message(&mut states, "step 1").await;
        server.open_gate();
        until_message(&mut states, "step 2").await;
        server.open_gate();
        let outcome = waiting.await.unwrap().unwrap();
        assert_eq!(completed_text(&outcome), "gated done", "{transport:?}");
    }
}

#[tokio::test]
async fn a_stream_that_ends_early_falls_back_to_polling() {
    for transport in TRANSPORTS {
        let server = eager_server();
        let client = client(&server, transport).await;
        let seed = task_of(&client, "gated", json!({})).await;
        let (options, mut states) = observed(listening(ListenMode::Required));
        let waiting = tokio::spawn({
            let client = client.clone();
            async move { client.await_task(&seed, &options).await }
        });
        until_message(&mut states, "step 1").await;
        assert_eq!(server.runtime.open_subscriptions(), 1, "{transport:?}");
        // The server ends every stream (as before a shutdown); the task
        // goes on and the wait polls it to its end.
        server.runtime.end_subscriptions();
        server.open_gate();
        server.open_gate();
        let outcome = waiting.await.unwrap().unwrap();
        assert_eq!(completed_text(&outcome), "gated done", "{transport:?}");
        until_closed(&server).await;
    }
}

#[tokio::test]
async fn waits_that_poll_do_not_listen() {
    for transport in TRANSPORTS {
        let server = eager_server();
        let client = client(&server, transport).await;
        let seed = task_of(&client, "gated", json!({})).await;
        let (options, mut states) = observed(listening(ListenMode::Poll));
        let waiting = tokio::spawn({
            let client = client.clone();
            async move { client.await_task(&seed, &options).await }
        });
        until_message(&mut states, "step 1").await;
        assert_eq!(server.runtime.open_subscriptions(), 0, "{transport:?}");
        server.open_gate();
        server.open_gate();
        waiting.await.unwrap().unwrap();
    }
}

#[tokio::test]
async fn many_waits_on_one_task_and_a_wait_on_each_of_many_tasks() {
    for transport in TRANSPORTS {
        let server = patient_server();
        let client = client(&server, transport).await;
        // Twenty waits on one task.
        let seed = task_of(&client, "gated", json!({})).await;
        let seen = Arc::new(Mutex::new(0usize));
        let mut waits = Vec::new();
        for _ in 0..20 {
            let (client, seed, seen) = (client.clone(), seed.clone(), seen.clone());
            let options = listening(ListenMode::Required).with_observer(move |state| {
                if state.status_message.as_deref() == Some("step 1") {
                    *seen.lock().unwrap() += 1;
                }
            });
            waits.push(tokio::spawn(async move {
                client.await_task(&seed, &options).await
            }));
        }
        tokio::time::timeout(Duration::from_secs(10), async {
            while *seen.lock().unwrap() < 20 || server.runtime.open_subscriptions() < 20 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("every wait listens");
        server.open_gate();
        server.open_gate();
        for wait in waits {
            let outcome = wait.await.unwrap().unwrap();
            assert_eq!(completed_text(&outcome), "gated done", "{transport:?}");
        }
        // One wait on each of twenty tasks, all heard.
        let mut waits = Vec::new();
        for ms in 0..20 {
            let seed = task_of(&client, "slow", json!({"ms": 50 + ms})).await;
            let client = client.clone();
            waits.push(tokio::spawn(async move {
                client
                    .await_task(&seed, &listening(ListenMode::Required))
                    .await
            }));
        }
        for wait in waits {
            assert!(matches!(
                wait.await.unwrap().unwrap(),
                TaskOutcome::Completed(_)
            ));
        }
        until_closed(&server).await;
    }
}

#[tokio::test]
async fn a_request_cancellation_is_never_a_task_cancel() {
    use rmcp::model::{
        CallToolRequest, CallToolRequestParams, CancelledNotification, CancelledNotificationParam,
        ClientRequest,
    };
    use rmcp::service::PeerRequestOptions;

    use crate::support::listening::{Transport, http_client, stdio_client};

    for transport in TRANSPORTS {
        let server = eager_server();
        let (client, url) = match transport {
            Transport::Stdio => (stdio_client(server.clone(), Handler::default()).await, None),
            Transport::Http => {
                let url = serve_http(server.clone()).await;
                (http_client(&url, None, Handler::default()).await, Some(url))
            }
        };
        // tools/call by hand, so that its JSON-RPC id is known.
        let mut params = CallToolRequestParams::new("gated");
        params.arguments = crate::support::args(json!({}));
        let mut meta = rmcp::model::RequestMetaObject::new();
        meta.set_client_capabilities(mcp_tasks::with_tasks_extension(Default::default()));
        let peer = client.running().peer();
        let handle = peer
            .send_request_with_option(
                ClientRequest::CallToolRequest(CallToolRequest::new(params)),
                PeerRequestOptions::no_options().with_meta(meta),
            )
            .await
            .unwrap();
        let request_id = handle.id.clone();
        let created = serde_json::to_value(handle.await_response().await.unwrap()).unwrap();
        let id = mcp_tasks::TaskId::new(created["taskId"].as_str().unwrap());
        // The client gives up on the request after the fact: over stdio with
        // notifications/cancelled, over HTTP by posting one.
        let cancelled = CancelledNotification::new(CancelledNotificationParam::new(
            Some(request_id.clone()),
            Some("never mind".to_owned()),
        ));
        match url {
            None => peer.send_notification(cancelled.into()).await.unwrap(),
            Some(url) => {
                let posted = reqwest::Client::new()
                    .post(url)
                    .header("accept", "application/json, text/event-stream")
                    .header("content-type", "application/json")
                    .header("mcp-protocol-version", "2026-07-28")
                    .header("mcp-method", "notifications/cancelled")
                    .body(
                        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                            "params": {"requestId": request_id, "reason": "never mind"}})
                        .to_string(),
                    )
                    .send()
                    .await
                    .unwrap();
                assert!(posted.status().is_success(), "{}", posted.status());
            }
        }
        server.open_gate();
        server.open_gate();
        let outcome = client
            .await_task(&id, &listening(ListenMode::Auto))
            .await
            .unwrap();
        assert_eq!(completed_text(&outcome), "gated done", "{transport:?}");
    }
}

#[tokio::test]
async fn a_closed_stdio_connection_leaves_no_stream_open() {
    // (Over HTTP a stream is a connection of its own: `http::closed_streams_leave_nothing_behind`.)
    let server = patient_server();
    let client = client(&server, crate::support::listening::Transport::Stdio).await;
    let seed = task_of(&client, "gated", json!({})).await;
    let (options, mut states) = observed(listening(ListenMode::Required));
    let waiting = tokio::spawn({
        let client = client.clone();
        async move { client.await_task(&seed, &options).await }
    });
    until_message(&mut states, "step 1").await;
    assert_eq!(server.runtime.open_subscriptions(), 1);
    // The connection goes away mid-wait: the wait still holds its stream,
    // so nothing tells the server but the closed connection. rmcp gives
    // the handlers in flight 5 s to finish, then cancels them.
    client.running().cancellation_token().cancel();
    until_closed(&server).await;
    waiting.abort();
    let _ = waiting.await;
}
