//! Admission control: what the server takes on, and when.
//!
//! Beside the runtime, not inside it: the runtime asks before it creates a
//! task and hands back what it took when the task ends.
//!
//! * [`caller`]: who a call comes from, for its caps and rates.
//! * [`queue`]: the bounds on running and waiting tasks, and the fair queue.
//! * [`shared`]: the same bounds across replicas, in a shared store's seats,
//!   and the fair turns there when the store keeps them.
//! * [`rate`]: how fast one caller may create tasks (in the shared store,
//!   for all replicas, when it counts rates).
//! * [`refusal`]: the one shape of every refusal for load (a JSON-RPC error
//!   with a retry hint in `data`; over HTTP, status 503 and `Retry-After`).

pub(crate) mod caller;
pub(crate) mod limits;
pub(crate) mod queue;
pub(crate) mod rate;
pub(crate) mod refusal;
pub(crate) mod shared;
