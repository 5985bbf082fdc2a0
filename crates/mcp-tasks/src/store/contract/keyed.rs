//! The contract of idempotent creation ([`TaskStore::create_keyed`] and
//! [`TaskStore::find_keyed`]), on every store.
//!
//! [`TaskStore::create_keyed`]: crate::store::TaskStore::create_keyed
//! [`TaskStore::find_keyed`]: crate::store::TaskStore::find_keyed

use std::sync::Arc;
use std::time::Duration;

use super::{RETENTION, id, owned, replicas_of};
use crate::idempotency::IdempotencyKey;
use crate::store::{
    Change, Keyed, Principal, RunnerId, SeatId, SeatPool, Seating, SharedStore, TaskRecord,
    call_fingerprint, modify,
};
use crate::task::UnixMillis;

fn key(name: &str) -> IdempotencyKey {
    IdempotencyKey::new(name).expect("a valid key")
}

/// Record `name` of `owner`, created under `key` by a call of `tool`.
fn keyed(name: &str, owner: &str, key_name: &str, tool: &str) -> TaskRecord {
    owned(name, owner).with_idempotency(&key(key_name), call_fingerprint(tool, None))
}

async fn create(store: &SharedStore, record: TaskRecord) -> Keyed {
    store.create_keyed(record).await.expect("create_keyed")
}

/// The id of the record `owner` holds `key_name` with, if any.
async fn holder(store: &SharedStore, owner: &str, key_name: &str) -> Option<String> {
    store
        .find_keyed(&Principal::new(owner), &key(key_name))
        .await
        .expect("find_keyed")
        .map(|record| record.id().expose().to_owned())
}

/// A key finds the record its owner created with it, as it is now; the
/// same key of another owner is another record; a record without a key is
/// created as by `create`.
pub async fn keyed_creation_finds_the_same_record(store: SharedStore) {
    assert_eq!(
        create(&store, keyed("k1", "owner-a", "key-1", "t")).await,
        Keyed::Created
    );
    assert_eq!(
        holder(&store, "owner-a", "key-1").await.as_deref(),
        Some("k1")
    );
    modify(
        &*store,
        &id("k1"),
        &Change::StatusMessage("step 1".into()),
        UnixMillis::new(2),
        RETENTION,
    )
    .await
    .expect("modify");
    match create(&store, keyed("k2", "owner-a", "key-1", "t")).await {
        Keyed::Existing(found) => {
            assert_eq!(found.id(), &id("k1"), "the record holding the key");
            assert_eq!(found.status_message(), Some("step 1"), "as it is now");
            assert_eq!(
                found.call_fingerprint(),
                Some(call_fingerprint("t", None).as_str())
            );
            assert_eq!(
                found.idempotency_slot(),
                keyed("x", "owner-a", "key-1", "t").idempotency_slot()
            );
        }
        Keyed::Created => panic!("a second record was created under one key"),
    }
    assert_eq!(
        store.get(&id("k2")).await.expect("get"),
        None,
        "nothing stored"
    );
    // The same key, other arguments: the store still answers the holder
    // (the runtime tells the calls apart by the fingerprint).
    assert!(matches!(
        create(&store, keyed("k3", "owner-a", "key-1", "other tool")).await,
        Keyed::Existing(found) if found.id() == &id("k1")
    ));
    assert_eq!(
        create(&store, keyed("k4", "owner-b", "key-1", "t")).await,
        Keyed::Created
    );
    assert_eq!(
        holder(&store, "owner-b", "key-1").await.as_deref(),
        Some("k4")
    );
    assert_eq!(
        holder(&store, "owner-a", "key-1").await.as_deref(),
        Some("k1")
    );
    assert_eq!(holder(&store, "owner-a", "key-2").await, None);
    assert_eq!(create(&store, owned("k5", "owner-a")).await, Keyed::Created);
    assert!(store.get(&id("k5")).await.expect("get").is_some());
    assert!(
        store
            .create_keyed(keyed("k5", "owner-a", "key-5", "t"))
            .await
            .is_err(),
        "an existing id is an error"
    );
    assert_eq!(
        holder(&store, "owner-a", "key-5").await,
        None,
        "and holds no key"
    );
}

/// Of many creations with one key at once, exactly one stores its record.
pub async fn keyed_creations_race(store: SharedStore) {
    let mut racers = Vec::new();
    for n in 0..24 {
        let store = Arc::clone(&store);
        racers.push(tokio::spawn(async move {
            let name = format!("race-{n:02}");
            let answer = create(&store, keyed(&name, "owner-r", "one-key", "t")).await;
            (name, answer)
        }));
    }
    let mut created = Vec::new();
    let mut existing = Vec::new();
    for racer in racers {
        match racer.await.expect("join") {
            (name, Keyed::Created) => created.push(name),
            (_, Keyed::Existing(found)) => existing.push(found.id().expose().to_owned()),
        }
    }
    assert_eq!(created.len(), 1, "exactly one creation stored its record");
    assert!(
        existing.iter().all(|found| *found == created[0]),
        "the others got the winner's"
    );
    let listed = store
        .list_owned(&Principal::new("owner-r"), None, 100)
        .await
        .expect("list_owned");
    assert_eq!(listed.len(), 1, "one record stored");
    assert_eq!(
        holder(&store, "owner-r", "one-key").await,
        Some(created[0].clone())
    );
}

/// The index entry goes with its record: after a delete the key is free.
pub async fn keyed_index_goes_with_the_record(store: SharedStore) {
    assert_eq!(
        create(&store, keyed("d1", "owner-d", "key-d", "t")).await,
        Keyed::Created
    );
    store.delete(&id("d1")).await.expect("delete");
    assert_eq!(
        holder(&store, "owner-d", "key-d").await,
        None,
        "gone with its record"
    );
    assert_eq!(
        create(&store, keyed("d2", "owner-d", "key-d", "t")).await,
        Keyed::Created,
        "the key makes a new record"
    );
    assert_eq!(
        holder(&store, "owner-d", "key-d").await.as_deref(),
        Some("d2")
    );
    // Deleting a record that no longer holds a key leaves the holder be.
    store.delete(&id("d1")).await.expect("delete");
    assert_eq!(
        holder(&store, "owner-d", "key-d").await.as_deref(),
        Some("d2")
    );
}

/// A creation with seats respects the key: when a record holds it, nothing
/// is taken or created. (Stores shared by several processes.)
pub async fn seated_creations_respect_the_key(store: SharedStore) {
    let replicas = replicas_of(&store);
    let runner = RunnerId::new("keyed-creator");
    replicas
        .acquire(&runner, Duration::from_secs(60))
        .await
        .expect("acquire");
    let pool = SeatPool::running();
    let pools = [(pool.clone(), 10)];
    let of = |name: &str| keyed(name, "owner-s", "key-s", "t").with_runner(runner.clone(), None);
    assert_eq!(
        replicas
            .create_seated(of("s1"), &SeatId::new("seat-1"), &runner, &pools)
            .await
            .expect("create_seated"),
        Seating::Seated
    );
    assert_eq!(
        replicas
            .create_seated(of("s2"), &SeatId::new("seat-2"), &runner, &pools)
            .await
            .expect("create_seated"),
        Seating::Existing
    );
    assert_eq!(
        store.get(&id("s2")).await.expect("get"),
        None,
        "nothing created"
    );
    assert_eq!(
        replicas.seats_taken(&pool).await.expect("seats_taken"),
        1,
        "nor taken"
    );
    assert_eq!(
        holder(&store, "owner-s", "key-s").await.as_deref(),
        Some("s1")
    );
}
