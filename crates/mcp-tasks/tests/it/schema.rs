//! The schema checks themselves: the official examples validate, and what
//! the checks refuse is refused for the right reason.

use serde_json::{Value, json};

use crate::support::schema::{check_def, check_request, examples, spec_dir};

const TASKS_EXT: &str = "io.modelcontextprotocol/tasks";

/// A request with `params` plus a complete `_meta` declaring the tasks extension as `settings`.
fn tasks_request(method: &str, params: &Value, settings: &Value) -> Value {
    let mut params = params.clone();
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": { "extensions": { TASKS_EXT: settings } },
    });
    json!({ "jsonrpc": "2.0", "id": 7, "method": method, "params": params })
}

/// Asserts that checking `value` against `def` (as a request if None) fails, citing `needle`.
fn fails(def: Option<&str>, value: &Value, needle: &str) {
    let result = def.map_or_else(|| check_request(value), |def| check_def(def, value));
    let err = result.expect_err("the check should have failed");
    assert!(err.contains(needle), "expected {needle:?} in:\n{err}");
}

#[test]
fn official_request_examples_validate() {
    for def in [
        "CallToolRequest",
        "DiscoverRequest",
        "SubscriptionsListenRequest",
    ] {
        let found = examples(def);
        assert!(!found.is_empty() || spec_dir().is_none(), "{def}");
        for (name, example) in found {
            check_request(&example).unwrap_or_else(|e| panic!("{def}/{name}:\n{e}"));
            check_def(def, &example).unwrap_or_else(|e| panic!("{def}/{name}:\n{e}"));
        }
    }
}

#[test]
fn tasks_requests_are_checked_with_their_meta() {
    let (id, empty) = (json!({ "taskId": "t1" }), json!({}));
    let mut get = tasks_request("tasks/get", &id, &empty);
    check_request(&get).expect("a complete tasks/get must pass");
    if spec_dir().is_none() {
        return;
    }
    let meta = get["params"]["_meta"].as_object_mut().unwrap();
    meta.remove("io.modelcontextprotocol/protocolVersion");
    fails(None, &get, "/params/_meta`: \"io.modelcontextprotocol/");

    let no_meta = json!({ "jsonrpc": "2.0", "id": 8, "method": "tasks/cancel", "params": id });
    fails(None, &no_meta, "/params`: \"_meta\" is a required property");
    let update = tasks_request("tasks/update", &id, &empty);
    fails(None, &update, "\"inputResponses\" is a required");
    let with_answers = json!({ "taskId": "t1", "inputResponses": {} });
    check_request(&tasks_request("tasks/update", &with_answers, &empty)).unwrap();

    let settings = tasks_request("tasks/get", &id, &json!({ "x": 1 }));
    fails(None, &settings, "TasksExtensionCapability: at `/params");
    let list = json!({ "jsonrpc": "2.0", "id": 9, "method": "tasks/list" });
    fails(None, &list, "no schema def mapped");
}

#[test]
fn results_are_checked_against_their_defs() {
    let mut task = json!({ "resultType": "task", "taskId": "t1", "status": "working",
        "createdAt": "2026-08-01T00:00:00Z", "lastUpdatedAt": "2026-08-01T00:00:00Z", "ttlMs": null });
    check_def("CreateTaskResult", &task).expect("a complete CreateTaskResult must pass");
    if spec_dir().is_none() {
        return;
    }
    task.as_object_mut().unwrap().remove("ttlMs");
    fails(Some("CreateTaskResult"), &task, "\"ttlMs\" is a required");
    fails(Some("NoSuchDef"), &task, "no def \"NoSuchDef\"");

    let mut discover = json!({ "resultType": "complete", "supportedVersions": ["2026-07-28"],
        "capabilities": { "extensions": { TASKS_EXT: {} } }, "ttlMs": 0, "cacheScope": "public" });
    check_def("DiscoverResult", &discover).expect("a complete DiscoverResult must pass");
    discover["capabilities"]["extensions"][TASKS_EXT] = json!({ "x": 1 });
    fails(
        Some("DiscoverResult"),
        &discover,
        "/capabilities/extensions/",
    );
}
