//! How fast one caller may create tasks: [`CreationRate`], and the keyed
//! limiter the runtime checks at each creation ([`RateLimits`]).
//!
//! On a store kept by one process (memory, SQLite), and on a shared store
//! that does not [count rates](crate::store::Replicas::supports_rate), the
//! limiter is `governor`'s (GCRA, keyed by the caller's quota principal),
//! read on tokio's clock so tests run it under a paused clock: it is this
//! process's, each replica counting the creations it answers.
//!
//! On a shared store that counts rates (Redis, PostgreSQL), the same GCRA runs in the
//! store, on the store's clock, in a bucket per caller
//! ([`Replicas::take_rate`](crate::store::Replicas::take_rate)): the rate
//! holds for all replicas together, at the cost of one round trip to the
//! store per creation (none when no rate is set). A refusal has the same
//! shape, its retry hint the store's. When the store cannot be reached the
//! creation fails with the store's error (-32603, "the task store cannot be
//! reached"), as it would have at its write: neither counted here instead
//! nor let through uncounted.

use std::fmt;
use std::num::NonZeroU32;
use std::str::FromStr;
use std::sync::{Arc, Weak};
use std::time::Duration;

use governor::clock::Clock as _;
use governor::state::keyed::HashMapStateStore;
use governor::{Quota, RateLimiter};
use serde_json::{Map, json};

use super::caller::Caller;
use super::refusal::{Denial, Reason, Refusal};
use crate::server::auth::principal::Principal;
use crate::server::engine::wire::store_failure;
use crate::store::{RateBucket, RateTake, SharedStore};

/// How fast one caller may create tasks: `count` per second, minute or
/// hour, with bursts of up to `burst` at once (default: `count`). Reads
/// and writes as `10/s`, `600/min` or `100/h`.
///
/// ```
/// use std::num::NonZeroU32;
/// use mcp_tasks::server::CreationRate;
///
/// let rate: CreationRate = "10/s".parse().unwrap();
/// let rate = rate.with_burst(NonZeroU32::new(20).unwrap());
/// assert_eq!(rate.to_string(), "10/s");
/// assert_eq!(rate.burst().get(), 20);
/// assert!("10".parse::<CreationRate>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreationRate {
    count: NonZeroU32,
    per: Per,
    burst: NonZeroU32,
}

/// The period of a [`CreationRate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Per {
    Second,
    Minute,
    Hour,
}

impl Per {
    fn unit(self) -> &'static str {
        match self {
            Per::Second => "s",
            Per::Minute => "min",
            Per::Hour => "h",
        }
    }

    fn duration(self) -> Duration {
        match self {
            Per::Second => Duration::from_secs(1),
            Per::Minute => Duration::from_secs(60),
            Per::Hour => Duration::from_secs(3600),
        }
    }
}

impl CreationRate {
    /// `count` creations a second, in bursts of up to `count`.
    pub fn per_second(count: NonZeroU32) -> Self {
        Self::new(count, Per::Second)
    }

    /// `count` creations a minute, in bursts of up to `count`.
    pub fn per_minute(count: NonZeroU32) -> Self {
        Self::new(count, Per::Minute)
    }

    /// `count` creations an hour, in bursts of up to `count`.
    pub fn per_hour(count: NonZeroU32) -> Self {
        Self::new(count, Per::Hour)
    }

    fn new(count: NonZeroU32, per: Per) -> Self {
        Self {
            count,
            per,
            burst: count,
        }
    }

    /// How many creations a caller that has been quiet may make at once
    /// (default: the rate's count). Past the burst, one creation is allowed
    /// every period / count.
    pub fn with_burst(mut self, burst: NonZeroU32) -> Self {
        self.burst = burst;
        self
    }

    /// How many creations a period allows.
    pub fn count(&self) -> NonZeroU32 {
        self.count
    }

    /// The period: a second, a minute or an hour.
    pub fn period(&self) -> Duration {
        self.per.duration()
    }

    /// How many creations a quiet caller may make at once.
    pub fn burst(&self) -> NonZeroU32 {
        self.burst
    }

    /// The time between two creations past the burst: the period / count.
    fn emission_interval(&self) -> Duration {
        self.per.duration() / self.count.get()
    }

    fn quota(&self) -> Quota {
        let quota = match self.per {
            Per::Second => Quota::per_second(self.count),
            Per::Minute => Quota::per_minute(self.count),
            Per::Hour => Quota::per_hour(self.count),
        };
        quota.allow_burst(self.burst)
    }
}

impl fmt::Display for CreationRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.count, self.per.unit())
    }
}

/// A text that is not a [`CreationRate`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidCreationRate {
    /// The text has no `/`.
    #[error("{0:?} is not a rate: write N/s, N/min or N/h, such as 10/s")]
    NoUnit(String),
    /// The count is not a whole number from 1 to 4294967295.
    #[error("the count {0:?} is not a whole number from 1 to 4294967295")]
    Count(String),
    /// The unit is not `s`, `min` or `h`.
    #[error("unknown unit {0:?}: use s, min or h (as in 10/s)")]
    Unit(String),
}

