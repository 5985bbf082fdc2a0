//! The upstreams a gateway serves now: a [`Table`] of [`Route`]s, one per
//! configured upstream, swapped whole by a reload ([`Routes::reload`]).
//!
//! A route owns its upstream's [`Link`] (the gateway's own connection,
//! the tool list, the pool of connections for calls), its compiled
//! [`Rules`], its parked synchronous calls, and a [`Pool`] per caller
//! identity when its calls carry the caller's ([`Identity`]). A call holds
//! its route (an `Arc`) until it ends, so a route a reload removed or
//! replaced keeps its connections for the calls it runs, and closes them
//! when the last one ends: a reload fails no task.
//!
//! An upstream that cannot be reached when the gateway starts is
//! [`Pending`] in the table instead: tried again in the background, and
//! swapped in as a route (the clients told its tools came) once it answers.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock, Weak};

use rmcp::ErrorData;
use rmcp::model::Tool;
use rmcp::service::{RequestContext, RoleServer};
use sha2::Digest;
use tokio_util::sync::CancellationToken;

use super::breaker::Health;
use super::connection::Shared;
use super::connection::backoff;
use super::pool::Pool;
use super::team::{GatewayConfig, Identity, ReloadReport, Rules, UpstreamConfig};
use super::upstream::Link;
use super::{Error, GatewayOptions, sync};
use crate::server::{Principal, TaskPolicy};

/// The header and value a call carries to the upstream for its caller
/// ([`Identity::Passthrough`], [`Identity::Label`]). Kept in the task's
/// record by a task that must find the upstream again after a restart
/// (`resume.rs`); never logged.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct CallerIdentity {
    pub(crate) header: String,
    pub(crate) value: String,
}

/// One upstream as the gateway serves it.
pub(crate) struct Route {
    pub(crate) config: UpstreamConfig,
    pub(crate) rules: Rules,
    pub(crate) link: Arc<Link>,
    pub(crate) options: Arc<GatewayOptions>,
    /// Its synchronous calls parked for their caller's input (MRTR).
    pub(crate) parked: Arc<sync::Parked>,
    /// A pool per identity, for an upstream whose calls carry the caller's
    /// (by the identity's digest: the key holds no token).
    identities: Mutex<HashMap<[u8; 32], Arc<Pool>>>,
}

impl Route {
    /// Connects to the upstream and reads its tools; its tool list changes
    /// are told on `version`.
    pub(crate) async fn start(
        config: UpstreamConfig,
        version: &tokio::sync::watch::Sender<u64>,
    ) -> Result<Arc<Self>, Error> {
        let rules = config.compile()?;
        let health = Health::new(config.name.as_str(), config.breaker);
        let link = Link::start(config.upstream.clone(), config.options.clone(), health).await?;
        // Ends when the link is dropped (its sender goes with it).
        let mut changes = link.watch_tools();
        let told = version.clone();
        tokio::spawn(async move {
            while changes.changed().await.is_ok() {
                told.send_modify(|version| *version += 1);
            }
        });
        Ok(Arc::new(Self {
            options: Arc::new(config.options.clone()),
            config,
            rules,
            link,
            parked: Arc::default(),
            identities: Mutex::default(),
        }))
    }

    pub(crate) fn name(&self) -> &str {
        &self.config.name
    }

    /// The name a caller sees for the upstream's tool `tool`.
    pub(crate) fn exposed(&self, separator: &str, tool: &str) -> String {
        if self.config.prefixed {
            format!("{}{separator}{tool}", self.config.name)
        } else {
            tool.to_owned()
        }
    }

