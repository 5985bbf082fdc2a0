//! The bounded read cache of one replica of a store shared by several
//! processes, kept coherent by the store's change feed ([`FeedCache`]), so
//! that a `tasks/get` (and the read before a compare-and-set) costs no round
//! trip to the store when the record is known. The Redis and PostgreSQL
//! stores use it; a backend whose feed has the property below can too.
//!
//! It is filled by this replica's own writes (once the store answered them)
//! and by its reads, and emptied by the feed: every write but a creation
//! announces the task id on the store's feed, and an id on the feed drops
//! its entry ([`FeedCache::changed`]) before the runtime hears of it; a lost
//! subscription empties the cache and turns it off until the feed is
//! subscribed again (whatever was announced in between is unknown). So a
//! write on another replica is seen by this replica's next read once the
//! write returned and this replica's feed has its id; a finished record
//! never changes (only its deletion, which is announced too); an entry past
//! its `expiresAt` is never answered.
//!
//! What the feed must give: every write's announcement reaches every
//! subscriber, after the write is visible to reads, and the announcements
//! of the writes of one record arrive in the order of those writes (Redis
//! runs scripts one at a time and delivers a channel's messages in that
//! order). A store whose announcements may come out of that order (the
//! PostgreSQL store announces a write after it committed, so a later
//! write's may come first) keeps a replica's own write until its own
//! announcement arrives; one whose announcements may be lost sets a
//! maximal age ([`FeedCache::with_max_age`]).
//!
//! The race this module exists for: a read (or a write) is sent, another
//! replica writes the record, its id arrives on the feed, and only then the
//! older answer arrives and would be installed after the invalidation that
//! should have dropped it. Counting the feed's messages for an id while an
//! operation on it is in flight ([`CacheTicket`]) tells which answers may be
//! kept:
//!
//! * a read with no message for its id since it was sent is current, and the
//!   next message drops it;
//! * a write's own announcement is one of the messages: with none yet, the
//!   entry outlives the next message (its own, or an older write's) and the
//!   one after drops it; with one, the next drops it; with two or more, a
//!   newer write may have followed, and nothing is kept;
//! * a creation announces nothing (no replica could have cached the record
//!   before it existed), so it is kept as a read is: with no message yet,
//!   and the next drops it; with one, a later write (another replica that
//!   learned the id, through the idempotency index) may have followed, and
//!   it is not kept.
//!
//! An entry is never replaced by an older version. Records leave in the
//! order they were last written or read once the cache holds more than its
//! record count or its bytes.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::PackedRecord;
use crate::task::UnixMillis;

/// The read cache of one replica: see the [module docs](self). Shared by
/// the store and the task that reads its feed.
#[derive(Debug)]
pub struct FeedCache {
    inner: Mutex<Inner>,
    max_records: usize,
    max_bytes: usize,
    /// How long an entry is answered after it was filled (`None`: until the
    /// feed drops it).
    max_age: Option<Duration>,
}

#[derive(Debug)]
struct Inner {
    records: HashMap<Arc<str>, Slot>,
    /// `(id, stamp)` in the order of fills; entries whose stamp is not their
    /// slot's any more are skipped (and compacted away).
    order: VecDeque<(Arc<str>, u64)>,
    stamp: u64,
    bytes: usize,
    /// The feed's messages per id that has operations in flight.
    flights: HashMap<Arc<str>, Flight>,
    /// Bumped whenever the cache is emptied: an answer to an operation sent
    /// before is not kept.
    epoch: u64,
    /// Whether the feed is subscribed (else nothing is answered nor kept).
    live: bool,
}

#[derive(Debug)]
struct Slot {
    record: Arc<PackedRecord>,
    stamp: u64,
    size: usize,
    /// The next feed message for this id is let pass (a write's own).
    spare: bool,
    /// When it was filled (for the maximal age).
    filled: Instant,
}

#[derive(Debug, Default)]
struct Flight {
    operations: u32,
    messages: u64,
}

/// What an answer that may be kept came from: how many of the feed's
/// messages it accounts for (see the module doc).
#[derive(Debug, Clone, Copy)]
enum Answer {
    /// A read: none.
    Read,
    /// A write of this replica: its own announcement, once.
    Wrote,
    /// A creation of this replica, which is not announced: none.
    Created,
}

