//! What an operator reads from a Redis store: every caller's tasks (from
//! the index `P all`, a page at a time) and the task hash key: one string under the key prefix,
//! written once with `SET NX` by whichever process asks first, so every
//! replica (and `mcp-tasks admin --store`) reads the same key and names a
//! task by the same hash.

use mcp_tasks::TaskId;
use mcp_tasks::store::{HashKey, StoreError, TaskRecord};

use crate::{RedisStore, corrupt, decode, scripts};

impl RedisStore {
    /// Up to `limit` records of any owner after `after`, in id order.
    pub(crate) async fn list_every(
        &self,
        after: Option<&TaskId>,
        limit: usize,
    ) -> Result<Vec<TaskRecord>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let from = after.map_or_else(|| "-".to_owned(), |id| format!("({}", id.expose()));
        let mut connection = self.connection.clone();
        let mut invocation = scripts::LIST_ALL.key(format!("{}all", self.keys.prefix));
        invocation.arg(from).arg(limit).arg(&self.keys.prefix);
        let flat: Vec<Option<String>> = self
            .bounded(
                "Redis could not list the tasks",
                invocation.invoke_async(&mut connection),
            )
            .await?;
        flat.chunks_exact(3)
            .map(|found| match found {
                [Some(id), Some(version), Some(json)] => {
                    decode(&TaskId::new(id.as_str()), version, json)
                }
                _ => Err(corrupt("a record without its version, or the reverse")),
            })
            .collect()
    }

    /// The key: made and written if there is none yet, then read.
    pub(crate) async fn read_hash_key(&self) -> Result<HashKey, StoreError> {
        let key = format!("{}hash_key", self.keys.prefix);
        let mut connection = self.connection.clone();
        let mut set = redis::cmd("SET");
        set.arg(&key).arg(HashKey::random()?.to_hex()).arg("NX");
        let _: Option<String> = self
            .bounded(
                "Redis could not write the task hash key",
                set.query_async(&mut connection),
            )
            .await?;
        let hex: Option<String> = self
            .bounded(
                "Redis could not read the task hash key",
                redis::cmd("GET").arg(&key).query_async(&mut connection),
            )
            .await?;
        HashKey::from_hex(
            &hex.ok_or_else(|| StoreError::msg("the task hash key vanished from Redis"))?,
        )
    }
}
