//! A plain MCP server with no tasks at all, as most servers in the field
//! are: the 2025-11-25 era over stdio (`initialize`), raw JSON-RPC lines,
//! with the tools a task gateway must relay. The `plain-upstream` binary
//! serves it; the gateway tests put `mcp-tasks serve --upstream` (or the
//! library's `Gateway`) in front of it. With `--dual` it speaks 2026-07-28
//! too (`server/discover`, then requests that carry their own `_meta`), as
//! fastmcp does, and behaves like it on each era: a tool that sends the
//! client a request answers `isError` on a 2026-07-28 request (there is no
//! back-channel), and `ask_mrtr` answers -32602 on a 2025-era one (an MRTR
//! round exists only on 2026-07-28).
//!
//! | tool | what it does |
//! |---|---|
//! | `echo {text}` | answers `text` at once (marked `taskSupport: forbidden`, as the TypeScript SDK v1 marks every plain tool) |
//! | `progress {steps, ms}` | sends `notifications/progress` `i/steps` every `ms`, then answers `done: N steps` |
//! | `log {text}` | sends a `notifications/message` (`info`, `text`), waits 300 ms, answers `logged` |
//! | `ask` | sends `elicitation/create` (a form with a string `name`), answers `hello NAME`, `declined` or `cancelled` |
//! | `ask_url` | sends `elicitation/create` in URL mode, answers with the action taken |
//! | `sample` | sends `sampling/createMessage`, answers with the text of its answer |
//! | `fail` | answers a JSON-RPC error -32050 `the fixture tool failed` |
//! | `error_result` | answers a tool result with `isError: true` |
//! | `crash {ms}` | exits the process (status 3) after `ms` |
//! | `hang` | never answers; a `notifications/cancelled` for it is counted (and, with `--cancel-log PATH`, appended to `PATH` as a line) |
//! | `cancellations` | answers how many `notifications/cancelled` this process received |
//! | `needs_task` | marked `taskSupport: required`; answers `ran` |
//! | `add_tool` | adds the tool `added` and sends `notifications/tools/list_changed` |
//! | `roots` | sends `roots/list` in the middle of the call, answers `roots: URI (NAME), ...`, `no roots` or `error: MESSAGE` |
//! | `startup_roots` | answers what the last session-level `roots/list` got (the same words as `roots`), or `not asked` |
//! | `big {bytes}` | answers a text of `bytes` bytes (`x` repeated): a result past a gateway's budget |
//! | `ask_mrtr {rounds}` | 2026-07-28 only: asks `rounds` (default 1) questions, one MRTR round each (key `qN`, a form with a string `answer`; the answers so far in `requestState`), then answers `answers: A, B` |
//!
//! Flags ([`Options::from_args`]): `--roots-at-start MS` asks for the
//! client's roots `MS` after `notifications/initialized`, outside any call,
//! as server-everything does (350 ms after); the server asks again at each
//! `notifications/roots/list_changed`, as filesystem servers do. `--dual`
//! speaks 2026-07-28 too (see above). `--call-log PATH` appends a line to
//! `PATH` for each `tools/call`: `TOOL ERA answers=N` (`ERA` `2026-07-28` or
//! `2025`, `N` the number of `inputResponses`). `--mark-forbidden TOOL`
//! (repeatable) marks only the named tools `taskSupport: forbidden` and
//! lists the other plain tools with no `execution` at all, as an SDK that
//! writes no default does; without it every plain tool is marked
//! `forbidden`, as the TypeScript SDK v1 marks them. `--cancel-log PATH`
//! appends each `notifications/cancelled` to `PATH`; `--life-log PATH`
//! appends `start PID` to `PATH` when the process starts and `exit PID`
//! when its stdin closes.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

/// The error code of the `fail` tool.
pub const FAIL_CODE: i64 = -32050;

/// How the server behaves (its command line).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Options {
    /// Ask for the client's roots this long after `notifications/initialized`.
    pub roots_at_start: Option<Duration>,
    /// With `Some`, only these plain tools are marked `forbidden`; the
    /// others carry no `execution`.
    pub mark_forbidden: Option<Vec<String>>,
    /// Where each `notifications/cancelled` is appended, as a line (the
    /// request id it names).
    pub cancel_log: Option<PathBuf>,
    /// Where `start PID` and `exit PID` are appended.
    pub life_log: Option<PathBuf>,
    /// Speak 2026-07-28 too.
    pub dual: bool,
    /// Where each `tools/call` is appended, as a line.
    pub call_log: Option<PathBuf>,
}

