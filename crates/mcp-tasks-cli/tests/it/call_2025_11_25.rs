//! The binary against a scripted 2025-11-25 server on stdio (a small Python
//! program): `discover` says the era and the task methods, `call` runs a
//! task-augmented tool and a plain one, answers the server's elicitation on
//! the `tasks/result` stream, and `get`, `wait` and `cancel` work by id.
//! (The same against the real `server-everything` runs in `interop/`: it
//! needs the npm install, which `cargo test` does not do.)

use serde_json::json;

use crate::support::{json_of, run};

/// A 2025-11-25 server: `research` requires a task (it asks for a name when
/// called with `ask: true`), `echo` forbids one and errors like the
/// TypeScript SDK (-32602) if it is task-augmented anyway. Every task id is
/// known; `tasks/get` says working twice, then completed (or cancelled once
/// `tasks/cancel` was sent), and `tasks/result` is answered when it ends.
const SERVER: &str = r#"
import json, sys

def send(message):
    print(json.dumps(message), flush=True)

def task(task_id, status):
    return {"taskId": task_id, "status": status, "createdAt": "2025-11-25T10:30:00Z",
            "lastUpdatedAt": "2025-11-25T10:30:00Z", "ttl": 60000, "pollInterval": 50}

gets, held, asking, ended = {}, {}, {}, {}
for line in sys.stdin:
    m = json.loads(line)
    method, params, mid = m.get("method"), m.get("params") or {}, m.get("id")
    if method is None:
        # The client's answer to the elicitation: the task ends with it.
        for task_id, request_id in list(asking.items()):
            if request_id == mid:
                name = ((m.get("result") or {}).get("content") or {}).get("name")
                ended[task_id] = {"content": [{"type": "text", "text": f"Hello, {name}"}]}
                del asking[task_id]
                if task_id in held:
                    send({"jsonrpc": "2.0", "id": held.pop(task_id), "result": ended[task_id]})
        continue
    if mid is None:
        continue
    reply = lambda result: send({"jsonrpc": "2.0", "id": mid, "result": result})
    refuse = lambda code, text: send({"jsonrpc": "2.0", "id": mid, "error": {"code": code, "message": text}})
    if method == "initialize":
        reply({"protocolVersion": "2025-11-25", "serverInfo": {"name": "legacy-script", "version": "0"},
               "capabilities": {"tools": {}, "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}}})
    elif method == "tools/list":
        reply({"tools": [
            {"name": "research", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}},
            {"name": "echo", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "forbidden"}}]})
    elif method == "tools/call":
        name, args = params["name"], params.get("arguments") or {}
        if name == "echo":
            if "task" in params:
                refuse(-32602, "Invalid task creation result")
            else:
                reply({"content": [{"type": "text", "text": "echo: " + str(args.get("text"))}]})
        elif "task" not in params:
            refuse(-32601, "research requires task augmentation")
        else:
            task_id = "ask-task" if args.get("ask") else "legacy-task-1"
            reply({"task": task(task_id, "working")})
    elif method == "tasks/get":
        task_id = params["taskId"]
        gets[task_id] = gets.get(task_id, 0) + 1
        if task_id in ended and ended[task_id] == "cancelled":
            status = "cancelled"
        elif task_id == "ask-task":
            status = "completed" if task_id in ended else "input_required"
        else:
            status = "completed" if gets[task_id] > 2 else "working"
            if status == "completed":
                ended.setdefault(task_id, {"content": [{"type": "text", "text": "researched"}]})
        reply(task(task_id, status))
        if task_id in held and task_id in ended and ended[task_id] != "cancelled":
            send({"jsonrpc": "2.0", "id": held.pop(task_id), "result": ended[task_id]})
    elif method == "tasks/result":
        task_id = params["taskId"]
        if task_id in ended and ended[task_id] != "cancelled":
            reply(ended[task_id])
        else:
            held[task_id] = mid
            if task_id == "ask-task" and task_id not in asking:
                asking[task_id] = "ask-1"
                send({"jsonrpc": "2.0", "id": "ask-1", "method": "elicitation/create", "params": {
                    "mode": "form", "message": "Your name?",
                    "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
                    "_meta": {"io.modelcontextprotocol/related-task": {"taskId": task_id}}}})
    elif method == "tasks/cancel":
        ended[params["taskId"]] = "cancelled"
        reply(task(params["taskId"], "cancelled"))
    else:
        refuse(-32601, "Method not found")
"#;

/// The `--stdio` command line of the script, written to a temp dir kept by the caller.
pub(crate) fn legacy_server(dir: &tempfile::TempDir) -> String {
    let path = dir.path().join("legacy_server.py");
    std::fs::write(&path, SERVER).expect("write the script");
    format!("python3 {}", path.display())
}

#[test]
fn discover_says_the_legacy_era_and_its_task_methods() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let server = legacy_server(&dir);
    let (exit, value) = json_of(&run(&["discover", "--stdio", &server, "--json"]));
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["protocolVersion"], "2025-11-25");
    assert_eq!(value["tasks"], false, "the extension is not defined here");
    assert_eq!(value["taskEra"], "legacy");
    assert_eq!(
        value["idempotencyKeys"], false,
        "a server of another library"
    );
    assert_eq!(
        value["taskMethods"],
        json!(["tasks/get", "tasks/result", "tasks/list", "tasks/cancel"])
    );
    let output = run(&["discover", "--stdio", &server]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("task era:         2025-11-25"), "{text}");
    assert!(
        text.contains("tasks/get tasks/result tasks/list tasks/cancel"),
        "{text}"
    );
}

