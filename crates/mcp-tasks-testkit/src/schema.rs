//! Checks JSON-RPC messages against the official MCP JSON schemas.
//!
//! The schemas live outside the repo, in `<workspace>/../shared/spec`, and are read at test time.
//! When that folder is absent every check passes and a notice says the checks were NOT run.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, Once, PoisonError};

use jsonschema::{Draft, Resource, Validator};
use serde_json::{Value, json};

/// Retrieval URI for the core schema, which has no `$id` of its own.
const CORE_URI: &str = "urn:mcp:schema:2026-07-28";
const TASKS_EXT: &str = "io.modelcontextprotocol/tasks";

/// The two schema documents, and the URI under which the ext-tasks one is registered.
static SPEC: LazyLock<Option<(Value, Value, String)>> = LazyLock::new(|| {
    let dir = spec_dir()?;
    let read = |rel: &str| -> Value {
        let path = dir.join(rel);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{rel}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{rel}: {e}"))
    };
    let core = read("2026-07-28/schema.json");
    let ext = read("ext-tasks/schema.json");
    let ext_uri = String::from(ext["$id"].as_str().unwrap_or("urn:mcp:ext-tasks"));
    Some((core, ext, ext_uri))
});

static VALIDATORS: LazyLock<Mutex<HashMap<String, Arc<Validator>>>> =
    LazyLock::new(Default::default);

/// Retrieval URI for the 2025-11-25 schema (legacy tasks), which has no `$id` either.
const LEGACY_URI: &str = "urn:mcp:schema:2025-11-25";

/// The 2025-11-25 schema document, beside the others.
static LEGACY: LazyLock<Option<Value>> = LazyLock::new(|| {
    let path = spec_dir()?.join("2025-11-25/schema.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Some(serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
});

/// Validate a value against a named def of the 2025-11-25 schema (the legacy tasks era).
pub fn check_legacy(def: &str, value: &Value) -> Result<(), String> {
    let Some(schema) = LEGACY.as_ref() else {
        return Ok(());
    };
    if schema["$defs"].get(def).is_none() {
        return Err(format!("no def {def:?} in the 2025-11-25 schema"));
    }
    let key = format!("2025-11-25:{def}");
    let validator = {
        let mut cache = VALIDATORS.lock().unwrap_or_else(PoisonError::into_inner);
        match cache.get(&key) {
            Some(v) => Arc::clone(v),
            None => {
                let resource =
                    Resource::from_contents(schema.clone()).map_err(|e| e.to_string())?;
                let v = jsonschema::options()
                    .with_draft(Draft::Draft202012)
                    .with_resource(LEGACY_URI, resource)
                    .build(&json!({ "$ref": format!("{LEGACY_URI}#/$defs/{def}") }))
                    .map_err(|e| format!("cannot compile {def}: {e}"))?;
                Arc::clone(cache.entry(key).or_insert(Arc::new(v)))
            }
        }
    };
    let found: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{def} (2025-11-25): at `{}`: {e}", e.instance_path))
        .collect();
    if found.is_empty() {
        Ok(())
    } else {
        Err(found.join("\n"))
    }
}

/// Where the official schemas are, or None (saying once that the schema checks were NOT run).
pub fn spec_dir() -> Option<PathBuf> {
    static NOTICE: Once = Once::new();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/spec");
    let core_and_ext = ["2026-07-28/schema.json", "ext-tasks/schema.json"];
    if core_and_ext.iter().all(|f| dir.join(f).is_file()) {
        return Some(dir);
    }
    // In CI the spec is laid beside the clone: a missing one is a broken setup, not a skip.
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set but the MCP schemas are missing at {}",
        dir.display()
    );
    NOTICE.call_once(|| {
        eprintln!(
            "NOTICE: the MCP schema checks were NOT run: {} (../shared/spec) is absent",
            dir.display()
        );
    });
    None
}

