//! The last hour of the task and store metrics, for the page's charts: a
//! reading of `/metrics` every [`SAMPLE_EVERY`], [`KEPT`] of them, taken by
//! a task of its own while the page's routes exist ([`History::start`]).
//! A chart's minute is the difference of two readings; the minute going on
//! is the last reading's difference with the one taken for the request.
//!
//! Percentiles come from the histogram's buckets as Prometheus's
//! `histogram_quantile` computes them: the bucket the rank falls in, linear
//! inside it; a rank in the last (`+Inf`) bucket reads as its lower bound.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use super::expo::Samples;
use crate::telemetry::metrics::{
    STORE_DURATION, STORE_ERRORS, TASK_DURATION, TASKS_CREATED, TASKS_ENDED,
};

/// How often the metrics are read for the charts.
pub(crate) const SAMPLE_EVERY: Duration = Duration::from_secs(60);

/// How many readings are kept: an hour of minutes, and its start.
pub(crate) const KEPT: usize = 61;

/// What renders the metrics as `/metrics` does (its gauges read first).
pub(crate) type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// The readings of the last hour.
pub(crate) struct History {
    render: Render,
    readings: Mutex<VecDeque<Reading>>,
}

/// One reading: when (Unix milliseconds) and what.
#[derive(Clone)]
pub(crate) struct Reading {
    pub(crate) at: u64,
    pub(crate) samples: Arc<Samples>,
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("History").finish_non_exhaustive()
    }
}

impl History {
    /// A history read through `render`, empty.
    pub(crate) fn new(render: Render) -> Arc<Self> {
        Arc::new(Self {
            render,
            readings: Mutex::new(VecDeque::with_capacity(KEPT)),
        })
    }

    /// Reads the metrics every [`SAMPLE_EVERY`] from now on, in a task of
    /// the current tokio runtime (none outside one: the charts then show
    /// the minute going on only), until the history is dropped.
    pub(crate) fn start(self: &Arc<Self>) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let history: Weak<Self> = Arc::downgrade(self);
        handle.spawn(async move {
            let mut ticks = tokio::time::interval(SAMPLE_EVERY);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let Some(history) = history.upgrade() else {
                    return;
                };
                history.keep(&history.read_now());
            }
        });
    }

    /// The metrics now (every family, for the request's numbers).
    pub(crate) fn read_now(&self) -> Reading {
        Reading {
            at: now_millis(),
            samples: Arc::new(Samples::parse(&(self.render)(), |_| true)),
        }
    }

    /// Keeps `reading` (the families the charts use), dropping the oldest
    /// past [`KEPT`].
    fn keep(&self, reading: &Reading) {
        let kept = Samples(
            reading
                .samples
                .0
                .iter()
                .filter(|sample| charted(&sample.name))
                .cloned()
                .collect(),
        );
        let mut readings = self.readings.lock().unwrap_or_else(|p| p.into_inner());
        if readings.len() == KEPT {
            readings.pop_front();
        }
        readings.push_back(Reading {
            at: reading.at,
            samples: Arc::new(kept),
        });
    }

    /// The readings kept, oldest first.
    pub(crate) fn readings(&self) -> Vec<Reading> {
        let readings = self.readings.lock().unwrap_or_else(|p| p.into_inner());
        readings.iter().cloned().collect()
    }
}

/// Whether the charts use the family `name`.
fn charted(name: &str) -> bool {
    name == TASKS_CREATED
        || name == TASKS_ENDED
        || name == STORE_ERRORS
        || name.strip_prefix(TASK_DURATION) == Some("_bucket")
        || name.strip_prefix(STORE_DURATION) == Some("_bucket")
}

fn now_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

