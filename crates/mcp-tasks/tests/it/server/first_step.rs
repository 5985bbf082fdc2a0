//! A tool's first step runs before its task is stored: a tool that returns
//! from it is stored finished in one write; one that touches its task in
//! that step (a status message, an input request) waits for the record.
//! With an idempotency key it runs once the record holds the key, still
//! before the answer.
//! Counted through a store that counts the writes the runtime makes.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use mcp_tasks::IdempotencyKey;
use mcp_tasks::store::{
    Keyed, MemoryStore, PackedRecord, Principal, StoreError, Swap, TaskRecord, TaskStore,
    Transition,
};
use mcp_tasks::{CallOptions, TaskId, TaskOutcome, TaskStatus, UnixMillis};
use serde_json::json;
use tokio::sync::broadcast;

use crate::support::runtime_server::runtime_on;
use crate::support::{RuntimeServer, completed_text, in_process, options, task_of};

/// The writes a [`Counting`] store saw.
#[derive(Default)]
struct Writes {
    creates: AtomicUsize,
    swaps: AtomicUsize,
}

impl Writes {
    fn read(&self) -> (usize, usize) {
        (
            self.creates.load(Ordering::SeqCst),
            self.swaps.load(Ordering::SeqCst),
        )
    }
}

/// A memory store that counts creates and swaps.
struct Counting {
    inner: MemoryStore,
    writes: Arc<Writes>,
}

impl TaskStore for Counting {
    async fn create(&self, record: TaskRecord) -> Result<(), StoreError> {
        self.writes.creates.fetch_add(1, Ordering::SeqCst);
        self.inner.create(record).await
    }

    async fn create_keyed(&self, record: TaskRecord) -> Result<Keyed, StoreError> {
        self.writes.creates.fetch_add(1, Ordering::SeqCst);
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
        self.inner.find_keyed(owner, key).await
    }

    async fn get(&self, id: &TaskId) -> Result<Option<TaskRecord>, StoreError> {
        self.inner.get(id).await
    }

    async fn compare_and_swap(&self, transition: Transition) -> Result<Swap, StoreError> {
        self.writes.swaps.fetch_add(1, Ordering::SeqCst);
        self.inner.compare_and_swap(transition).await
    }

    async fn delete(&self, id: &TaskId) -> Result<(), StoreError> {
        self.inner.delete(id).await
    }

    async fn expired(&self, now: UnixMillis, limit: usize) -> Result<Vec<TaskId>, StoreError> {
        self.inner.expired(now, limit).await
    }

    async fn list_owned(
        &self,
        owner: &Principal,
        after: Option<&TaskId>,
        limit: usize,
    ) -> Result<Vec<TaskRecord>, StoreError> {
        self.inner.list_owned(owner, after, limit).await
    }

    fn changes(&self) -> broadcast::Receiver<TaskId> {
        self.inner.changes()
    }

    async fn get_packed(&self, id: &TaskId) -> Result<Option<Arc<PackedRecord>>, StoreError> {
        self.inner.get_packed(id).await
    }
}

fn counting_server() -> (RuntimeServer, Arc<Writes>) {
    let writes = Arc::new(Writes::default());
    let store = Counting {
        inner: MemoryStore::new(),
        writes: writes.clone(),
    };
    (RuntimeServer::new(runtime_on(store).build()), writes)
}

#[tokio::test]
async fn a_tool_that_returns_at_once_is_stored_finished_in_one_write() {
    let (server, writes) = counting_server();
    let client = in_process(server).await;
    let state = unkeyed(&client, "required_job", json!({})).await;
    // Still a task (the caller asked for one), already completed.
    assert_eq!(state.status, TaskStatus::Completed);
    assert_eq!(writes.read(), (1, 0), "one create, no swap");
    let read = client.get(&state.id).await.unwrap();
    assert_eq!(read.status, TaskStatus::Completed);
    let outcome = client.await_task(&state, &options()).await.unwrap();
    assert_eq!(completed_text(&outcome), "required done");

    // A panic in that first step fails the task, stored so at once.
    let state = unkeyed(&client, "panics", json!({})).await;
    assert_eq!(state.status, TaskStatus::Failed);
    assert_eq!(writes.read(), (2, 0));
    let TaskOutcome::Failed(failure) = client.await_task(&state, &options()).await.unwrap() else {
        panic!("a panic fails the task")
    };
    assert_eq!(failure.error.code, -32603);

    // An isError result is completed, like any other result.
    let state = unkeyed(&client, "is_error", json!({})).await;
    assert_eq!(state.status, TaskStatus::Completed);
    assert_eq!(writes.read(), (3, 0));

    // With an idempotency key (as our client sends by default) the tool
    // runs only once its record holds the key: two writes, both made
    // before the answer, which says the task completed.
    let state = task_of(&client, "required_job", json!({})).await;
    assert_eq!(
        state.status,
        TaskStatus::Completed,
        "its first step ran before the answer"
    );
    assert_eq!(writes.read(), (4, 1), "a create, then a swap");
    let outcome = client.await_task(&state, &options()).await.unwrap();
    assert_eq!(completed_text(&outcome), "required done");
    let state = task_of(&client, "panics", json!({})).await;
    assert_eq!(state.status, TaskStatus::Failed);
    assert_eq!(writes.read(), (5, 2));
}

/// A call without an idempotency key: the path of one write.
async fn unkeyed(
    client: &mcp_tasks::TasksClient<crate::support::Handler>,
    tool: &str,
    arguments: serde_json::Value,
) -> mcp_tasks::TaskState {
    let options = CallOptions::default().with_idempotent(false);
    match client
        .call_tool(tool, crate::support::args(arguments), options)
        .await
        .expect("call")
    {
        mcp_tasks::CallResponse::Task(state) => state,
        other => panic!("{tool} should be a task: {other:?}"),
    }
}

#[tokio::test]
async fn a_first_step_that_touches_its_task_waits_for_the_record() {
    let (server, writes) = counting_server();
    let client = in_process(server).await;
    // `slow` sets its status message before anything else: the message
    // waits for the record, then lands on it (not an error, not lost).
    let state = task_of(&client, "slow", json!({"ms": 300})).await;
    assert_eq!(state.status, TaskStatus::Working);
    let mut read = client.get(&state.id).await.unwrap();
    while read.status_message.is_none() {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        read = client.get(&state.id).await.unwrap();
    }
    assert_eq!(read.status_message.as_deref(), Some("halfway"));
    let outcome = client.await_task(&state, &options()).await.unwrap();
    assert_eq!(completed_text(&outcome), "slept 300 ms");
    let (creates, swaps) = writes.read();
    assert_eq!(creates, 1);
    assert!(swaps >= 2, "the message and the outcome: {swaps}");

    // `ask` asks for input in its first step: asked once the task exists.
    let outcome = client
        .call_and_await("ask", (), CallOptions::default(), &options())
        .await
        .unwrap();
    assert_eq!(completed_text(&outcome), "Hello, Ada!");
}
