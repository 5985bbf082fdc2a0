//! A store that cannot be reached for a while (Redis restarting, say): a
//! tool that waits for input rides the outage out instead of failing its
//! task when it is woken during it. Under a paused clock, through a store
//! that answers "unavailable" on demand.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mcp_tasks::IdempotencyKey;
use mcp_tasks::store::{
    Keyed, MemoryStore, PackedRecord, Principal, StoreError, StoreErrorKind, Swap, TaskRecord,
    TaskStore, Transition,
};
use mcp_tasks::{TaskId, TaskOutcome, TaskStatus, UnixMillis};
use serde_json::json;
use tokio::sync::broadcast;

use crate::support::runtime_server::runtime_on;
use crate::support::{RuntimeServer, completed_text, in_process, options, task_of};

/// A memory store whose reads and writes fail as unavailable while `down`.
struct Outage {
    inner: MemoryStore,
    down: Arc<AtomicBool>,
}

impl Outage {
    fn check(&self) -> Result<(), StoreError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(StoreError::msg("the store is down").with_kind(StoreErrorKind::Unavailable));
        }
        Ok(())
    }
}

impl TaskStore for Outage {
    async fn create(&self, record: TaskRecord) -> Result<(), StoreError> {
        self.check()?;
        self.inner.create(record).await
    }

    async fn create_keyed(&self, record: TaskRecord) -> Result<Keyed, StoreError> {
        self.check()?;
        self.inner.create_keyed(record).await
    }
    fn keeps_keys(&self) -> bool {
        self.inner.keeps_keys()
    }

    async fn find_keyed(
        &self,
        owner: &Principal,
        key: &IdempotencyKey,
    ) -> Result<Option<TaskRecord>, StoreError> {
        self.check()?;
        self.inner.find_keyed(owner, key).await
    }

    async fn get(&self, id: &TaskId) -> Result<Option<TaskRecord>, StoreError> {
        self.check()?;
        self.inner.get(id).await
    }

    async fn compare_and_swap(&self, transition: Transition) -> Result<Swap, StoreError> {
        self.check()?;
        self.inner.compare_and_swap(transition).await
    }

    async fn delete(&self, id: &TaskId) -> Result<(), StoreError> {
        self.check()?;
        self.inner.delete(id).await
    }

    async fn expired(&self, now: UnixMillis, limit: usize) -> Result<Vec<TaskId>, StoreError> {
        self.check()?;
        self.inner.expired(now, limit).await
    }

    async fn list_owned(
        &self,
        owner: &Principal,
        after: Option<&TaskId>,
        limit: usize,
    ) -> Result<Vec<TaskRecord>, StoreError> {
        self.check()?;
        self.inner.list_owned(owner, after, limit).await
    }

    fn changes(&self) -> broadcast::Receiver<TaskId> {
        self.inner.changes()
    }

    async fn get_packed(&self, id: &TaskId) -> Result<Option<Arc<PackedRecord>>, StoreError> {
        self.check()?;
        self.inner.get_packed(id).await
    }
}

#[tokio::test(start_paused = true)]
async fn a_tool_waiting_for_input_survives_a_store_outage() {
    let down = Arc::new(AtomicBool::new(false));
    let store = Outage {
        inner: MemoryStore::new(),
        down: down.clone(),
    };
    let server = RuntimeServer::new(runtime_on(store).build());
    let client = in_process(server).await;
    let state = task_of(&client, "ask", json!({})).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        client.get(&state.id).await.unwrap().status,
        TaskStatus::InputRequired
    );

    // Down for 20 s: the tool's wait wakes (every 5 s) and cannot read.
    down.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(20)).await;
    down.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = client.get(&state.id).await.unwrap();
    assert_eq!(
        after.status,
        TaskStatus::InputRequired,
        "the task outlived the outage: {:?}",
        after.status_message
    );

    // And the tool still hears its answer.
    client
        .update(
            &state.id,
            [(
                "name".to_owned(),
                json!({"action": "accept", "content": {"name": "Ada"}}),
            )]
            .into(),
        )
        .await
        .unwrap();
    let outcome = client.await_task(&after, &options()).await.unwrap();
    assert!(matches!(outcome, TaskOutcome::Completed(_)), "{outcome:?}");
    assert_eq!(completed_text(&outcome), "Hello, Ada!");
}