/// The buckets of the histogram `name` (its `_bucket` series) whose other
/// labels are `labels`, as (upper bound, count) in order of bounds.
pub(crate) fn buckets(samples: &Samples, name: &str, labels: &[(&str, &str)]) -> Vec<(f64, f64)> {
    let series = format!("{name}_bucket");
    let mut found: Vec<(f64, f64)> = samples
        .of(&series)
        .filter(|sample| {
            sample.labels.len() == labels.len() + 1
                && labels
                    .iter()
                    .all(|(key, value)| sample.label(key) == Some(value))
        })
        .filter_map(|sample| Some((sample.bound()?, sample.value)))
        .collect();
    found.sort_by(|a, b| a.0.total_cmp(&b.0));
    found
}

/// `later` minus `earlier`, bucket by bucket (a bucket `earlier` lacks
/// counts from zero).
pub(crate) fn since(later: &[(f64, f64)], earlier: &[(f64, f64)]) -> Vec<(f64, f64)> {
    later
        .iter()
        .map(|&(bound, count)| {
            let before = earlier
                .iter()
                .find(|(other, _)| *other == bound)
                .map_or(0.0, |(_, count)| *count);
            (bound, (count - before).max(0.0))
        })
        .collect()
}

/// The `q` quantile (0 to 1) of cumulative `buckets`, `None` when empty.
pub(crate) fn quantile(q: f64, buckets: &[(f64, f64)]) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut lower = (0.0, 0.0);
    for &(bound, count) in buckets {
        if count >= rank {
            if bound.is_infinite() {
                return Some(lower.0);
            }
            let width = count - lower.1;
            let inside = if width > 0.0 {
                (rank - lower.1) / width
            } else {
                1.0
            };
            return Some(lower.0 + (bound - lower.0) * inside);
        }
        lower = (bound, count);
    }
    Some(lower.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_inside_the_bucket_as_prometheus_does() {
        // 10 under 0.1 s, 10 more under 1 s, 0 beyond.
        let buckets = [(0.1, 10.0), (1.0, 20.0), (f64::INFINITY, 20.0)];
        assert_eq!(quantile(0.5, &buckets), Some(0.1));
        let p75 = quantile(0.75, &buckets).unwrap();
        assert!((p75 - 0.55).abs() < 1e-9, "{p75}");
        assert_eq!(quantile(0.5, &[(0.1, 0.0), (f64::INFINITY, 0.0)]), None);
        assert_eq!(
            quantile(0.99, &[(5.0, 1.0), (f64::INFINITY, 4.0)]),
            Some(5.0)
        );
        assert_eq!(quantile(0.5, &[]), None);
    }

    #[test]
    fn buckets_are_read_per_series_and_subtracted() {
        let earlier = Samples::parse(
            "d_bucket{tool=\"a\",le=\"1\"} 1\nd_bucket{tool=\"a\",le=\"+Inf\"} 2\n",
            |_| true,
        );
        let later = Samples::parse(
            "d_bucket{tool=\"a\",le=\"+Inf\"} 7\nd_bucket{tool=\"a\",le=\"1\"} 4\n\
             d_bucket{tool=\"b\",le=\"1\"} 9\n",
            |_| true,
        );
        let a = buckets(&later, "d", &[("tool", "a")]);
        assert_eq!(a, vec![(1.0, 4.0), (f64::INFINITY, 7.0)]);
        let minute = since(&a, &buckets(&earlier, "d", &[("tool", "a")]));
        assert_eq!(minute, vec![(1.0, 3.0), (f64::INFINITY, 5.0)]);
    }

    #[test]
    fn the_history_keeps_an_hour_of_the_charted_families() {
        let history = History::new(Arc::new(|| {
            "mcp_tasks_tasks_created_total{tool=\"a\"} 1\nmcp_tasks_tasks_live{status=\"working\"} 1\n"
                .to_owned()
        }));
        for _ in 0..KEPT + 5 {
            let reading = history.read_now();
            assert_eq!(reading.samples.0.len(), 2);
            history.keep(&reading);
        }
        let readings = history.readings();
        assert_eq!(readings.len(), KEPT);
        assert_eq!(
            readings[0].samples.0.len(),
            1,
            "only the charted families are kept"
        );
    }
}