impl FromStr for CreationRate {
    type Err = InvalidCreationRate;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let Some((count, unit)) = text.trim().split_once('/') else {
            return Err(InvalidCreationRate::NoUnit(text.to_owned()));
        };
        let count = count.trim();
        let count = count
            .parse::<NonZeroU32>()
            .map_err(|_| InvalidCreationRate::Count(count.to_owned()))?;
        match unit.trim() {
            "s" => Ok(Self::per_second(count)),
            "min" => Ok(Self::per_minute(count)),
            "h" => Ok(Self::per_hour(count)),
            other => Err(InvalidCreationRate::Unit(other.to_owned())),
        }
    }
}

/// How often idle callers' states are dropped from the limiter.
const PRUNE_INTERVAL: Duration = Duration::from_secs(30);

/// `governor`'s clock on tokio's: the time since the limiter was made,
/// which a paused tokio clock (tests) moves only when told.
#[derive(Debug, Clone)]
struct TokioElapsed(tokio::time::Instant);

impl governor::clock::Clock for TokioElapsed {
    type Instant = Duration;

    fn now(&self) -> Duration {
        self.0.elapsed()
    }
}

/// The creation rate of every caller, keyed by its quota principal.
pub(crate) struct RateLimits {
    rate: CreationRate,
    /// Whether the store counts the rate for all replicas (the limiter
    /// below then stays empty).
    in_store: bool,
    limiter: RateLimiter<
        Principal,
        HashMapStateStore<Principal>,
        TokioElapsed,
        governor::middleware::NoOpMiddleware<Duration>,
    >,
}

impl fmt::Debug for RateLimits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimits")
            .field("rate", &self.rate)
            .field("in_store", &self.in_store)
            .field("callers", &self.limiter.len())
            .finish()
    }
}

impl RateLimits {
    /// Limits at `rate`, starting now on tokio's clock; counted by the
    /// store when `in_store`.
    pub(crate) fn new(rate: CreationRate, in_store: bool) -> Self {
        let clock = TokioElapsed(tokio::time::Instant::now());
        Self {
            rate,
            in_store,
            limiter: RateLimiter::hashmap_with_clock(rate.quota(), clock),
        }
    }

    /// Counts one creation for `caller`, in `store` when it counts rates
    /// for all replicas, else here; the refusal for load
    /// ([`Reason::RateLimited`]) when it creates too fast, or the store's
    /// failure.
    pub(crate) async fn check_in(
        &self,
        store: &SharedStore,
        caller: &Caller,
    ) -> Result<(), Denial> {
        let Some(replicas) = store.replicas().filter(|_| self.in_store) else {
            return Ok(self.check(caller)?);
        };
        let bucket = RateBucket::caller(&caller.quota);
        let interval = self.rate.emission_interval();
        match replicas
            .take_rate(&bucket, interval, self.rate.burst.get())
            .await
            .map_err(store_failure)?
        {
            RateTake::Allowed => Ok(()),
            RateTake::Limited { retry_after } => Err(self.refused(retry_after).into()),
        }
    }

    /// Counts one creation for `caller` in this process; the refusal for
    /// load ([`Reason::RateLimited`]) when it creates too fast.
    pub(crate) fn check(&self, caller: &Caller) -> Result<(), Refusal> {
        let Err(not_until) = self.limiter.check_key(&caller.quota) else {
            return Ok(());
        };
        Err(self.refused(not_until.wait_time_from(self.limiter.clock().now())))
    }

    /// The refusal of a creation that may come again after `wait`.
    fn refused(&self, wait: Duration) -> Refusal {
        // Whole milliseconds, rounded up: a retry after the hint is served.
        let retry_after = Duration::from_millis(
            u64::try_from(wait.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX),
        );
        let mut extra = Map::new();
        extra.insert("ratePerCaller".into(), json!(self.rate.to_string()));
        extra.insert("rateBurst".into(), json!(self.rate.burst.get()));
        Refusal::new(
            Reason::RateLimited,
            format!(
                "this caller creates tasks faster than {} (bursts of {}): try again in {} ms",
                self.rate,
                self.rate.burst,
                retry_after.as_millis()
            ),
            retry_after,
            extra,
        )
    }

    /// Drops the state of callers that have been quiet long enough to be
    /// back at their full burst, every [`PRUNE_INTERVAL`], until the
    /// runtime is dropped: the limiter holds the callers of the last
    /// moments only, however many came before.
    pub(crate) async fn prune(limits: Weak<RateLimits>) {
        let mut interval = tokio::time::interval(PRUNE_INTERVAL);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        interval.tick().await;
        loop {
            interval.tick().await;
            let Some(limits) = limits.upgrade() else {
                return;
            };
            limits.limiter.retain_recent();
            limits.limiter.shrink_to_fit();
        }
    }

    /// How many callers the limiter holds a state for.
    #[cfg(test)]
    fn callers(&self) -> usize {
        self.limiter.len()
    }
}

