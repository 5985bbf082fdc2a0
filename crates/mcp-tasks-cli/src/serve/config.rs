//! `serve --config FILE`: a server's TOML file. Its top-level keys are
//! `serve`'s flags by their long names (`http = "127.0.0.1:8080"`,
//! `max-running = 64`, `allowed-host = ["a", "b"]`), and flags given on the
//! command line win over them; `separator` and the `[[upstream]]` entries
//! make the gateway for a team (docs/cli.md has the whole format).
//!
//! The file is read in two places: before the command line is parsed
//! ([`expand`]: its flags become arguments, inserted where `--config` is),
//! and by `serve` ([`read_gateway`]: the upstreams), which reads it again
//! at each reload. Paths in it (`FILE` and `DIR` values, `sqlite:PATH`)
//! are relative to the file's folder. Every error names the file and,
//! where it has one, the line.

use std::collections::{BTreeMap, HashSet};
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{ArgAction, CommandFactory};
use mcp_tasks::gateway::{
    CircuitBreaker, GatewayConfig, GatewayOptions, Identity, Upstream, UpstreamConfig,
};
use mcp_tasks::server::TaskPolicy;
use serde::Deserialize;

/// A config file that cannot be served: `mcp-tasks` exits 64 with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConfigError {
    file: PathBuf,
    line: Option<usize>,
    message: String,
}