/// Every error of `value` against `$defs/<def>` (core schema first, then ext-tasks), each with
/// its instance path prefixed by `at`. Both documents are registered as in-memory resources,
/// so all their `#/$defs/...` refs resolve offline; compiled validators are cached.
fn errors(def: &str, value: &Value, at: &str) -> Result<Vec<String>, String> {
    let Some((core, ext, ext_uri)) = SPEC.as_ref() else {
        return Ok(Vec::new());
    };
    let validator = {
        let mut cache = VALIDATORS.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(v) = cache.get(def) {
            Arc::clone(v)
        } else {
            let base = match (core["$defs"].get(def), ext["$defs"].get(def)) {
                (Some(_), _) => CORE_URI,
                (None, Some(_)) => ext_uri.as_str(),
                (None, None) => return Err(format!("no def {def:?} in the core or ext schema")),
            };
            let res = |doc: &Value| Resource::from_contents(doc.clone()).map_err(|e| e.to_string());
            let v = jsonschema::options()
                .with_draft(Draft::Draft202012)
                .with_resource(CORE_URI, res(core)?)
                .with_resource(ext_uri.as_str(), res(ext)?)
                .build(&json!({ "$ref": format!("{base}#/$defs/{def}") }))
                .map_err(|e| format!("cannot compile {def}: {e}"))?;
            Arc::clone(cache.entry(def.to_owned()).or_insert(Arc::new(v)))
        }
    };
    let found = validator.iter_errors(value);
    Ok(found
        .map(|e| format!("{def}: at `{at}{}`: {e}", e.instance_path))
        .collect())
}

/// The ext schema says the extension's settings object must be empty, core only that it is an
/// object: check every `extensions["io.modelcontextprotocol/tasks"]` found inside `value`.
fn ext_settings_errors(value: &Value, at: &str, out: &mut Vec<String>) -> Result<(), String> {
    for (key, child) in value.as_object().into_iter().flatten() {
        let path = format!("{at}/{}", key.replace('~', "~0").replace('/', "~1"));
        if let Some(settings) = child.get(TASKS_EXT).filter(|_| key == "extensions") {
            let at = format!("{path}/{}", TASKS_EXT.replace('/', "~1"));
            out.extend(errors("TasksExtensionCapability", settings, &at)?);
        }
        ext_settings_errors(child, &path, out)?;
    }
    Ok(())
}

fn check_all(mut all: Vec<String>, value: &Value) -> Result<(), String> {
    ext_settings_errors(value, "", &mut all)?;
    if all.is_empty() {
        Ok(())
    } else {
        Err(all.join("\n"))
    }
}

/// Validate a whole JSON-RPC request against the schema def for its method; for `tasks/*` also
/// check `params` against core `RequestParams`, as the ext defs leave out the required `_meta`.
pub fn check_request(message: &Value) -> Result<(), String> {
    if SPEC.is_none() {
        return Ok(());
    }
    let method = message["method"].as_str().ok_or("no `method`")?;
    let def = match method {
        "tools/call" => "CallToolRequest",
        "server/discover" => "DiscoverRequest",
        "subscriptions/listen" => "SubscriptionsListenRequest",
        "tasks/get" => "GetTaskRequest",
        "tasks/update" => "UpdateTaskRequest",
        "tasks/cancel" => "CancelTaskRequest",
        other => return Err(format!("no schema def mapped for method {other:?}")),
    };
    let mut all = errors(def, message, "")?;
    if method.starts_with("tasks/") {
        all.extend(errors("RequestParams", &message["params"], "/params")?);
    }
    check_all(all, message)
}

/// Validate a value against a named def of the core schema, else of the ext-tasks schema.
pub fn check_def(def: &str, value: &Value) -> Result<(), String> {
    check_all(errors(def, value, "")?, value)
}

/// The official example files for a def name, parsed, sorted by file name (empty when absent).
pub fn examples(def: &str) -> Vec<(String, Value)> {
    let dir = spec_dir().map(|d| d.join("2026-07-28/examples").join(def));
    let Some(Ok(entries)) = dir.map(std::fs::read_dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, Value)> = (entries.flatten())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .filter(|(name, _)| name.ends_with(".json"))
        .map(|(name, path)| {
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
            let value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, value)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}
