//! `serve`'s graceful stop: SIGTERM or Ctrl-C drains the runtime
//! ([`TaskRuntime::drain`]) while the server keeps answering, then the
//! serving ends; a second signal ends at once. One line on stderr when the
//! drain starts and one with its report when it ends (counts only: task
//! ids are bearer tokens).

use std::time::Duration;

use mcp_tasks::server::operator::Draining;
use mcp_tasks::server::{DrainReport, TaskRuntime};

/// The stop signals, listened to from the start of serving, so that a
/// signal that comes early drains too.
pub(crate) struct StopSignals {
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
}

impl StopSignals {
    pub(crate) fn listen() -> anyhow::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Self {
                terminate: signal(SignalKind::terminate())?,
                interrupt: signal(SignalKind::interrupt())?,
            })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    /// The next stop signal's name.
    async fn next(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.terminate.recv() => "SIGTERM",
                _ = self.interrupt.recv() => "Ctrl-C",
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "Ctrl-C"
        }
    }
}

/// Waits for a stop signal, then drains `runtime` for at most `timeout`
/// (`/readyz` says draining from the signal on, through `draining`); a
/// second signal during the drain ends the process at once.
pub(crate) async fn drain_on_signal(
    mut signals: StopSignals,
    runtime: &TaskRuntime,
    draining: Option<Draining>,
    timeout: Duration,
) -> DrainReport {
    let signal = signals.next().await;
    if let Some(draining) = &draining {
        draining.start();
    }
    eprintln!(
        "{signal}: draining: no new tasks; waiting up to {} s for the running ones (again to stop \
         at once)",
        timeout.as_secs()
    );
    let report = tokio::select! {
        report = runtime.drain(timeout) => report,
        signal = signals.next() => {
            eprintln!("{signal} again: stopping at once, without waiting for the running tasks");
            std::process::exit(1);
        }
    };
    eprintln!("{}", summary(&report));
    report
}

/// The line that ends a drain.
fn summary(report: &DrainReport) -> String {
    let waited = report.waited.as_secs_f64();
    let mut line = format!(
        "drained after {waited:.1} s: {} tasks finished, {} suspended (they continue at the next \
         start), {} handed off to other replicas, {} failed",
        report.finished, report.suspended, report.handed_off, report.failed
    );
    if report.unsettled > 0 {
        line.push_str(&format!(
            ", {} not recorded (the store could not be written)",
            report.unsettled
        ));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_counts_each_way_and_names_no_task() {
        let mut report = DrainReport::default();
        report.waited = Duration::from_millis(2500);
        report.finished = 3;
        report.failed = 1;
        assert_eq!(
            summary(&report),
            "drained after 2.5 s: 3 tasks finished, 0 suspended (they continue at the next start), \
             0 handed off to other replicas, 1 failed"
        );
        report.unsettled = 2;
        assert!(summary(&report).ends_with(", 2 not recorded (the store could not be written)"));
    }
}