#[test]
fn call_get_wait_and_cancel_work_on_a_legacy_server() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let server = legacy_server(&dir);
    let on = |rest: &[&str]| {
        let mut args = vec![rest[0], "--stdio", server.as_str(), "--json"];
        args.extend_from_slice(&rest[1..]);
        json_of(&run(&args))
    };
    let (exit, value) = on(&["call", "research"]);
    assert_eq!(
        (exit, &value["status"]),
        (0, &json!("completed")),
        "{value}"
    );
    assert_eq!(value["taskId"], "legacy-task-1");
    assert_eq!(value["result"]["content"][0]["text"], "researched");

    // A forbidden tool is called plainly (the script refuses it augmented).
    let (exit, value) = on(&["call", "echo", "--arg", "text=hi"]);
    assert_eq!(
        (exit, &value["status"]),
        (0, &json!("completed")),
        "{value}"
    );
    assert_eq!(value["result"]["content"][0]["text"], "echo: hi");
    assert!(value.get("taskId").is_none(), "{value}");

    // The server's elicitation on the tasks/result stream is answered.
    let (exit, value) = on(&[
        "call", "research", "--arg", "ask=true", "--answer", "name=Ada",
    ]);
    assert_eq!(
        (exit, &value["status"]),
        (0, &json!("completed")),
        "{value}"
    );
    assert_eq!(value["result"]["content"][0]["text"], "Hello, Ada");
    let (exit, value) = on(&["call", "research", "--arg", "ask=true", "--input", "fail"]);
    assert_eq!(
        (exit, &value["status"]),
        (4, &json!("input_required")),
        "{value}"
    );
    assert_eq!(
        value["result"]["inputRequests"]["ask-1"]["method"], "elicitation/create",
        "{value}"
    );

    let (exit, value) = on(&["get", "legacy-task-1"]);
    assert_eq!((exit, &value["status"]), (0, &json!("working")), "{value}");
    let (exit, value) = on(&["wait", "legacy-task-1"]);
    assert_eq!(
        (exit, &value["status"]),
        (0, &json!("completed")),
        "{value}"
    );
    assert_eq!(value["result"]["content"][0]["text"], "researched");
    let (exit, value) = on(&["cancel", "legacy-task-1"]);
    assert_eq!(
        (exit, &value["status"]),
        (3, &json!("cancelled")),
        "{value}"
    );
}

/// A 2025-11-25 client (a small Python program) of the process on its
/// stdin: initialize, a task-augmented `tools/call` of `sleep`, then
/// `tasks/result`; prints each answer as a JSON line.
const CLIENT: &str = r#"
import json, subprocess, sys

child = subprocess.Popen(sys.argv[1], shell=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)

def ask(mid, method, params):
    child.stdin.write((json.dumps({"jsonrpc": "2.0", "id": mid, "method": method, "params": params}) + "\n").encode())
    child.stdin.flush()
    for line in child.stdout:
        m = json.loads(line)
        if m.get("id") == mid and "method" not in m:
            print(json.dumps(m), flush=True)
            return m
    sys.exit("the server ended before answering " + method)

ask(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                      "clientInfo": {"name": "legacy-client", "version": "1"}})
child.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
created = ask(2, "tools/call", {"name": "sleep", "arguments": {"ms": 50}, "task": {"ttl": 60000}})
ask(3, "tasks/result", {"taskId": created["result"]["task"]["taskId"]})
child.stdin.close()
child.wait()
"#;

#[test]
fn a_legacy_client_gets_a_task_of_the_gateway_on_stdio() {
    // The gateway on stdio before our server: the 2025-11-25 client's
    // task-augmented call is a gateway task (its call once overflowed a
    // debug build's worker stack on this path).
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("legacy_client.py");
    std::fs::write(&path, CLIENT).expect("write the script");
    let gateway = format!(
        "{} serve --stdio --store memory --poll-interval 50 --upstream '{}'",
        crate::support::BIN,
        crate::support::stdio_server()
    );
    let output = std::process::Command::new("python3")
        .arg(&path)
        .arg(&gateway)
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let answers: Vec<serde_json::Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    assert_eq!(
        answers.len(),
        3,
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(answers[0]["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(
        answers[1]["result"]["task"]["status"], "working",
        "{stdout}"
    );
    assert_eq!(
        answers[2]["result"]["content"][0]["text"], "slept 50 ms",
        "{stdout}"
    );
}
