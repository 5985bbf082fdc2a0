//! What a gateway for a team is told: many upstreams behind one endpoint
//! ([`GatewayConfig`]), each with its name, its tools (allowed, denied),
//! who may reach it ([`UpstreamConfig::with_labels`],
//! [`UpstreamConfig::with_tool_labels`]), whose identity its calls carry
//! ([`Identity`]), and how it fails ([`UpstreamConfig::with_call_timeout`],
//! [`CircuitBreaker`]). [`GatewayConfig::check`] refuses a configuration
//! that cannot be served, before anything starts.
//!
//! Tool patterns are glob patterns in `globset`'s syntax (`*`, `?`,
//! `[abc]`, `{a,b}`), matched against the upstream's own tool names.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use globset::{Glob, GlobSet, GlobSetBuilder};

use super::{Error, GatewayOptions, Upstream};
use crate::server::Principal;

/// The separator between an upstream's name and its tool's, unless told
/// otherwise: `everything__echo`. Within the characters MCP allows in a
/// tool name (`A-Z a-z 0-9 _ - .`), and not a dot, which some model APIs
/// refuse in a function name.
pub const DEFAULT_SEPARATOR: &str = "__";

/// Many upstreams behind one gateway (see [`Gateway::start_many`](super::Gateway::start_many)).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct GatewayConfig {
    /// Between an upstream's name and its tool's name (default
    /// [`DEFAULT_SEPARATOR`]).
    pub separator: String,
    /// The upstreams, in order: where two unprefixed ones list a tool of
    /// the same name later (a clash at start is refused), the first wins.
    pub upstreams: Vec<UpstreamConfig>,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            separator: DEFAULT_SEPARATOR.to_owned(),
            upstreams: Vec::new(),
        }
    }
}

impl GatewayConfig {
    /// The separator between an upstream's name and its tool's.
    pub fn with_separator(mut self, separator: impl Into<String>) -> Self {
        self.separator = separator.into();
        self
    }

    /// Adds an upstream.
    pub fn with_upstream(mut self, upstream: UpstreamConfig) -> Self {
        self.upstreams.push(upstream);
        self
    }

    /// Refuses what cannot be served, naming it: no upstream, a name that
    /// is empty, not `A-Z a-z 0-9 _ -` or given twice, a separator outside
    /// MCP's tool-name characters, a tool pattern that is not a glob, an
    /// identity header that is not a header name.
    pub fn check(&self) -> Result<(), Error> {
        let bad = |message: String| Err(Error::Config { message });
        if self.upstreams.is_empty() {
            return bad("no upstream is configured".into());
        }
        if self.separator.is_empty()
            || !self
                .separator
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        {
            return bad(format!(
                "the separator {:?} must be one or more of the characters MCP allows in a tool \
                 name: A-Z, a-z, 0-9, _, - and .",
                self.separator
            ));
        }
        let mut names = HashSet::new();
        for upstream in &self.upstreams {
            let name = &upstream.name;
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
            {
                return bad(format!(
                    "the upstream name {name:?} must be one or more of A-Z, a-z, 0-9, _ and -"
                ));
            }
            if !names.insert(name.as_str()) {
                return bad(format!("two upstreams are named {name:?}"));
            }
            upstream.compile()?;
        }
        Ok(())
    }
}

/// One upstream of a [`GatewayConfig`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct UpstreamConfig {
    /// Its name: the prefix of its tools, the `upstream` label of its
    /// metrics, in messages.
    pub name: String,
    /// Where it is.
    pub upstream: Upstream,
    /// How its tools are served (policies, connections, roots, ...).
    pub options: GatewayOptions,
    /// Whether its tools are listed as name + separator + tool (default
    /// true) or under their own names.
    pub prefixed: bool,
    /// The tools served, as glob patterns (empty: all).
    pub allowed_tools: Vec<String>,
    /// The tools never served, as glob patterns (they win over `allowed_tools`).
    pub denied_tools: Vec<String>,
    /// The callers (principals: token labels, `oauth:ISS#SUB`) that may
    /// list and call its tools (`None`: every caller).
    pub labels: Option<Vec<String>>,
    /// Narrower rules for some tools: the tools matching the patterns may
    /// be listed and called only by these callers (every rule that matches
    /// a tool must name the caller).
    pub tool_labels: Vec<ToolLabels>,
    /// Whose identity its calls carry (default [`Identity::Gateway`]).
    pub identity: Identity,
    /// The longest a call may take, from the moment it is sent until the
    /// upstream's outcome, input waits included (default: no limit).
    pub call_timeout: Option<Duration>,
    /// When calls fail fast (see [`CircuitBreaker`]).
    pub breaker: CircuitBreaker,
}

