//! Admission control: what the server takes on, and when.
//!
//! Beside the runtime, not inside it: the runtime asks before it creates a
//! task and hands back what it took when the task ends.
//!
//! * [`caller`]: who a call comes from, for its caps and rates.
//! * [`rate`]: how fast one caller may create tasks.
//! * [`refusal`]: the one shape of every refusal for load (a JSON-RPC error
//!   with a retry hint in `data`; over HTTP, status 503 and `Retry-After`).

pub(crate) mod caller;
pub(crate) mod rate;
#[allow(dead_code)] // used by the bounds to come
pub(crate) mod refusal;