/// The limits of `rate` on `store`: counted by the store when it counts
/// rates for all replicas, else here, with their pruner running.
pub(crate) fn start(rate: CreationRate, store: &SharedStore) -> Arc<RateLimits> {
    let in_store = store
        .replicas()
        .is_some_and(|replicas| replicas.supports_rate());
    let limits = Arc::new(RateLimits::new(rate, in_store));
    if !in_store {
        tokio::spawn(RateLimits::prune(Arc::downgrade(&limits)));
    }
    limits
}

#[cfg(test)]
mod tests {
    use rmcp::model::Extensions;

    use super::*;

    fn caller(name: &str) -> Caller {
        Caller::new(
            Principal::new(name),
            Principal::new(name),
            &Extensions::new(),
        )
    }

    fn nonzero(n: u32) -> NonZeroU32 {
        NonZeroU32::new(n).unwrap()
    }

    #[test]
    fn a_rate_reads_and_writes_as_count_per_unit() {
        for (text, rate) in [
            ("10/s", CreationRate::per_second(nonzero(10))),
            (" 600 / min ", CreationRate::per_minute(nonzero(600))),
            ("1/h", CreationRate::per_hour(nonzero(1))),
        ] {
            assert_eq!(text.parse::<CreationRate>(), Ok(rate));
            assert_eq!(rate.to_string().parse::<CreationRate>(), Ok(rate));
        }
        assert_eq!(CreationRate::per_minute(nonzero(5)).to_string(), "5/min");
        let error = |text: &str| text.parse::<CreationRate>().unwrap_err().to_string();
        assert!(
            error("10").contains("write N/s, N/min or N/h"),
            "{}",
            error("10")
        );
        assert!(error("0/s").contains("from 1 to"), "{}", error("0/s"));
        assert!(error("-1/s").contains("from 1 to"), "{}", error("-1/s"));
        assert!(error("1.5/s").contains("from 1 to"), "{}", error("1.5/s"));
        assert!(
            error("10/day").contains("use s, min or h"),
            "{}",
            error("10/day")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_caller_past_its_burst_waits_one_interval_and_others_are_served() {
        let limits = RateLimits::new(
            CreationRate::per_second(nonzero(4)).with_burst(nonzero(2)),
            false,
        );
        let (alice, bob) = (caller("alice"), caller("bob"));
        limits.check(&alice).unwrap();
        limits.check(&alice).unwrap();
        let refused = limits.check(&alice).unwrap_err().into_error(None);
        assert_eq!(refused.code.0, -32603);
        assert_eq!(
            refused.data,
            Some(json!({"reason": "rateLimited", "retryAfterMs": 250,
                "ratePerCaller": "4/s", "rateBurst": 2}))
        );
        assert!(
            refused.message.contains("faster than 4/s"),
            "{}",
            refused.message
        );
        limits
            .check(&bob)
            .expect("another caller has its own burst");
        tokio::time::advance(Duration::from_millis(249)).await;
        let refused = limits.check(&alice).unwrap_err().into_error(None);
        assert_eq!(refused.data.unwrap()["retryAfterMs"], 1);
        tokio::time::advance(Duration::from_millis(1)).await;
        limits
            .check(&alice)
            .expect("served once the hint has passed");
        assert!(
            limits.check(&alice).is_err(),
            "one per interval past the burst"
        );
    }

    #[test]
    fn the_emission_interval_is_the_period_over_the_count() {
        let interval = |text: &str| text.parse::<CreationRate>().unwrap().emission_interval();
        assert_eq!(interval("4/s"), Duration::from_millis(250));
        assert_eq!(interval("600/min"), Duration::from_millis(100));
        assert_eq!(interval("3/h"), Duration::from_secs(1200));
    }

    #[tokio::test(start_paused = true)]
    async fn on_a_store_of_one_process_the_rate_is_counted_here() {
        let store: SharedStore = Arc::new(crate::store::MemoryStore::new());
        let limits = start(CreationRate::per_minute(nonzero(1)), &store);
        assert!(!limits.in_store);
        let alice = caller("alice");
        limits.check_in(&store, &alice).await.expect("the first");
        match limits.check_in(&store, &alice).await {
            Err(Denial::Refused(refusal)) => {
                assert_eq!(refusal.retry_after(), Duration::from_secs(60));
            }
            other => panic!("not refused for rate: {other:?}"),
        }
        assert_eq!(limits.callers(), 1, "counted in this process's limiter");
    }

    #[tokio::test(start_paused = true)]
    async fn quiet_callers_are_pruned() {
        let store: SharedStore = Arc::new(crate::store::MemoryStore::new());
        let limits = start(CreationRate::per_second(nonzero(1)), &store);
        for n in 0..100 {
            limits.check(&caller(&format!("caller-{n}"))).unwrap();
        }
        assert_eq!(limits.callers(), 100);
        tokio::time::sleep(PRUNE_INTERVAL + Duration::from_millis(1)).await;
        assert_eq!(limits.callers(), 0, "quiet callers are back at full burst");
    }
}