impl Options {
    /// Reads the flags (see the [module](self) docs).
    pub fn from_args(args: impl IntoIterator<Item = String>) -> Result<Self, String> {
        let mut options = Self::default();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--roots-at-start" => {
                    let ms = args
                        .next()
                        .and_then(|ms| ms.parse::<u64>().ok())
                        .ok_or("--roots-at-start takes milliseconds")?;
                    options.roots_at_start = Some(Duration::from_millis(ms));
                }
                "--mark-forbidden" => {
                    let tool = args.next().ok_or("--mark-forbidden takes a tool name")?;
                    options
                        .mark_forbidden
                        .get_or_insert_with(Vec::new)
                        .push(tool);
                }
                "--cancel-log" => {
                    let path = args.next().ok_or("--cancel-log takes a path")?;
                    options.cancel_log = Some(path.into());
                }
                "--life-log" => {
                    let path = args.next().ok_or("--life-log takes a path")?;
                    options.life_log = Some(path.into());
                }
                "--dual" => options.dual = true,
                "--call-log" => {
                    let path = args.next().ok_or("--call-log takes a path")?;
                    options.call_log = Some(path.into());
                }
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        Ok(options)
    }
}

#[derive(Default)]
struct State {
    options: Options,
    /// The answer to the `roots/list` of `--roots-at-start`.
    startup_roots: Mutex<Option<Value>>,
    cancellations: AtomicUsize,
    added: AtomicBool,
    next_id: AtomicUsize,
    /// Our requests to the client waiting for their answers, by id.
    waiting: Mutex<HashMap<u64, oneshot::Sender<Value>>>,
    /// Where each `notifications/cancelled` is appended as a line.
    cancel_log: Option<PathBuf>,
}

type Out = mpsc::UnboundedSender<Value>;

fn append(path: &Path, line: &str) {
    let appended = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut file| writeln!(file, "{line}"));
    if let Err(error) = appended {
        eprintln!("cannot append to {}: {error}", path.display());
    }
}

/// Serves on stdin and stdout until stdin closes.
pub async fn serve_stdio(options: Options) -> std::io::Result<()> {
    let pid = std::process::id();
    if let Some(path) = &options.life_log {
        append(path, &format!("start {pid}"));
    }
    let life = options.life_log.clone();
    let state = Arc::new(State {
        cancel_log: options.cancel_log.clone(),
        options,
        ..State::default()
    });
    let (out, mut outgoing) = mpsc::unbounded_channel::<Value>();
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(message) = outgoing.recv().await {
            let mut line = message.to_string();
            line.push('\n');
            if stdout.write_all(line.as_bytes()).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = lines.next_line().await? {
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        handle(&state, &out, message);
    }
    drop(out);
    let _ = writer.await;
    if let Some(path) = &life {
        append(path, &format!("exit {pid}"));
    }
    Ok(())
}

fn handle(state: &Arc<State>, out: &Out, message: Value) {
    let id = message.get("id").cloned();
    let method = message.get("method").and_then(Value::as_str);
    match (method, id) {
        // An answer to one of our requests.
        (None, Some(id)) => {
            let waiting = id
                .as_u64()
                .and_then(|id| state.waiting.lock().ok()?.remove(&id));
            if let Some(waiting) = waiting {
                let _ = waiting.send(message);
            }
        }
        (Some("notifications/cancelled"), None) => {
            state.cancellations.fetch_add(1, Ordering::SeqCst);
            if let Some(path) = &state.cancel_log {
                let named = message
                    .pointer("/params/requestId")
                    .map(Value::to_string)
                    .unwrap_or_default();
                append(path, &named);
            }
        }
        (Some("notifications/initialized"), None) => {
            if let Some(after) = state.options.roots_at_start {
                read_roots(state, out, after);
            }
        }
        (Some("notifications/roots/list_changed"), None) => {
            read_roots(state, out, Duration::ZERO);
        }
        (Some(_), None) => {}
        (Some(method), Some(id)) => {
            let params = message.get("params").cloned().unwrap_or(json!({}));
            let (state, out, method) = (state.clone(), out.clone(), method.to_owned());
            tokio::spawn(async move {
                let answer = request(&state, &out, &method, &params).await;
                let message = match answer {
                    Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                    Err((code, text)) => {
                        json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": text}})
                    }
                };
                let _ = out.send(message);
            });
        }
        (None, None) => {}
    }
}

/// Asks for the client's roots for the session, `after` from now, and keeps
/// the answer for `startup_roots`.
fn read_roots(state: &Arc<State>, out: &Out, after: Duration) {
    let (state, out) = (state.clone(), out.clone());
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        let answer = ask_client(&state, &out, "roots/list", json!({})).await;
        if let Ok(mut roots) = state.startup_roots.lock() {
            *roots = Some(answer);
        }
    });
}