    /// The upstream's tool a caller's `exposed` name would be, by the name alone.
    fn tool_of<'a>(&self, separator: &str, exposed: &'a str) -> Option<&'a str> {
        if self.config.prefixed {
            exposed
                .strip_prefix(self.config.name.as_str())?
                .strip_prefix(separator)
        } else {
            Some(exposed)
        }
    }

    /// The policy of the upstream's tool `tool`: the one given for it, else
    /// the upstream's mark, else the default.
    pub(crate) fn policy(&self, tool: &str) -> TaskPolicy {
        self.options
            .policies
            .get(tool)
            .copied()
            .or_else(|| self.link.cached_tools().marked.get(tool).copied())
            .unwrap_or(self.options.default_policy)
    }

    /// Whether `caller` may list and call the upstream's tool `tool`: the
    /// rules, and an identity the upstream can be sent.
    pub(crate) fn open_to(&self, tool: &str, caller: &Principal) -> bool {
        self.rules.tool_open_to(tool, caller)
            && match &self.config.identity {
                Identity::Label {
                    values: Some(values),
                    ..
                } => values.contains_key(caller.as_str()),
                _ => true,
            }
    }
    /// The header and value a call of `caller` carries to the upstream
    /// (`None`: the gateway's own identity, the link's pool).
    pub(crate) fn identity_for(
        &self,
        context: &RequestContext<RoleServer>,
        caller: &Principal,
    ) -> Result<Option<CallerIdentity>, ErrorData> {
        let (header, value) = match &self.config.identity {
            Identity::Gateway => return Ok(None),
            Identity::Passthrough => {
                let value = context
                    .extensions
                    .get::<http::request::Parts>()
                    .and_then(|parts| parts.headers.get(http::header::AUTHORIZATION))
                    .and_then(|value| value.to_str().ok())
                    .ok_or_else(|| {
                        ErrorData::invalid_params(
                            format!(
                                "the upstream {} is called with the caller's own Authorization \
                                 header, and this request carries none",
                                self.config.name
                            ),
                            None,
                        )
                    })?;
                ("Authorization".to_owned(), value.to_owned())
            }
            Identity::Label { header, values } => {
                let value = match values {
                    None => caller.as_str().to_owned(),
                    Some(values) => values.get(caller.as_str()).cloned().ok_or_else(|| {
                        ErrorData::internal_error(
                            "the caller has no identity for this upstream",
                            None,
                        )
                    })?,
                };
                (header.clone(), value)
            }
        };
        Ok(Some(CallerIdentity { header, value }))
    }

    /// The pool the calls carrying `identity` go on (`None`: the gateway's
    /// own, the link's), made on first use.
    pub(crate) fn pool_of(&self, identity: Option<&CallerIdentity>) -> Arc<Pool> {
        let Some(CallerIdentity { header, value }) = identity else {
            return self.link.pool.clone();
        };
        let header = header.as_str();
        let mut digest = sha2::Sha256::new();
        digest.update(header.as_bytes());
        digest.update([0]);
        digest.update(value.as_bytes());
        let key: [u8; 32] = digest.finalize().into();
        let mut pools = self
            .identities
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Pools no call holds and with no connection left are let go.
        pools.retain(|_, pool| Arc::strong_count(pool) > 1 || !pool.is_unused());
        let pool = pools.entry(key).or_insert_with(|| {
            Arc::new(Pool::new(
                self.config.upstream.clone().with_only_header(header, value),
                // A caller's refused identity is no outage: its failures
                // do not count on the upstream's breaker.
                Shared {
                    health: self.link.health.unheeded(),
                    ..self.link.shared()
                },
                self.config.options.clone(),
                self.link.pool.eras(),
            ))
        });
        pool.clone()
    }

    /// Whether a call of the upstream's tool `tool` cut off by a restart
    /// is run again ([`GatewayOptions::rerun_on_restart`]).
    pub(crate) fn reruns(&self, tool: &str) -> bool {
        self.rules.reruns(tool)
    }

    /// Whether the calls carry the gateway's identity (the link's pool).
    pub(crate) fn own_identity(&self) -> bool {
        matches!(self.config.identity, Identity::Gateway)
    }
}

/// The routes served now, in configured order.
pub(crate) struct Table {
    pub(crate) separator: String,
    pub(crate) routes: Vec<Arc<Route>>,
    /// The upstreams that could not be reached when the gateway started:
    /// served, and their tools listed, once they answer ([`Pending`]).
    pub(crate) pending: Vec<Arc<Pending>>,
}

/// An upstream that could not be reached when the gateway started (its
/// command did not complete the handshake, its URL did not answer): the
/// gateway starts without its tools and a task of its own tries again
/// with backoff until it answers, the gateway is dropped, or a reload
/// removes or changes it.
pub(crate) struct Pending {
    pub(crate) config: UpstreamConfig,
    /// Its rules, compiled once (who may be told it is waited for).
    pub(crate) rules: Option<Rules>,
    stop: CancellationToken,
}

impl Pending {
    /// Waited for from now on (its gauge 1), tried again until it is
    /// dropped.
    fn new(config: UpstreamConfig) -> Arc<Self> {
        waiting(&config.name, true);
        Arc::new(Self {
            // It compiled before it failed to start (a config error is not
            // left pending).
            rules: config.compile().ok(),
            config,
            stop: CancellationToken::new(),
        })
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.stop.cancel();
        // Served, or no longer configured: not waited for any more.
        waiting(&self.config.name, false);
    }
}

