//! The bounded cache of records the store answers reads from.
//!
//! It holds what the file holds for the records it has (the committer
//! updates it only after a commit: see the `commit` module), so a hit
//! is the committed record. Records are dropped in the order they were last
//! written (or read from the file) once the cache holds more than its
//! record count or its bytes: live tasks are written as they change, so
//! they stay; finished ones leave oldest first, and are read back from the
//! file if asked for again.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use mcp_tasks::store::PackedRecord;

/// The cache. Not thread-safe by itself: the store keeps it behind a mutex.
#[derive(Debug)]
pub(crate) struct Cache {
    records: HashMap<Arc<str>, Slot>,
    /// `(id, stamp)` in the order of writes; entries whose stamp is not
    /// their slot's any more are skipped (and compacted away).
    order: VecDeque<(Arc<str>, u64)>,
    stamp: u64,
    bytes: usize,
    max_records: usize,
    max_bytes: usize,
}

#[derive(Debug)]
struct Slot {
    record: Arc<PackedRecord>,
    stamp: u64,
    size: usize,
}

impl Cache {
    pub(crate) fn new(max_records: usize, max_bytes: usize) -> Self {
        Self {
            records: HashMap::new(),
            order: VecDeque::new(),
            stamp: 0,
            bytes: 0,
            max_records,
            max_bytes,
        }
    }

    /// The cached record with this id, if any.
    pub(crate) fn get(&self, id: &str) -> Option<Arc<PackedRecord>> {
        self.records.get(id).map(|slot| Arc::clone(&slot.record))
    }

    /// Keeps `record` (the committed state of its task), then drops the
    /// oldest records past the bounds.
    pub(crate) fn put(&mut self, record: Arc<PackedRecord>) {
        if self.max_records == 0 {
            return;
        }
        self.stamp += 1;
        let size = record.heap_size();
        let id = Arc::clone(record.shared_id());
        let slot = Slot {
            record,
            stamp: self.stamp,
            size,
        };
        self.bytes += size;
        if let Some(old) = self.records.insert(Arc::clone(&id), slot) {
            self.bytes -= old.size;
        }
        self.order.push_back((id, self.stamp));
        while self.records.len() > self.max_records || self.bytes > self.max_bytes {
            let Some((id, stamp)) = self.order.pop_front() else {
                break;
            };
            if self
                .records
                .get(&id)
                .is_some_and(|slot| slot.stamp == stamp)
            {
                self.remove(&id);
            }
        }
        if self.order.len() > 2 * self.records.len() + 1024 {
            self.compact();
        }
    }

    /// Forgets the record with this id (deleted from the file).
    pub(crate) fn remove(&mut self, id: &str) {
        if let Some(old) = self.records.remove(id) {
            self.bytes -= old.size;
        }
    }

    /// Rebuilds the write order without the entries of records written
    /// again since, or gone.
    fn compact(&mut self) {
        let records = &self.records;
        self.order
            .retain(|(id, stamp)| records.get(id).is_some_and(|slot| slot.stamp == *stamp));
    }

    /// How many records are cached.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.records.len()
    }
}

#[cfg(test)]
mod tests {
    use mcp_tasks::store::{Principal, TaskRecord};
    use mcp_tasks::{TaskId, Ttl, UnixMillis};

    use super::*;

    fn record(id: &str) -> Arc<PackedRecord> {
        Arc::new(PackedRecord::pack(TaskRecord::new(
            TaskId::new(id),
            Principal::new("o"),
            UnixMillis::new(1),
            Ttl::Unlimited,
            None,
        )))
    }

    #[test]
    fn the_oldest_written_leave_first_and_the_bounds_hold() {
        let mut cache = Cache::new(3, usize::MAX);
        for id in ["a", "b", "c"] {
            cache.put(record(id));
        }
        // "a" written again: now "b" is the oldest.
        cache.put(record("a"));
        cache.put(record("d"));
        assert_eq!(cache.len(), 3);
        assert!(cache.get("b").is_none());
        for id in ["a", "c", "d"] {
            assert!(cache.get(id).is_some(), "{id}");
        }
        cache.remove("a");
        assert!(cache.get("a").is_none());
        // Many rewrites of one record keep the order small.
        for _ in 0..10_000 {
            cache.put(record("c"));
        }
        assert!(cache.order.len() <= 2 * cache.len() + 1024);
        let one = record("x").heap_size();
        let mut small = Cache::new(100, one * 2);
        for id in ["x", "y", "z"] {
            small.put(record(id));
        }
        assert_eq!(small.len(), 2, "the byte bound holds");
        assert!(small.bytes <= one * 2);
        let mut none = Cache::new(0, usize::MAX);
        none.put(record("x"));
        assert!(none.get("x").is_none(), "a cache of size 0 keeps nothing");
    }
}