/// Whether a request carries the 2026-07-28 `_meta` (it names its protocol
/// version), rather than relying on an `initialize` handshake.
fn is_modern(params: &Value) -> bool {
    params
        .pointer("/_meta/io.modelcontextprotocol~1protocolVersion")
        .is_some()
}

#[allow(clippy::needless_pass_by_value, reason = "called with json! literals")]
fn tool(name: &str, description: &str, properties: Value, task_support: &str) -> Value {
    json!({
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": properties},
        "execution": {"taskSupport": task_support},
    })
}

fn tools(state: &State) -> Vec<Value> {
    let mut tools = vec![
        tool(
            "echo",
            "Answers its text",
            json!({"text": {"type": "string"}}),
            "forbidden",
        ),
        tool(
            "progress",
            "Reports progress, then answers",
            json!({"steps": {"type": "integer"}, "ms": {"type": "integer"}}),
            "forbidden",
        ),
        tool(
            "log",
            "Logs a message, then answers",
            json!({"text": {"type": "string"}}),
            "forbidden",
        ),
        tool("ask", "Asks the client for a name", json!({}), "forbidden"),
        tool(
            "ask_url",
            "Sends the client to a URL",
            json!({}),
            "forbidden",
        ),
        tool("sample", "Asks the client's model", json!({}), "forbidden"),
        tool("fail", "Answers a JSON-RPC error", json!({}), "forbidden"),
        tool(
            "error_result",
            "Answers isError: true",
            json!({}),
            "forbidden",
        ),
        tool(
            "crash",
            "Exits the process",
            json!({"ms": {"type": "integer"}}),
            "forbidden",
        ),
        tool("hang", "Never answers", json!({}), "forbidden"),
        tool(
            "cancellations",
            "How many cancellations arrived",
            json!({}),
            "forbidden",
        ),
        tool("needs_task", "Marked required", json!({}), "required"),
        tool("add_tool", "Adds a tool", json!({}), "forbidden"),
        tool(
            "roots",
            "Asks the client for its roots",
            json!({}),
            "forbidden",
        ),
        tool(
            "startup_roots",
            "What the roots/list at start-up got",
            json!({}),
            "forbidden",
        ),
        tool(
            "big",
            "Answers a text of `bytes` bytes",
            json!({"bytes": {"type": "integer"}}),
            "forbidden",
        ),
        tool(
            "ask_mrtr",
            "Asks questions in MRTR rounds (2026-07-28 only)",
            json!({"rounds": {"type": "integer"}}),
            "forbidden",
        ),
    ];
    if state.added.load(Ordering::SeqCst) {
        tools.push(tool("added", "Added by add_tool", json!({}), "forbidden"));
    }
    if let Some(marked) = &state.options.mark_forbidden {
        for tool in &mut tools {
            let name = tool.get("name").and_then(Value::as_str).unwrap_or("");
            let forbidden = tool.pointer("/execution/taskSupport") == Some(&json!("forbidden"));
            if forbidden
                && !marked.iter().any(|marked| marked == name)
                && let Some(tool) = tool.as_object_mut()
            {
                tool.remove("execution");
            }
        }
    }
    tools
}

/// An answer to `roots/list` in words: `roots: URI (NAME), ...`,
/// `no roots`, or `error: MESSAGE`.
fn roots_text(answer: &Value) -> String {
    if let Some(error) = answer.get("error") {
        let message = error.get("message").and_then(Value::as_str).unwrap_or("?");
        return format!("error: {message}");
    }
    let roots: Vec<String> = answer
        .pointer("/result/roots")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|root| {
            let uri = root.get("uri").and_then(Value::as_str).unwrap_or("?");
            match root.get("name").and_then(Value::as_str) {
                Some(name) => format!("{uri} ({name})"),
                None => uri.to_owned(),
            }
        })
        .collect();
    if roots.is_empty() {
        "no roots".to_owned()
    } else {
        format!("roots: {}", roots.join(", "))
    }
}