/// An operation on one id in flight, taken before it is sent: it counts the
/// feed's messages for the id until it is settled or dropped.
#[derive(Debug)]
pub struct CacheTicket<'a> {
    cache: &'a FeedCache,
    id: Arc<str>,
    messages: u64,
    epoch: u64,
}

impl Drop for CacheTicket<'_> {
    fn drop(&mut self) {
        let mut inner = self.cache.lock();
        if let Some(flight) = inner.flights.get_mut(&self.id) {
            flight.operations -= 1;
            if flight.operations == 0 {
                inner.flights.remove(&self.id);
            }
        }
    }
}

impl FeedCache {
    /// A cache of at most `max_records` records and `max_bytes` bytes of
    /// them (`max_records` 0: none), live (the feed is subscribed first).
    pub fn new(max_records: usize, max_bytes: usize) -> Self {
        Self {
            inner: Mutex::new(Inner {
                records: HashMap::new(),
                order: VecDeque::new(),
                stamp: 0,
                bytes: 0,
                flights: HashMap::new(),
                epoch: 0,
                live: true,
            }),
            max_records,
            max_bytes,
            max_age: None,
        }
    }

    /// This cache, answering an entry at most `age` after it was filled:
    /// for a store whose announcements may be lost (one sent after its
    /// write committed, lost when its writer dies between the two), a bound
    /// on how long the loss leaves an entry stale.
    #[must_use]
    pub fn with_max_age(mut self, age: Duration) -> Self {
        self.max_age = Some(age);
        self
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Nothing panics with the lock held; a poisoned cache is emptied.
        self.inner.lock().unwrap_or_else(|poisoned| {
            let mut inner = poisoned.into_inner();
            inner.clear();
            self.inner.clear_poison();
            inner
        })
    }

    /// The cached record with this id, unless it expired by `now`.
    pub fn get(&self, id: &str, now: UnixMillis) -> Option<Arc<PackedRecord>> {
        if self.max_records == 0 {
            return None;
        }
        let inner = self.lock();
        if !inner.live {
            return None;
        }
        let slot = inner.records.get(id)?;
        if slot.record.expires_at().is_some_and(|at| at <= now) {
            return None;
        }
        if self.max_age.is_some_and(|age| slot.filled.elapsed() > age) {
            return None;
        }
        Some(Arc::clone(&slot.record))
    }

