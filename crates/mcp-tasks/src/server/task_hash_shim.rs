//! TEMPORARY stand-in for the keyed task hash of issue 27's ADMIN part
//! (`TaskHasher`, `TaskRuntime::task_hasher`), with the agreed signatures,
//! so that the task spans can name tasks by hash before that part lands.
//! Deleted when it is merged: its key is per process and not the store's.

use std::fmt;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::runtime::TaskRuntime;
use crate::store::StoreError;
use crate::task::TaskId;

/// Names a task by a keyed hash of its id.
#[derive(Clone)]
pub(crate) struct TaskHasher {
    key: Arc<[u8; 32]>,
}

impl fmt::Debug for TaskHasher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskHasher").finish_non_exhaustive()
    }
}

impl TaskHasher {
    /// The hash of `id`: `th_` and 24 hex digits.
    pub(crate) fn hash(&self, id: &TaskId) -> String {
        let mut digest = Sha256::new();
        digest.update(&*self.key);
        digest.update(id.expose().as_bytes());
        let digest = digest.finalize();
        let mut text = String::from("th_");
        for byte in &digest[..12] {
            text.push_str(&format!("{byte:02x}"));
        }
        text
    }
}

static KEY: std::sync::OnceLock<Arc<[u8; 32]>> = std::sync::OnceLock::new();

impl TaskRuntime {
    /// The runtime's task hasher.
    pub(crate) async fn task_hasher(&self) -> Result<TaskHasher, StoreError> {
        let key = KEY.get_or_init(|| {
            let mut key = [0u8; 32];
            let _ = getrandom::fill(&mut key);
            Arc::new(key)
        });
        Ok(TaskHasher { key: key.clone() })
    }
}