fn text(text: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": text.into()}]})
}

/// Sends a request to the client and waits for its answer.
async fn ask_client(state: &State, out: &Out, method: &str, params: Value) -> Value {
    let id = state.next_id.fetch_add(1, Ordering::SeqCst) as u64 + 1000;
    let (sender, receiver) = oneshot::channel();
    if let Ok(mut waiting) = state.waiting.lock() {
        waiting.insert(id, sender);
    }
    let _ = out.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    receiver.await.unwrap_or(Value::Null)
}

async fn request(
    state: &State,
    out: &Out,
    method: &str,
    params: &Value,
) -> Result<Value, (i64, String)> {
    let modern = state.options.dual && is_modern(params);
    let mut answer = match method {
        "initialize" => Ok(json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {"listChanged": true}, "logging": {}},
            "serverInfo": {"name": "plain-upstream", "version": "1.0.0"},
        })),
        "server/discover" if state.options.dual => Ok(json!({
            "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}, "logging": {}},
            "ttlMs": 0,
            "cacheScope": "private",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "plain-upstream", "version": "1.0.0"}},
        })),
        "ping" => Ok(json!({})),
        "tools/list" => Ok(json!({"tools": tools(state)})),
        "tools/call" => call(state, out, params, modern).await,
        other => Err((-32601, format!("Method not found: {other}"))),
    };
    if (modern || method == "server/discover")
        && let Ok(Value::Object(result)) = &mut answer
    {
        result
            .entry("resultType")
            .or_insert_with(|| json!("complete"));
    }
    answer
}

/// The MRTR rounds of `ask_mrtr`: the answers so far travel in
/// `requestState` (`answered:A,B`), each round asks the next question.
fn ask_mrtr(arguments: &Value, params: &Value) -> Result<Value, (i64, String)> {
    let rounds = arguments
        .get("rounds")
        .and_then(Value::as_u64)
        .unwrap_or(1)
        .max(1);
    let mut answers: Vec<String> = match params.get("requestState").and_then(Value::as_str) {
        None => Vec::new(),
        Some(state) => {
            let Some(answered) = state.strip_prefix("answered:") else {
                return Err((-32602, format!("not a requestState of ours: {state:?}")));
            };
            answered
                .split(',')
                .filter(|answer| !answer.is_empty())
                .map(str::to_owned)
                .collect()
        }
    };
    let asked = format!("q{}", answers.len() + 1);
    let answer = params
        .pointer(&format!("/inputResponses/{asked}"))
        .filter(|answer| answer.get("action") == Some(&json!("accept")))
        .and_then(|answer| answer.pointer("/content/answer"))
        .and_then(Value::as_str);
    if let Some(answer) = answer {
        answers.push(answer.to_owned());
    }
    if answers.len() as u64 >= rounds {
        return Ok(text(format!("answers: {}", answers.join(", "))));
    }
    let next = answers.len() + 1;
    let mut round = json!({
        "resultType": "input_required",
        "inputRequests": {format!("q{next}"): {
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": format!("Question {next} of {rounds}?"),
                "requestedSchema": {
                    "type": "object",
                    "properties": {"answer": {"type": "string"}},
                    "required": ["answer"],
                },
            },
        }},
    });
    if !answers.is_empty() {
        round["requestState"] = json!(format!("answered:{}", answers.join(",")));
    }
    Ok(round)
}

