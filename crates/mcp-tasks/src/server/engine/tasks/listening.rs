//! A listen stream's place among the open streams, the server's and its
//! caller's: taken by the transports before a stream's acknowledgement (a
//! task listen, or a listen rmcp serves over HTTP), given back when the
//! stream ends. The bounds are the runtime's settings; the counts are its
//! state's (`Listeners`); the streams themselves are the transports'.

use std::time::Duration;

use serde_json::{Map, json};

use super::runtime::TaskRuntime;
use crate::server::engine::admission::limits::StreamBound;
use crate::server::engine::admission::refusal::{Reason, Refusal};
use crate::store::Principal;

/// When a client refused a stream may try again (`retryAfterMs`,
/// `Retry-After`): streams end with their tasks, so seconds, not less;
/// meanwhile the client polls.
const LISTEN_RETRY_AFTER: Duration = Duration::from_secs(5);

/// A place among the open listen streams; given back when dropped.
pub(crate) struct ListenSlot {
    runtime: TaskRuntime,
    quota: Principal,
}

impl TaskRuntime {
    /// A place for a listen stream of the caller counted as `quota`, or
    /// the refusal when the caller's bound or the server's is reached.
    pub(crate) fn listen_slot(&self, quota: &Principal) -> Result<ListenSlot, Refusal> {
        let settings = &self.inner.settings;
        let entered = self.inner.listeners.enter(
            quota,
            settings.max_listen_streams,
            settings.max_listen_streams_per_caller,
        );
        if let Err(bound) = entered {
            let (field, bound, message) = match bound {
                StreamBound::PerCaller => (
                    "maxListenStreamsPerCaller",
                    settings.max_listen_streams_per_caller,
                    "this caller has as many listen streams open as it may",
                ),
                StreamBound::Total => (
                    "maxListenStreams",
                    settings.max_listen_streams,
                    "the server has as many listen streams open as it may",
                ),
            };
            tracing::debug!(bound = field, "listen stream refused");
            let mut extra = Map::new();
            extra.insert(field.into(), json!(bound));
            let message = format!("{message}; poll tasks/get instead");
            return Err(Refusal::new(
                Reason::ListenStreams,
                message,
                LISTEN_RETRY_AFTER,
                extra,
            ));
        }
        Ok(ListenSlot {
            runtime: self.clone(),
            quota: quota.clone(),
        })
    }
}

impl Drop for ListenSlot {
    fn drop(&mut self) {
        self.runtime.inner.listeners.leave(&self.quota);
    }
}