/// Sets the gauge of whether the upstream `name` is waited for.
fn waiting(name: &str, waited: bool) {
    metrics::gauge!(crate::telemetry::names::UPSTREAM_WAITING, "upstream" => name.to_owned())
        .set(if waited { 1.0 } else { 0.0 });
}

/// Whether `error` says the upstream could not be reached (it may answer
/// later), not that its configuration cannot be served.
fn unreachable(error: &Error) -> bool {
    matches!(
        error,
        Error::Spawn { .. }
            | Error::Initialize { .. }
            | Error::ConnectTimeout(_)
            | Error::ListTools { .. }
    )
}

impl Table {
    /// The route and upstream tool the name `exposed` calls, for `caller`,
    /// by the tools as last read: `None` for a name no upstream lists, a
    /// tool not served, or one not open to the caller (alike: no oracle).
    pub(crate) fn find(&self, exposed: &str, caller: &Principal) -> Option<(Arc<Route>, String)> {
        self.routes.iter().find_map(|route| {
            let tool = route.tool_of(&self.separator, exposed)?;
            let listed = route
                .link
                .cached_tools()
                .list
                .iter()
                .any(|listed| listed.name == tool);
            (listed && route.open_to(tool, caller)).then(|| (route.clone(), tool.to_owned()))
        })
    }

    /// Every tool open to `caller` (all of them with `None`), under the
    /// name it is called by, with its route and upstream name. Where two
    /// unprefixed upstreams list one name (after a start that found none),
    /// the first keeps it.
    pub(crate) fn tools(&self, caller: Option<&Principal>) -> Vec<(Tool, Arc<Route>, String)> {
        let mut seen = HashSet::new();
        let mut tools = Vec::new();
        for route in &self.routes {
            for tool in route.link.cached_tools().list.iter() {
                let open = match caller {
                    Some(caller) => route.open_to(&tool.name, caller),
                    None => route.rules.serves(&tool.name),
                };
                if !open {
                    continue;
                }
                let name = route.exposed(&self.separator, &tool.name);
                if !seen.insert(name.clone()) {
                    tracing::warn!(
                        upstream = route.name(),
                        tool = %name,
                        "another upstream lists this tool name first; left out"
                    );
                    continue;
                }
                let mut exposed = tool.clone();
                exposed.name = name.into();
                tools.push((exposed, route.clone(), tool.name.to_string()));
            }
        }
        tools
    }

    /// Refuses two upstreams that list one name (the tools they serve).
    fn check_clashes(&self) -> Result<(), Error> {
        let mut names: HashMap<String, (&str, String)> = HashMap::new();
        for route in &self.routes {
            for tool in route.link.cached_tools().list.iter() {
                if !route.rules.serves(&tool.name) {
                    continue;
                }
                let name = route.exposed(&self.separator, &tool.name);
                if let Some((first, first_tool)) = names.get(&name) {
                    return Err(Error::Config {
                        message: format!(
                            "the tool name {name:?} would be served by two upstreams: {first:?} \
                             (its tool {first_tool:?}) and {:?} (its tool {:?}); prefix one of \
                             them, or deny one of the tools",
                            route.name(),
                            tool.name
                        ),
                    });
                }
                names.insert(name, (route.name(), tool.name.to_string()));
            }
        }
        Ok(())
    }
}

/// The table served now, swapped whole by a reload, and the version that
/// tells of every change of the tools served.
pub(crate) struct Routes {
    table: RwLock<Arc<Table>>,
    /// Routes a reload removed or replaced while synchronous calls of
    /// theirs were parked for input (with the separator they were served
    /// under): a retry still reaches its call. Each is kept by a task of its
    /// own until none of its calls is parked.
    retired: Mutex<Vec<(String, Weak<Route>)>>,
    pub(crate) version: tokio::sync::watch::Sender<u64>,
    /// One reload at a time.
    reloading: tokio::sync::Mutex<()>,
    /// Set once a [`GatewayResumes`](super::GatewayResumes) is attached:
    /// the gateway's tasks are made resumable.
    resumable: std::sync::atomic::AtomicBool,
}