async fn call(
    state: &State,
    out: &Out,
    params: &Value,
    modern: bool,
) -> Result<Value, (i64, String)> {
    let name = params.get("name").and_then(Value::as_str).unwrap_or("");
    let arguments = params.get("arguments").cloned().unwrap_or(json!({}));
    if let Some(path) = &state.options.call_log {
        let answers = params
            .get("inputResponses")
            .and_then(Value::as_object)
            .map_or(0, serde_json::Map::len);
        let era = if modern { "2026-07-28" } else { "2025" };
        append(path, &format!("{name} {era} answers={answers}"));
    }
    match (name, modern) {
        ("ask" | "ask_url" | "sample" | "roots", true) => {
            return Ok(json!({
                "content": [{"type": "text", "text": "server-initiated requests are unavailable on 2026-07-28 connections"}],
                "isError": true,
            }));
        }
        ("ask_mrtr", true) => return ask_mrtr(&arguments, params),
        ("ask_mrtr", false) => {
            return Err((
                -32602,
                "ask_mrtr asks in MRTR rounds, which exist only on 2026-07-28 connections"
                    .to_owned(),
            ));
        }
        _ => {}
    }
    let number = |key: &str, default: u64| {
        arguments
            .get(key)
            .and_then(Value::as_u64)
            .unwrap_or(default)
    };
    let token = params.pointer("/_meta/progressToken").cloned();
    match name {
        "echo" => Ok(text(
            arguments.get("text").and_then(Value::as_str).unwrap_or(""),
        )),
        "progress" => {
            let (steps, ms) = (number("steps", 3), number("ms", 100));
            for step in 1..=steps {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                if let Some(token) = &token {
                    let _ = out.send(json!({
                        "jsonrpc": "2.0",
                        "method": "notifications/progress",
                        "params": {"progressToken": token, "progress": step, "total": steps},
                    }));
                }
            }
            Ok(text(format!("done: {steps} steps")))
        }
        "log" => {
            let said = arguments
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or("hello");
            let _ = out.send(json!({
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": "info", "data": said},
            }));
            tokio::time::sleep(Duration::from_millis(300)).await;
            Ok(text("logged"))
        }
        "ask" => {
            let answer = ask_client(
                state,
                out,
                "elicitation/create",
                json!({
                    "mode": "form",
                    "message": "What is your name?",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}},
                        "required": ["name"],
                    },
                }),
            )
            .await;
            let result = answer.get("result").cloned().unwrap_or(Value::Null);
            Ok(match result.get("action").and_then(Value::as_str) {
                Some("accept") => text(format!(
                    "hello {}",
                    result
                        .pointer("/content/name")
                        .and_then(Value::as_str)
                        .unwrap_or("?")
                )),
                Some("decline") => text("declined"),
                Some("cancel") => text("cancelled"),
                _ => text(format!("no answer: {answer}")),
            })
        }
        "ask_url" => {
            let answer = ask_client(
                state,
                out,
                "elicitation/create",
                json!({
                    "mode": "url",
                    "message": "Sign in to continue",
                    "url": "https://auth.example.com/sign-in",
                    "elicitationId": "sign-in-1",
                }),
            )
            .await;
            Ok(text(format!(
                "url: {}",
                answer
                    .pointer("/result/action")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
            )))
        }
        "sample" => {
            let answer = ask_client(
                state,
                out,
                "sampling/createMessage",
                json!({
                    "messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}],
                    "maxTokens": 10,
                }),
            )
            .await;
            Ok(text(format!(
                "the model said: {}",
                answer
                    .pointer("/result/content/text")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
            )))
        }
        "fail" => Err((FAIL_CODE, "the fixture tool failed".to_owned())),
        "error_result" => Ok(json!({
            "content": [{"type": "text", "text": "the tool reports an error"}],
            "isError": true,
        })),
        "crash" => {
            tokio::time::sleep(Duration::from_millis(number("ms", 0))).await;
            std::process::exit(3);
        }
        "hang" => std::future::pending().await,
        "cancellations" => Ok(text(state.cancellations.load(Ordering::SeqCst).to_string())),
        "needs_task" | "added" => Ok(text("ran")),
        "big" => {
            let bytes = usize::try_from(number("bytes", 0)).unwrap_or(usize::MAX);
            Ok(text("x".repeat(bytes)))
        }
        "roots" => {
            let answer = ask_client(state, out, "roots/list", json!({})).await;
            Ok(text(roots_text(&answer)))
        }
        "startup_roots" => {
            let answer = state
                .startup_roots
                .lock()
                .ok()
                .and_then(|roots| roots.clone());
            Ok(text(answer.map_or_else(
                || "not asked".to_owned(),
                |answer| roots_text(&answer),
            )))
        }
        "add_tool" => {
            state.added.store(true, Ordering::SeqCst);
            let _ =
                out.send(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
            Ok(text("added"))
        }
        other => Ok(json!({
            "content": [{"type": "text", "text": format!("unknown tool {other}")}],
            "isError": true,
        })),
    }
}