    /// A ticket for an operation on `id`, to take before sending it.
    pub fn ticket(&self, id: &str) -> Option<CacheTicket<'_>> {
        if self.max_records == 0 {
            return None;
        }
        let mut inner = self.lock();
        let id: Arc<str> = inner
            .flights
            .get_key_value(id)
            .map_or_else(|| Arc::from(id), |(id, _)| Arc::clone(id));
        let epoch = inner.epoch;
        let flight = inner.flights.entry(Arc::clone(&id)).or_default();
        flight.operations += 1;
        let messages = flight.messages;
        Some(CacheTicket {
            cache: self,
            id,
            messages,
            epoch,
        })
    }

    /// Keeps what a read of the ticket's id found, if it is still current.
    pub fn read(&self, ticket: Option<CacheTicket<'_>>, found: Option<&Arc<PackedRecord>>) {
        self.settle(ticket, found, Answer::Read);
    }

    /// Keeps `record`, which this replica's write stored (the store answered),
    /// if it is still current.
    pub fn wrote(&self, ticket: Option<CacheTicket<'_>>, record: &Arc<PackedRecord>) {
        self.settle(ticket, Some(record), Answer::Wrote);
    }

    /// Keeps `record`, which this replica's creation stored (the store answered;
    /// a creation is not announced on the feed), if it is still current.
    pub fn created(&self, ticket: Option<CacheTicket<'_>>, record: &Arc<PackedRecord>) {
        self.settle(ticket, Some(record), Answer::Created);
    }

    fn settle(
        &self,
        ticket: Option<CacheTicket<'_>>,
        found: Option<&Arc<PackedRecord>>,
        answer: Answer,
    ) {
        let Some(ticket) = ticket else { return };
        let mut inner = self.lock();
        let since = inner
            .flights
            .get(&ticket.id)
            .map_or(0, |flight| flight.messages - ticket.messages);
        if !inner.live || inner.epoch != ticket.epoch {
            return;
        }
        let spare = match (answer, since) {
            (Answer::Read | Answer::Created, 0) | (Answer::Wrote, 1) => false,
            (Answer::Wrote, 0) => true,
            _ => return,
        };
        match found {
            Some(record) => self.put(&mut inner, &ticket.id, record, spare),
            // Nothing stored under the id when it was read.
            None => inner.remove(&ticket.id),
        }
        drop(inner);
        drop(ticket);
    }

    fn put(&self, inner: &mut Inner, id: &Arc<str>, record: &Arc<PackedRecord>, spare: bool) {
        if let Some(slot) = inner.records.get_mut(id) {
            if slot.record.version() == record.version() {
                // Read again past the maximal age: as good as new.
                slot.filled = Instant::now();
            }
            if slot.record.version() >= record.version() {
                return;
            }
        }
        inner.stamp += 1;
        let size = record.heap_size();
        let slot = Slot {
            record: Arc::clone(record),
            stamp: inner.stamp,
            size,
            spare,
            filled: Instant::now(),
        };
        inner.bytes += size;
        if let Some(old) = inner.records.insert(Arc::clone(id), slot) {
            inner.bytes -= old.size;
        }
        let stamp = inner.stamp;
        inner.order.push_back((Arc::clone(id), stamp));
        while inner.records.len() > self.max_records || inner.bytes > self.max_bytes {
            let Some((id, stamp)) = inner.order.pop_front() else {
                break;
            };
            if inner
                .records
                .get(&id)
                .is_some_and(|slot| slot.stamp == stamp)
            {
                inner.remove(&id);
            }
        }
        if inner.order.len() > 2 * inner.records.len() + 1024 {
            let Inner { records, order, .. } = inner;
            order.retain(|(id, stamp)| records.get(id).is_some_and(|slot| slot.stamp == *stamp));
        }
    }

    /// Forgets the record with this id (this replica deleted it, or found
    /// it missing).
    pub fn forget(&self, id: &str) {
        self.lock().remove(id);
    }

    /// The feed announced a change of `id`.
    pub fn changed(&self, id: &str) {
        let mut inner = self.lock();
        if let Some(flight) = inner.flights.get_mut(id) {
            flight.messages += 1;
        }
        match inner.records.get_mut(id) {
            Some(slot) if slot.spare => slot.spare = false,
            Some(_) => inner.remove(id),
            None => {}
        }
    }

    /// The feed's subscription was lost: nothing is answered nor kept until
    /// [`FeedCache::subscribed`].
    pub fn lost(&self) {
        let mut inner = self.lock();
        inner.clear();
        inner.live = false;
    }

    /// The feed is subscribed (again): the cache starts empty.
    pub fn subscribed(&self) {
        let mut inner = self.lock();
        inner.clear();
        inner.live = true;
    }

    /// How many records are cached.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().records.len()
    }
}

impl Inner {
    fn remove(&mut self, id: &str) {
        if let Some(old) = self.records.remove(id) {
            self.bytes -= old.size;
        }
    }

    fn clear(&mut self) {
        self.records.clear();
        self.order.clear();
        self.bytes = 0;
        self.epoch = self.epoch.wrapping_add(1);
    }
}

#[cfg(test)]
mod tests {
    use crate::store::{Principal, TaskRecord};
    use crate::task::{TaskId, Ttl};

    use super::*;

    fn record(id: &str, ttl: Ttl) -> Arc<PackedRecord> {
        Arc::new(PackedRecord::pack(TaskRecord::new(
            TaskId::new(id),
            Principal::new("o"),
            UnixMillis::new(1_000),
            ttl,
            None,
        )))
    }

    fn live(id: &str) -> Arc<PackedRecord> {
        record(id, Ttl::Unlimited)
    }

    const NOW: UnixMillis = UnixMillis::new(2_000);

    #[test]
    fn an_entry_older_than_the_maximal_age_is_not_answered() {
        let cache = FeedCache::new(10, usize::MAX).with_max_age(Duration::from_millis(30));
        let ticket = cache.ticket("a");
        cache.read(ticket, Some(&live("a")));
        assert!(cache.get("a", NOW).is_some());
        std::thread::sleep(Duration::from_millis(40));
        assert!(cache.get("a", NOW).is_none(), "read again once it is old");
        // The same version read again is answered for another maximal age.
        let ticket = cache.ticket("a");
        cache.read(ticket, Some(&live("a")));
        assert!(cache.get("a", NOW).is_some(), "refreshed by its read");
    }