/// Tools (glob patterns) open only to some callers.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolLabels {
    /// The tools, as glob patterns.
    pub tools: Vec<String>,
    /// The callers that may list and call them.
    pub labels: Vec<String>,
}

impl UpstreamConfig {
    /// The upstream `upstream`, called `name`, prefixed, open to every
    /// caller, on the gateway's own identity.
    pub fn new(name: impl Into<String>, upstream: Upstream) -> Self {
        Self {
            name: name.into(),
            upstream,
            options: GatewayOptions::default(),
            prefixed: true,
            allowed_tools: Vec::new(),
            denied_tools: Vec::new(),
            labels: None,
            tool_labels: Vec::new(),
            identity: Identity::Gateway,
            call_timeout: None,
            breaker: CircuitBreaker::default(),
        }
    }

    /// How its tools are served.
    pub fn with_options(mut self, options: GatewayOptions) -> Self {
        self.options = options;
        self
    }

    /// Lists its tools under their own names (a name another upstream
    /// lists too is refused at start).
    pub fn unprefixed(mut self) -> Self {
        self.prefixed = false;
        self
    }

    /// Serves only the tools matching one of `patterns`.
    pub fn with_allowed_tools<I: IntoIterator<Item = S>, S: Into<String>>(
        mut self,
        patterns: I,
    ) -> Self {
        self.allowed_tools
            .extend(patterns.into_iter().map(Into::into));
        self
    }

    /// Never serves the tools matching one of `patterns`.
    pub fn with_denied_tools<I: IntoIterator<Item = S>, S: Into<String>>(
        mut self,
        patterns: I,
    ) -> Self {
        self.denied_tools
            .extend(patterns.into_iter().map(Into::into));
        self
    }

    /// Opens it to these callers only.
    pub fn with_labels<I: IntoIterator<Item = S>, S: Into<String>>(mut self, labels: I) -> Self {
        self.labels
            .get_or_insert_with(Vec::new)
            .extend(labels.into_iter().map(Into::into));
        self
    }

    /// Opens the tools matching `tools` to the callers `labels` only.
    pub fn with_tool_labels<T, S, L, U>(mut self, tools: T, labels: L) -> Self
    where
        T: IntoIterator<Item = S>,
        S: Into<String>,
        L: IntoIterator<Item = U>,
        U: Into<String>,
    {
        self.tool_labels.push(ToolLabels {
            tools: tools.into_iter().map(Into::into).collect(),
            labels: labels.into_iter().map(Into::into).collect(),
        });
        self
    }

    /// Whose identity its calls carry.
    pub fn with_identity(mut self, identity: Identity) -> Self {
        self.identity = identity;
        self
    }

    /// The longest a call may take (`None`: no limit).
    pub fn with_call_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// When calls fail fast.
    pub fn with_breaker(mut self, breaker: CircuitBreaker) -> Self {
        self.breaker = breaker;
        self
    }

