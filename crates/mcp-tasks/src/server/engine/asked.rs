//! The input requests out on a caller's connection now: asked by the task
//! tools' wait (`handles/follow.rs`) and not answered yet. Each is asked
//! once, whichever wait (the window, a `tasks_wait`) sees it first, and
//! its answer answers the task whenever it comes, after that wait too: a
//! person slower than the window is not asked twice.

use std::collections::HashSet;
use std::sync::Mutex;

/// Which input requests (task id, key) are out on a connection.
#[derive(Debug, Default)]
pub(crate) struct AskedNow(Mutex<HashSet<(String, String)>>);

impl AskedNow {
    /// Marks input `key` of task `id` as asked; false when it already is.
    pub(crate) fn mark(&self, id: &str, key: &str) -> bool {
        let mut asked = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        asked.insert((id.to_owned(), key.to_owned()))
    }

    /// Input `key` of task `id` was answered, or its asking failed.
    pub(crate) fn clear(&self, id: &str, key: &str) {
        let mut asked = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        asked.remove(&(id.to_owned(), key.to_owned()));
    }
}