    #[test]
    fn a_read_is_kept_unless_its_id_was_announced_while_in_flight() {
        let cache = FeedCache::new(10, usize::MAX);
        let ticket = cache.ticket("a");
        cache.read(ticket, Some(&live("a")));
        assert!(cache.get("a", NOW).is_some());
        cache.changed("a");
        assert!(cache.get("a", NOW).is_none(), "an announced id is dropped");
        // Another replica wrote while the read was in flight: the answer
        // may be older than the write, so it is not kept.
        let ticket = cache.ticket("a");
        cache.changed("a");
        cache.read(ticket, Some(&live("a")));
        assert!(cache.get("a", NOW).is_none());
        // Another id's announcement does not matter.
        let ticket = cache.ticket("a");
        cache.changed("b");
        cache.read(ticket, Some(&live("a")));
        assert!(cache.get("a", NOW).is_some());
    }

    #[test]
    fn a_write_outlives_its_own_announcement_and_no_other() {
        let cache = FeedCache::new(10, usize::MAX);
        // The answer came before the announcement.
        let ticket = cache.ticket("a");
        cache.wrote(ticket, &live("a"));
        cache.changed("a");
        assert!(cache.get("a", NOW).is_some(), "its own announcement");
        cache.changed("a");
        assert!(cache.get("a", NOW).is_none(), "a later write's");
        // The announcement came first.
        let ticket = cache.ticket("a");
        cache.changed("a");
        cache.wrote(ticket, &live("a"));
        assert!(cache.get("a", NOW).is_some());
        cache.changed("a");
        assert!(cache.get("a", NOW).is_none());
        // Two announcements while in flight: one may be newer.
        let ticket = cache.ticket("a");
        cache.changed("a");
        cache.changed("a");
        cache.wrote(ticket, &live("a"));
        assert!(cache.get("a", NOW).is_none());
    }

    #[test]
    fn a_creation_is_kept_until_the_first_announcement_of_its_id() {
        let cache = FeedCache::new(10, usize::MAX);
        // No announcement of its own: the next message is a later write's.
        let ticket = cache.ticket("a");
        cache.created(ticket, &live("a"));
        assert!(cache.get("a", NOW).is_some());
        cache.changed("a");
        assert!(cache.get("a", NOW).is_none(), "a later write's");
        // Another replica wrote it before the answer came: not kept.
        let ticket = cache.ticket("b");
        cache.changed("b");
        cache.created(ticket, &live("b"));
        assert!(cache.get("b", NOW).is_none());
    }

    #[test]
    fn a_lost_feed_empties_it_and_stops_it_until_subscribed() {
        let cache = FeedCache::new(10, usize::MAX);
        cache.wrote(cache.ticket("a"), &live("a"));
        let in_flight = cache.ticket("b");
        cache.lost();
        assert!(cache.get("a", NOW).is_none());
        cache.wrote(cache.ticket("c"), &live("c"));
        assert!(cache.get("c", NOW).is_none(), "nothing kept while lost");
        cache.subscribed();
        cache.read(in_flight, Some(&live("b")));
        assert!(
            cache.get("b", NOW).is_none(),
            "an answer to a read sent before the gap is not kept"
        );
        cache.read(cache.ticket("b"), Some(&live("b")));
        assert!(cache.get("b", NOW).is_some());
    }

    #[test]
    fn expired_records_are_not_answered_and_bounds_hold() {
        let cache = FeedCache::new(2, usize::MAX);
        // Created at 1,000 ms with a TTL of 500 ms: expired at 2,000.
        let short = record("x", Ttl::Limited(std::time::Duration::from_millis(500)));
        cache.wrote(cache.ticket("x"), &short);
        assert!(cache.get("x", UnixMillis::new(1_200)).is_some());
        assert!(cache.get("x", NOW).is_none());
        for id in ["a", "b", "c"] {
            cache.wrote(cache.ticket(id), &live(id));
        }
        assert_eq!(cache.len(), 2);
        assert!(cache.get("a", NOW).is_none(), "the oldest left");
        let none = FeedCache::new(0, usize::MAX);
        none.wrote(none.ticket("a"), &live("a"));
        assert!(
            none.get("a", NOW).is_none(),
            "a cache of size 0 keeps nothing"
        );
        assert_eq!(cache.lock().flights.len(), 0, "tickets are given back");
    }
}