impl Routes {
    /// From now on the gateway's tasks are resumable.
    pub(crate) fn set_resumable(&self) {
        self.resumable
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// Whether the gateway's tasks are made resumable.
    pub(crate) fn resumable(&self) -> bool {
        self.resumable.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Starts every upstream of `config` and checks that no two serve one
    /// name. With `all_or_nothing`, each must connect and list its tools;
    /// otherwise one that cannot be reached is left [`Pending`], said in
    /// one line, and served once it answers (the clients told its tools
    /// came).
    pub(crate) async fn start(
        config: GatewayConfig,
        all_or_nothing: bool,
    ) -> Result<Arc<Self>, Error> {
        config.check()?;
        let version = tokio::sync::watch::Sender::new(0);
        let mut routes = Vec::new();
        let mut pending = Vec::new();
        // All at once: an upstream that takes its connect timeout to fail
        // delays the start by that, not by the sum.
        let started = futures::future::join_all(
            config
                .upstreams
                .iter()
                .map(|upstream| Route::start(upstream.clone(), &version)),
        )
        .await;
        for (upstream, started) in config.upstreams.into_iter().zip(started) {
            let name = upstream.name.clone();
            match started {
                Ok(route) => routes.push(route),
                Err(error) if !all_or_nothing && unreachable(&error) => {
                    let retry = &upstream.options;
                    // A spawn's own reason is short and says it all (the
                    // handshake's, rmcp's words, goes to debug).
                    let why = match &error {
                        Error::Spawn { source } => format!("{error}: {source}"),
                        _ => error.to_string(),
                    };
                    tracing::warn!(
                        "the upstream {name:?} cannot be reached ({why}): the gateway starts \
                         without its tools, and tries again every {} s at most",
                        retry.restart_backoff_max.as_secs().max(1)
                    );
                    tracing::debug!(upstream = %name, error = ?error, "why the upstream cannot be reached");
                    pending.push(Pending::new(upstream));
                }
                Err(error) => return Err(Error::upstream(&name, error)),
            }
        }
        let table = Table {
            separator: config.separator,
            routes,
            pending,
        };
        table.check_clashes()?;
        let routes = Arc::new(Self {
            table: RwLock::new(Arc::new(table)),
            retired: Mutex::default(),
            version,
            reloading: tokio::sync::Mutex::default(),
            resumable: std::sync::atomic::AtomicBool::new(false),
        });
        for pending in &routes.current().pending {
            routes.retry(pending);
        }
        Ok(routes)
    }

    /// Tries `pending` again with backoff, in a task of its own, and serves
    /// it once it answers.
    fn retry(self: &Arc<Self>, pending: &Arc<Pending>) {
        let routes = Arc::downgrade(self);
        let weak = Arc::downgrade(pending);
        let config = pending.config.clone();
        let stop = pending.stop.clone();
        tokio::spawn(async move {
            let options = &config.options;
            let mut failures = 0u32;
            loop {
                failures = failures.saturating_add(1);
                let pause = backoff(
                    options.restart_backoff_min,
                    options.restart_backoff_max,
                    failures,
                );
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = stop.cancelled() => return,
                }
                let Some(routes) = routes.upgrade() else {
                    return;
                };
                match Route::start(config.clone(), &routes.version).await {
                    Ok(route) => return routes.settle(&weak, Some(route)).await,
                    Err(error) if unreachable(&error) => {
                        tracing::debug!(upstream = %config.name, %error, "the upstream still cannot be reached");
                    }
                    Err(error) => {
                        tracing::warn!(
                            "the upstream {:?} cannot be served ({error}); not tried again",
                            config.name
                        );
                        return routes.settle(&weak, None).await;
                    }
                }
            }
        });
    }

    /// Settles the waited-for `pending`, if the table still holds it (a
    /// reload may have removed or changed it): with `route` (its upstream
    /// now answers), serves it and tells the clients its tools came; without
    /// (it cannot be served), or when its tools clash with another
    /// upstream's, takes it out of the table, no longer waited for (its
    /// calls unknown tools, its gauge 0).
    async fn settle(&self, pending: &Weak<Pending>, route: Option<Arc<Route>>) {
        let _one = self.reloading.lock().await;
        let Some(pending) = pending.upgrade() else {
            return;
        };
        let old = self.current();
        if !old.pending.iter().any(|each| Arc::ptr_eq(each, &pending)) {
            return;
        }
        let name = &pending.config.name;
        let settled = |route: Option<Arc<Route>>| Table {
            separator: old.separator.clone(),
            routes: old.routes.iter().cloned().chain(route).collect(),
            pending: old
                .pending
                .iter()
                .filter(|each| !Arc::ptr_eq(each, &pending))
                .cloned()
                .collect(),
        };
        let served = route.is_some();
        let mut table = settled(route);
        if served && let Err(error) = table.check_clashes() {
            tracing::warn!("the upstream {name:?} answers now, but is not served: {error}");
            table = settled(None);
        } else if served {
            let tools = table.routes.last().map_or(0, |route| {
                let listed = route.link.cached_tools();
                listed
                    .list
                    .iter()
                    .filter(|tool| route.rules.serves(&tool.name))
                    .count()
            });
            // At the level of the line that said it was missing.
            tracing::warn!("the upstream {name:?} answers now: its tools ({tools}) are served");
        }
        let changed = table.routes.len() != old.routes.len();
        *self
            .table
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(table);
        if changed {
            self.version.send_modify(|version| *version += 1);
        }
    }

    /// The retired route the retry of the parked call `id`, named `exposed`,
    /// goes to (its caller and tool are checked when it resumes).
    pub(crate) fn retired_holding(&self, exposed: &str, id: &str) -> Option<(Arc<Route>, String)> {
        let retired = self.retired();
        retired.iter().rev().find_map(|(separator, route)| {
            let route = route.upgrade()?;
            let tool = route.tool_of(separator, exposed)?.to_owned();
            route.parked.holds(id).then_some((route, tool))
        })
    }

    fn retired(&self) -> std::sync::MutexGuard<'_, Vec<(String, Weak<Route>)>> {
        self.retired
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The table served now.
    pub(crate) fn current(&self) -> Arc<Table> {
        self.table
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Serves `config` from now on, or nothing changes: an upstream whose
    /// configuration is unchanged keeps its route, a new or changed one is
    /// started (one that cannot start refuses the reload, naming it), a
    /// removed or replaced one takes no new call and closes when its
    /// running calls end. Clients are told the tool list changed.
    pub(crate) async fn reload(&self, config: GatewayConfig) -> Result<ReloadReport, Error> {
        config.check()?;
        let _one = self.reloading.lock().await;
        let old = self.current();
        let mut report = ReloadReport::default();
        let mut routes = Vec::new();
        let mut pending = Vec::new();
        for upstream in config.upstreams {
            // Still waited for, as it was: it goes on being tried.
            if let Some(waiting) = old
                .pending
                .iter()
                .find(|waiting| waiting.config == upstream)
            {
                report.unchanged.push(upstream.name.clone());
                pending.push(waiting.clone());
                continue;
            }
            let kept = old
                .routes
                .iter()
                .find(|route| route.config.name == upstream.name);
            let was_pending = old
                .pending
                .iter()
                .any(|waiting| waiting.config.name == upstream.name);
            match kept {
                Some(route) if route.config == upstream => {
                    report.unchanged.push(upstream.name.clone());
                    routes.push(route.clone());
                }
                _ => {
                    let name = upstream.name.clone();
                    let route = Route::start(upstream, &self.version)
                        .await
                        .map_err(|source| Error::upstream(&name, source))?;
                    if kept.is_some() || was_pending {
                        report.replaced.push(name);
                    } else {
                        report.added.push(name);
                    }
                    routes.push(route);
                }
            }
        }
        report.removed = old
            .routes
            .iter()
            .map(|route| route.name())
            .chain(
                old.pending
                    .iter()
                    .map(|waiting| waiting.config.name.as_str()),
            )
            .filter(|name| {
                !routes.iter().any(|kept| kept.name() == *name)
                    && !pending.iter().any(|kept| kept.config.name == *name)
            })
            .map(str::to_owned)
            .collect();
        let table = Table {
            separator: config.separator,
            routes,
            pending,
        };
        table.check_clashes()?;
        let changed = table.separator != old.separator
            || !(report.added.is_empty()
                && report.removed.is_empty()
                && report.replaced.is_empty());
        let retiring: Vec<Arc<Route>> = old
            .routes
            .iter()
            .filter(|route| !table.routes.iter().any(|kept| Arc::ptr_eq(kept, route)))
            .filter(|route| !route.parked.is_empty())
            .cloned()
            .collect();
        *self
            .table
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(table);
        if !retiring.is_empty() {
            let mut retired = self.retired();
            retired.retain(|(_, route)| route.strong_count() > 0);
            for route in &retiring {
                retired.push((old.separator.clone(), Arc::downgrade(route)));
            }
            // A parked call waits at most its input timeout.
            tokio::spawn(async move {
                while retiring.iter().any(|route| !route.parked.is_empty()) {
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
            });
        }
        if changed {
            self.version.send_modify(|version| *version += 1);
        }
        tracing::info!(
            added = ?report.added,
            removed = ?report.removed,
            replaced = ?report.replaced,
            "the gateway's upstreams were reloaded"
        );
        Ok(report)
    }
}
