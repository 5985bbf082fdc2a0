//! The store's task hash key in Redis: one string under the key prefix,
//! written once with `SET NX` by whichever process asks first, so every
//! replica (and `mcp-tasks admin --store`) reads the same key and names a
//! task by the same hash.

use mcp_tasks::store::{HashKey, StoreError};

use crate::RedisStore;

impl RedisStore {
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