    /// The patterns and rules, compiled; an error names what is wrong.
    pub(crate) fn compile(&self) -> Result<Rules, Error> {
        let set = |what: &str, patterns: &[String]| -> Result<Option<GlobSet>, Error> {
            if patterns.is_empty() {
                return Ok(None);
            }
            let mut builder = GlobSetBuilder::new();
            for pattern in patterns {
                let glob = Glob::new(pattern).map_err(|error| Error::Config {
                    message: format!(
                        "the upstream {:?}: the {what} pattern {pattern:?} is not a glob: {}",
                        self.name,
                        error.kind()
                    ),
                })?;
                builder.add(glob);
            }
            builder.build().map(Some).map_err(|error| Error::Config {
                message: format!("the upstream {:?}: {error}", self.name),
            })
        };
        let mut tool_labels = Vec::new();
        for rule in &self.tool_labels {
            let tools = set("access", &rule.tools)?.ok_or_else(|| Error::Config {
                message: format!(
                    "the upstream {:?}: an access rule names no tool pattern",
                    self.name
                ),
            })?;
            tool_labels.push((tools, rule.labels.iter().cloned().collect()));
        }
        match &self.identity {
            Identity::Label { header, .. }
                if http::HeaderName::try_from(header.as_str()).is_err() =>
            {
                return Err(Error::Config {
                    message: format!(
                        "the upstream {:?}: the identity header {header:?} is not a header name",
                        self.name
                    ),
                });
            }
            Identity::Passthrough | Identity::Label { .. }
                if matches!(self.upstream, Upstream::Command { .. }) =>
            {
                return Err(Error::Config {
                    message: format!(
                        "the upstream {:?} is a command: a caller's identity can only be passed \
                         on to an HTTP upstream (identity gateway)",
                        self.name
                    ),
                });
            }
            _ => {}
        }
        Ok(Rules {
            allowed: set("allowed", &self.allowed_tools)?,
            denied: set("denied", &self.denied_tools)?,
            labels: self
                .labels
                .as_ref()
                .map(|labels| labels.iter().cloned().collect()),
            tool_labels,
            rerun: set("rerun-on-restart", &self.options.rerun_on_restart)?,
        })
    }
}

/// Whose identity an upstream's calls carry. Connections are pooled per
/// identity: one caller's session never carries another's call.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Identity {
    /// The gateway's own (the upstream's configured headers), for every caller.
    #[default]
    Gateway,
    /// The caller's own `Authorization` header, passed on as it came (an
    /// HTTP upstream; a call that carries none is refused).
    Passthrough,
    /// A header named `header` whose value is the caller's principal (its
    /// token label), or, with `values`, the value mapped from it (a caller
    /// without one may neither list nor call the upstream's tools).
    Label {
        /// The header's name, e.g. `X-User`.
        header: String,
        /// Label to value (`None`: the label itself).
        values: Option<BTreeMap<String, String>>,
    },
}

impl Identity {
    /// The header `header`, with the caller's label as its value.
    pub fn label_header(header: impl Into<String>) -> Self {
        Self::Label {
            header: header.into(),
            values: None,
        }
    }

    /// With a value for each label (see [`Identity::Label`]); leaves
    /// another identity as it is.
    pub fn with_values<I, K, V>(self, values: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        match self {
            Self::Label { header, .. } => Self::Label {
                header,
                values: Some(
                    values
                        .into_iter()
                        .map(|(k, v)| (k.into(), v.into()))
                        .collect(),
                ),
            },
            other => other,
        }
    }
}

/// When an upstream's calls fail fast: after `failures` connection
/// failures in a row (an attempt to connect that failed, whether for a call
/// or to reconnect in the background), calls fail at once, saying so, until
/// `cool_down` has passed; then calls try again, and one more failure opens
/// it again. A connection that opens closes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CircuitBreaker {
    /// Failures in a row that open it (default 5; 0: never).
    pub failures: u32,
    /// How long calls fail fast once it opened (default 30 s).
    pub cool_down: Duration,
}

impl Default for CircuitBreaker {
    fn default() -> Self {
        Self {
            failures: 5,
            cool_down: Duration::from_secs(30),
        }
    }
}

impl CircuitBreaker {
    /// Open after `failures` in a row (0: never), for `cool_down`.
    pub fn new(failures: u32, cool_down: Duration) -> Self {
        Self {
            failures,
            cool_down,
        }
    }
}

/// What a [`Gateway::reload`](super::Gateway::reload) changed, by upstream name.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct ReloadReport {
    /// Started.
    pub added: Vec<String>,
    /// No longer take calls; their running calls finish.
    pub removed: Vec<String>,
    /// Configured otherwise: new calls go to a new connection; running
    /// calls finish on the old one.
    pub replaced: Vec<String>,
    /// As they were.
    pub unchanged: Vec<String>,
}

/// An upstream's patterns and rules, compiled.
#[derive(Debug)]
pub(crate) struct Rules {
    allowed: Option<GlobSet>,
    denied: Option<GlobSet>,
    labels: Option<HashSet<String>>,
    tool_labels: Vec<(GlobSet, HashSet<String>)>,
    /// The tools whose calls a restart runs again.
    rerun: Option<GlobSet>,
}