impl ConfigError {
    fn new(file: &Path, line: Option<usize>, message: impl Into<String>) -> Self {
        Self {
            file: file.to_owned(),
            line,
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.file.display(), self.message),
            None => write!(f, "{}: {}", self.file.display(), self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

/// The keys of the file that are not flags.
const SEPARATOR: &str = "separator";
const UPSTREAM: &str = "upstream";

/// The file's text and its top-level table.
pub(crate) struct ConfigFile {
    path: PathBuf,
    text: String,
    table: toml::Table,
}

impl ConfigFile {
    /// Reads and parses `path`.
    pub(crate) fn read(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| ConfigError::new(path, None, format!("cannot read it: {error}")))?;
        let table = text
            .parse::<toml::Table>()
            .map_err(|error| toml_error(path, &text, &error))?;
        Ok(Self {
            path: path.to_owned(),
            text,
            table,
        })
    }

    /// Where it was read from.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The folder relative paths in the file start from.
    fn folder(&self) -> PathBuf {
        self.path
            .parent()
            .filter(|parent| !parent.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_owned)
    }

    fn error(&self, key: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::new(&self.path, line_of_key(&self.text, key), message)
    }

    /// Whether the file has `[[upstream]]` entries.
    pub(crate) fn has_upstreams(&self) -> bool {
        matches!(self.table.get(UPSTREAM), Some(toml::Value::Array(_)))
    }

    /// The flag keys and their values, for telling what a reload cannot
    /// apply.
    pub(crate) fn flags(&self) -> BTreeMap<String, toml::Value> {
        self.table
            .iter()
            .filter(|(key, value)| {
                key.as_str() != SEPARATOR
                    && !(key.as_str() == UPSTREAM && matches!(value, toml::Value::Array(_)))
            })
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect()
    }
}

/// The command line `argv` with the flags of its `serve --config FILE`
/// inserted after `--config FILE`, less those the command line gives
/// itself; `argv` as it is without `--config`.
pub(crate) fn expand(argv: Vec<OsString>) -> Result<Vec<OsString>, Expanded> {
    let matches = crate::Cli::command()
        .try_get_matches_from(&argv)
        .map_err(|_| Expanded::Clap)?;
    let Some(("serve", serve)) = matches.subcommand() else {
        return Ok(argv);
    };
    let Some(path) = serve.get_one::<PathBuf>("config").cloned() else {
        return Ok(argv);
    };
    let given: HashSet<String> = serve
        .ids()
        .filter(|id| {
            serve.value_source(id.as_str()) == Some(clap::parser::ValueSource::CommandLine)
        })
        .map(|id| id.as_str().to_owned())
        .collect();
    let file = ConfigFile::read(&path).map_err(Expanded::Config)?;
    let args = flag_args(&file, &given).map_err(Expanded::Config)?;
    let Some(at) = argv.iter().position(|arg| {
        arg == "--config" || arg.to_str().is_some_and(|arg| arg.starts_with("--config="))
    }) else {
        return Ok(argv);
    };
    let skip = if argv[at] == "--config" { 2 } else { 1 };
    let mut expanded = argv;
    let rest = expanded.split_off(at + skip);
    expanded.extend(args);
    expanded.extend(rest);
    Ok(expanded)
}

/// Why [`expand`] could not expand.
#[derive(Debug)]
pub(crate) enum Expanded {
    /// The command line itself is wrong (parsed again to be reported).
    Clap,
    /// The file is.
    Config(ConfigError),
}

/// The arguments of the file's flag keys, each checked alone so that a bad
/// value is reported at its line; keys in `given` are left out (the command
/// line wins).
fn flag_args(file: &ConfigFile, given: &HashSet<String>) -> Result<Vec<OsString>, ConfigError> {
    // `serve`'s flags, as the command line has them.
    let command = crate::Cli::command()
        .find_subcommand("serve")
        .cloned()
        .expect("the CLI has `serve`")
        .no_binary_name(true);
    let folder = file.folder();
    let mut args = Vec::new();
    for (key, value) in &file.table {
        if key == SEPARATOR || (key == UPSTREAM && matches!(value, toml::Value::Array(_))) {
            continue;
        }
        let Some(arg) = command
            .get_arguments()
            .find(|arg| arg.get_long() == Some(key.as_str()) && key != "config")
        else {
            return Err(file.error(
                key,
                format!(
                    "unknown key `{key}`: the keys are serve's flags without their -- (see \
                     `mcp-tasks serve --help`), `separator` and [[upstream]] entries"
                ),
            ));
        };
        if given.contains(arg.get_id().as_str()) {
            continue;
        }
        let these =
            arg_values(arg, key, value, &folder).map_err(|message| file.error(key, message))?;
        // Alone, so that a value the flag refuses is reported at its line.
        if let Err(error) = command.clone().try_get_matches_from(&these) {
            use clap::error::ErrorKind;
            if !matches!(
                error.kind(),
                ErrorKind::MissingRequiredArgument | ErrorKind::ArgumentConflict
            ) {
                return Err(file.error(key, clap_message(&error)));
            }
        }
        args.extend(these);
    }
    Ok(args)
}

/// The arguments of one key: `--key value` once, or once per element.
fn arg_values(
    arg: &clap::Arg,
    key: &str,
    value: &toml::Value,
    folder: &Path,
) -> Result<Vec<OsString>, String> {
    let flag = format!("--{key}");
    let switch = matches!(arg.get_action(), ArgAction::SetTrue);
    let repeatable = matches!(arg.get_action(), ArgAction::Append);
    let is_path = arg
        .get_value_names()
        .is_some_and(|names| names.iter().any(|name| name == "FILE" || name == "DIR"));
    let one = |value: &toml::Value| -> Result<OsString, String> {
        let text = match value {
            toml::Value::String(text) => text.clone(),
            toml::Value::Integer(number) => number.to_string(),
            toml::Value::Float(number) => number.to_string(),
            _ => return Err(format!("`{key}` takes a string or a number here")),
        };
        Ok(if is_path {
            folder.join(text).into_os_string()
        } else if key == "store"
            && let Some(path) = text.strip_prefix("sqlite:")
        {
            format!("sqlite:{}", folder.join(path).display()).into()
        } else {
            text.into()
        })
    };
    // A flag whose value is optional and given with `=` (`--task-tools[=a,b]`):
    // true is the flag alone, a list its values joined.
    let optional =
        arg.is_require_equals_set() && arg.get_num_args().is_some_and(|n| n.min_values() == 0);
    match value {
        toml::Value::Boolean(on) if switch || optional => {
            Ok(if *on { vec![flag.into()] } else { vec![] })
        }
        toml::Value::Array(values) if optional => {
            let values: Result<Vec<String>, String> = values
                .iter()
                .map(|value| one(value).map(|value| value.to_string_lossy().into_owned()))
                .collect();
            Ok(vec![format!("{flag}={}", values?.join(",")).into()])
        }
        value if optional => Ok(vec![
            format!("{flag}={}", one(value)?.to_string_lossy()).into(),
        ]),
        _ if switch => Err(format!("`{key}` is true or false")),
        toml::Value::Array(values) if repeatable => {
            let mut args = Vec::new();
            for value in values {
                args.push(OsString::from(&flag));
                args.push(one(value)?);
            }
            Ok(args)
        }
        toml::Value::Table(entries) if repeatable => {
            // `tasks = { greet = "forbidden" }` is `--tasks greet=forbidden`.
            let joiner = if key == "upstream-header" { ": " } else { "=" };
            let mut args = Vec::new();
            for (name, value) in entries {
                let value = one(value)?;
                args.push(OsString::from(&flag));
                args.push(format!("{name}{joiner}{}", value.to_string_lossy()).into());
            }
            Ok(args)
        }
        toml::Value::Array(_) | toml::Value::Table(_) => {
            Err(format!("`{key}` takes one value, not a list"))
        }
        value => Ok(vec![flag.into(), one(value)?]),
    }
}

/// The first line of a clap error, less its `error: `.
fn clap_message(error: &clap::Error) -> String {
    let rendered = error.render().to_string();
    let line = rendered.lines().next().unwrap_or_default();
    line.strip_prefix("error: ").unwrap_or(line).to_owned()
}

/// The line (from 1) of the first top-level `key = ...`.
fn line_of_key(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .take_while(|line| !line.trim_start().starts_with('['))
        .position(|line| {
            let line = line.trim_start();
            let line = line
                .strip_prefix(key)
                .or_else(|| line.strip_prefix(&format!("\"{key}\"")));
            line.is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map(|index| index + 1)
}

/// A TOML error as `FILE:LINE: reason`.
fn toml_error(path: &Path, text: &str, error: &toml::de::Error) -> ConfigError {
    let line = error.span().map(|span| line_at(text, span.start));
    ConfigError::new(path, line, error.message().trim().to_owned())
}

/// The line (from 1) of byte `offset`.
fn line_at(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&byte| byte == b'\n')
        .count()
        + 1
}

/// The file's upstreams, as `serve` and a reload read them.
#[derive(Debug, Deserialize)]
struct Upstreams {
    #[serde(default)]
    separator: Option<String>,
    #[serde(default)]
    upstream: Vec<toml::Spanned<Entry>>,
}

/// One `[[upstream]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Entry {
    name: String,
    command: Option<String>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    prefix: Option<bool>,
    #[serde(default)]
    tasks: BTreeMap<String, String>,
    tasks_default: Option<String>,
    connections: Option<u16>,
    call_timeout: Option<f64>,
    #[serde(default)]
    roots: Vec<PathBuf>,
    #[serde(default)]
    allow_tools: Vec<String>,
    #[serde(default)]
    deny_tools: Vec<String>,
    labels: Option<Vec<String>>,
    #[serde(default)]
    access: Vec<Access>,
    identity: Option<String>,
    identity_header: Option<String>,
    identity_values: Option<BTreeMap<String, String>>,
    breaker_failures: Option<u32>,
    breaker_cool_down: Option<f64>,
    /// `true` (every tool), `false`, or tool patterns.
    rerun_on_restart: Option<toml::Value>,
}

/// One `[[upstream.access]]`: which labels may list and call some tools.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Access {
    tools: Vec<String>,
    labels: Vec<String>,
}

/// Reads a task policy: `optional`, `required` or `forbidden`.
pub(crate) fn parse_policy(text: &str) -> anyhow::Result<TaskPolicy> {
    match text {
        "optional" => Ok(TaskPolicy::Optional),
        "required" => Ok(TaskPolicy::Required),
        "forbidden" => Ok(TaskPolicy::Forbidden),
        other => {
            anyhow::bail!("unknown task policy {other:?}: use optional, required or forbidden")
        }
    }
}

/// The gateway of the file's `[[upstream]]` entries: `None` without them.
/// Checked as [`GatewayConfig::check`] does, so a file that parses but
/// cannot be served is refused before anything starts (or is replaced).
pub(crate) fn read_gateway(file: &ConfigFile) -> Result<Option<GatewayConfig>, ConfigError> {
    if !file.has_upstreams() {
        if file.table.contains_key(SEPARATOR) {
            return Err(file.error(SEPARATOR, "`separator` applies to [[upstream]] entries"));
        }
        return Ok(None);
    }
    let upstreams: Upstreams =
        toml::from_str(&file.text).map_err(|error| toml_error(&file.path, &file.text, &error))?;
    let mut config = GatewayConfig::default();
    if let Some(separator) = upstreams.separator {
        config = config.with_separator(separator);
    }
    let folder = file.folder();
    for entry in &upstreams.upstream {
        let line = line_at(&file.text, entry.span().start);
        let upstream = upstream_config(entry.get_ref(), &folder).map_err(|message| {
            ConfigError::new(
                &file.path,
                Some(line),
                format!("[[upstream]] {:?}: {message}", entry.get_ref().name),
            )
        })?;
        config = config.with_upstream(upstream);
    }
    config
        .check()
        .map_err(|error| ConfigError::new(&file.path, None, error.to_string()))?;
    Ok(Some(config))
}

/// One entry as the library takes it.
fn upstream_config(entry: &Entry, folder: &Path) -> Result<UpstreamConfig, String> {
    let upstream = match (&entry.command, &entry.url) {
        (Some(command), None) => {
            if !entry.headers.is_empty() {
                return Err("`headers` apply to a `url` upstream".into());
            }
            let mut upstream = Upstream::command(command.clone());
            for (name, value) in &entry.env {
                upstream = upstream.with_env(name.clone(), value.clone());
            }
            upstream
        }
        (None, Some(url)) => {
            if !entry.env.is_empty() {
                return Err("`env` applies to a `command` upstream".into());
            }
            let mut upstream = Upstream::url(url.clone());
            for (name, value) in &entry.headers {
                upstream = upstream.with_header(name.clone(), value.clone());
            }
            upstream
        }
        (Some(_), Some(_)) => return Err("give one of `command` and `url`, not both".into()),
        (None, None) => return Err("give `command` (run with sh -c) or `url`".into()),
    };
    let default = entry.tasks_default.as_deref().unwrap_or("optional");
    let mut options = GatewayOptions::default().with_default_policy(
        parse_policy(default).map_err(|error| format!("`tasks-default`: {error}"))?,
    );
    for (tool, mode) in &entry.tasks {
        let policy = parse_policy(mode).map_err(|error| format!("`tasks.{tool}`: {error}"))?;
        options = options.with_tool_policy(tool.clone(), policy);
    }
    if let Some(connections) = entry.connections {
        if connections == 0 {
            return Err("`connections` is at least 1".into());
        }
        options = options.with_max_upstream_connections(usize::from(connections));
    }
    let mut roots = Vec::new();
    for dir in &entry.roots {
        let dir = folder.join(dir);
        let root = mcp_tasks::gateway::root_for_path(&dir)
            .map_err(|error| format!("`roots` {}: {error}", dir.display()))?;
        roots.push(root);
    }
    options = options.with_roots(roots);
    options = options.with_rerun_on_restart(rerun_on_restart(entry.rerun_on_restart.as_ref())?);
    let mut config = UpstreamConfig::new(entry.name.clone(), upstream)
        .with_options(options)
        .with_allowed_tools(entry.allow_tools.iter().cloned())
        .with_denied_tools(entry.deny_tools.iter().cloned())
        .with_call_timeout(
            entry
                .call_timeout
                .map(|secs| seconds("call-timeout", secs))
                .transpose()?,
        )
        .with_breaker(CircuitBreaker::new(
            entry
                .breaker_failures
                .unwrap_or(CircuitBreaker::default().failures),
            match entry.breaker_cool_down {
                Some(secs) => seconds("breaker-cool-down", secs)?,
                None => CircuitBreaker::default().cool_down,
            },
        ));
    if entry.prefix == Some(false) {
        config = config.unprefixed();
    }
    if let Some(labels) = &entry.labels {
        config = config.with_labels(labels.iter().cloned());
    }
    for access in &entry.access {
        config =
            config.with_tool_labels(access.tools.iter().cloned(), access.labels.iter().cloned());
    }
    config = config.with_identity(identity(entry)?);
    Ok(config)
}

/// The tool patterns of `rerun-on-restart`: `true` is every tool.
fn rerun_on_restart(value: Option<&toml::Value>) -> Result<Vec<String>, String> {
    let refused = || {
        "`rerun-on-restart`: give true (every tool), false, or a list of tool names or glob \
         patterns"
            .to_owned()
    };
    match value {
        None | Some(toml::Value::Boolean(false)) => Ok(Vec::new()),
        Some(toml::Value::Boolean(true)) => Ok(vec!["*".to_owned()]),
        Some(toml::Value::Array(tools)) => tools
            .iter()
            .map(|tool| tool.as_str().map(str::to_owned).ok_or_else(refused))
            .collect(),
        Some(_) => Err(refused()),
    }
}

/// The entry's `identity`, `identity-header` and `identity-values`.
fn identity(entry: &Entry) -> Result<Identity, String> {
    let with_label = entry.identity_header.is_some() || entry.identity_values.is_some();
    match entry.identity.as_deref().unwrap_or("gateway") {
        "gateway" | "passthrough" if with_label => {
            Err("`identity-header` and `identity-values` apply to identity = \"label\"".into())
        }
        "gateway" => Ok(Identity::Gateway),
        "passthrough" if entry.url.is_none() => Err(
            "identity = \"passthrough\" passes the caller's Authorization header on: a `url` \
             upstream only"
                .into(),
        ),
        "passthrough" => Ok(Identity::Passthrough),
        "label" => {
            let Some(header) = &entry.identity_header else {
                return Err("identity = \"label\" needs `identity-header`, e.g. \"X-User\"".into());
            };
            if http::HeaderName::from_bytes(header.as_bytes()).is_err() {
                return Err(format!("`identity-header` {header:?} is not a header name"));
            }
            let identity = Identity::label_header(header.clone());
            Ok(match &entry.identity_values {
                Some(values) => identity.with_values(values.clone()),
                None => identity,
            })
        }
        other => Err(format!(
            "unknown identity {other:?}: use gateway, passthrough or label"
        )),
    }
}

/// A number of seconds, more than 0.
fn seconds(key: &str, secs: f64) -> Result<Duration, String> {
    Duration::try_from_secs_f64(secs)
        .ok()
        .filter(|duration| !duration.is_zero())
        .ok_or_else(|| format!("`{key}` is a number of seconds more than 0, not {secs}"))
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