impl Rules {
    /// Whether a call of the upstream's tool `tool` that a restart cut off
    /// runs again ([`GatewayOptions::rerun_on_restart`]).
    pub(crate) fn reruns(&self, tool: &str) -> bool {
        self.rerun.as_ref().is_some_and(|set| set.is_match(tool))
    }

    /// Whether the upstream's tool `tool` is served at all.
    pub(crate) fn serves(&self, tool: &str) -> bool {
        self.allowed.as_ref().is_none_or(|set| set.is_match(tool))
            && !self.denied.as_ref().is_some_and(|set| set.is_match(tool))
    }

    /// Whether `caller` may reach the upstream (some tool of it).
    pub(crate) fn open_to(&self, caller: &Principal) -> bool {
        self.labels
            .as_ref()
            .is_none_or(|labels| labels.contains(caller.as_str()))
    }

    /// Whether `caller` may list and call the tool `tool` (the upstream's
    /// name), served and open to it.
    pub(crate) fn tool_open_to(&self, tool: &str, caller: &Principal) -> bool {
        self.serves(tool)
            && self.open_to(caller)
            && self
                .tool_labels
                .iter()
                .filter(|(tools, _)| tools.is_match(tool))
                .all(|(_, labels)| labels.contains(caller.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upstream(name: &str) -> UpstreamConfig {
        UpstreamConfig::new(name, Upstream::url("http://127.0.0.1:1/mcp"))
    }

    #[test]
    fn a_config_that_cannot_be_served_is_refused_naming_what() {
        let message = |config: GatewayConfig| match config.check() {
            Err(Error::Config { message }) => message,
            other => panic!("expected a config error, got {other:?}"),
        };
        assert_eq!(
            message(GatewayConfig::default()),
            "no upstream is configured"
        );
        let two = GatewayConfig::default()
            .with_upstream(upstream("a"))
            .with_upstream(upstream("a"));
        assert_eq!(message(two), "two upstreams are named \"a\"");
        assert!(
            message(GatewayConfig::default().with_upstream(upstream("a b")))
                .contains("\"a b\" must be")
        );
        assert!(
            message(
                GatewayConfig::default()
                    .with_separator("/")
                    .with_upstream(upstream("a"))
            )
            .contains("separator \"/\"")
        );
        assert!(
            message(
                GatewayConfig::default().with_upstream(upstream("a").with_denied_tools(["[x"]))
            )
            .contains("the denied pattern \"[x\" is not a glob")
        );
        let command = UpstreamConfig::new("c", Upstream::command("true"))
            .with_identity(Identity::Passthrough);
        assert!(
            message(GatewayConfig::default().with_upstream(command))
                .contains("can only be passed on to an HTTP upstream")
        );
        let header = upstream("h").with_identity(Identity::label_header("X User"));
        assert!(
            message(GatewayConfig::default().with_upstream(header))
                .contains("\"X User\" is not a header name")
        );
        GatewayConfig::default()
            .with_separator(".")
            .with_upstream(upstream("a-1_b"))
            .check()
            .expect("a good config");
    }

    #[test]
    fn tools_are_served_as_the_patterns_and_labels_say() {
        let rules = upstream("a")
            .with_allowed_tools(["get_*", "echo"])
            .with_denied_tools(["get_secret*"])
            .with_labels(["alice", "ops"])
            .with_tool_labels(["echo"], ["ops"])
            .compile()
            .expect("compiles");
        let alice = Principal::new("alice");
        let ops = Principal::new("ops");
        let bob = Principal::new("bob");
        assert!(rules.serves("get_user"));
        assert!(!rules.serves("get_secret_key"));
        assert!(!rules.serves("delete_user"));
        assert!(rules.tool_open_to("get_user", &alice));
        assert!(!rules.tool_open_to("echo", &alice));
        assert!(rules.tool_open_to("echo", &ops));
        assert!(!rules.open_to(&bob));
        assert!(!rules.tool_open_to("get_user", &bob));
        let open = upstream("b").compile().expect("compiles");
        assert!(open.tool_open_to("anything", &bob));
    }
}
