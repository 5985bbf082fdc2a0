//! Leases, takeover, seats, creation rates and fair turns in PostgreSQL
//! (see [`mcp_tasks::store::replicas`]): each operation is one statement,
//! most a function of the schema (see `schema.rs`), so admission adds no
//! round trip to a creation (one more with a creation rate), one to a
//! queued task's start, and none to a task's end (its seats are freed in
//! the transaction of its last write).

use std::time::Duration;

use mcp_tasks::TaskId;
use mcp_tasks::store::{
    BoxFuture, CacheTicket, FairTurn, HashKey, Orphan, RateBucket, RateTake, Replicas, RunnerId,
    SeatId, SeatPool, Seating, StoreError, Swap, TaskRecord, Transition, stored_name,
};
use tokio::sync::watch;
use tokio_postgres::types::ToSql;

use crate::{Columns, PostgresStore, batch, column, feed};

/// A pool's id in its row ([`stored_name`] of its name).
pub(crate) fn pool_id(pool: &SeatPool) -> String {
    stored_name(pool.as_str())
}

/// A random name (16 hex digits): a sweeper's.
pub(crate) fn random_name() -> Result<String, StoreError> {
    let mut name = HashKey::random()?.to_hex();
    name.truncate(16);
    Ok(name)
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// The pools' ids and their limits, as the functions take them.
fn pools_and_limits(take: &[(SeatPool, u64)]) -> (Vec<String>, Vec<i64>) {
    take.iter()
        .map(|(pool, limit)| (pool_id(pool), i64::try_from(*limit).unwrap_or(i64::MAX)))
        .unzip()
}

fn pool_ids(pools: &[SeatPool]) -> Vec<String> {
    pools.iter().map(pool_id).collect()
}

/// The one integer a function answered.
fn answered(rows: &[tokio_postgres::Row], what: &str) -> Result<i32, StoreError> {
    rows.first()
        .ok_or_else(|| StoreError::msg(format!("PostgreSQL answered {what} with nothing")))?
        .try_get::<_, i32>(0)
        .map_err(column)
}

/// A fair turn as the functions take it.
struct Turn {
    caller: String,
    share: i64,
    /// 0 for a take that queues, else the 1-based index of the shared pool.
    gate: i32,
    patience: i64,
}

impl Turn {
    /// The parameters the functions end with: caller, share, gate, patience.
    fn params(&self) -> [&(dyn ToSql + Sync); 4] {
        [&self.caller, &self.share, &self.gate, &self.patience]
    }

    fn of(fair: &FairTurn) -> Self {
        Self {
            caller: pool_id(&fair.caller),
            share: i64::try_from(fair.share).unwrap_or(i64::MAX),
            gate: fair
                .gate
                .map_or(0, |gate| i32::try_from(gate + 1).unwrap_or(i32::MAX)),
            patience: millis(fair.patience),
        }
    }
}

/// What a function's answer about taking seats in `pools` pools says.
fn seating(answer: i32, pools: usize) -> Result<Seating, StoreError> {
    Seating::from_code(i64::from(answer), pools).ok_or_else(|| {
        StoreError::msg("PostgreSQL answered a take of seats with something unexpected")
    })
}

impl PostgresStore {
    async fn move_seats_in_postgres(
        &self,
        seat: &SeatId,
        runner: Option<&RunnerId>,
        take: &[(SeatPool, u64)],
        free: &[SeatPool],
    ) -> Result<Seating, StoreError> {
        let (pools, limits) = pools_and_limits(take);
        let freed = !free.is_empty();
        let moved = batch::Move {
            runner: runner.map_or("", RunnerId::as_str).to_owned(),
            seat: seat.as_str().to_owned(),
            take: pools,
            limits,
            free: pool_ids(free),
        };
        let answer = self.moves.write(moved).await?;
        let seated = seating(answer, take.len())?;
        if seated == Seating::Seated && freed {
            self.announcer.announce(&[feed::SEATS_FREED]).await;
        }
        Ok(seated)
    }

    /// [`Replicas::move_seats_fairly`], with a pool to take.
    async fn move_seats_fairly_in_postgres(
        &self,
        seat: &SeatId,
        runner: &RunnerId,
        take: &[(SeatPool, u64)],
        free: &[SeatPool],
        fair: &FairTurn,
    ) -> Result<Seating, StoreError> {
        let (pools, limits) = pools_and_limits(take);
        let free = pool_ids(free);
        let turn = Turn::of(fair);
        let rows = self
            .query(
                "PostgreSQL could not take or free seats",
                &self.sql.move_seats_fairly,
                &[
                    &[
                        &runner.as_str() as &(dyn ToSql + Sync),
                        &seat.as_str(),
                        &pools,
                        &limits,
                        &free,
                    ][..],
                    &turn.params()[..],
                ]
                .concat(),
            )
            .await?;
        let answer = answered(&rows, "a take of seats")?;
        let seated = seating(answer, take.len())?;
        if seated == Seating::Seated && !free.is_empty() {
            self.announcer.announce(&[feed::SEATS_FREED]).await;
        }
        Ok(seated)
    }

    async fn create_seated_in_postgres(
        &self,
        record: TaskRecord,
        seat: &SeatId,
        runner: &RunnerId,
        take: &[(SeatPool, u64)],
        fair: Option<&FairTurn>,
    ) -> Result<Seating, StoreError> {
        // Without a key or a fair turn, in a batch: without seats, what it
        // did not create (an existing id, a claimed lease) is run alone,
        // which tells why; with seats, the batch tells.
        if fair.is_none() && record.idempotency_slot().is_none() {
            let row = Columns::of(&record)?;
            let ticket = self.cache.ticket(record.id().expose());
            if take.is_empty() {
                let lease = Some(runner.as_str().to_owned());
                let creation = batch::Creation { row, lease };
                if self.plain.write(batch::Plain::Create(creation)).await? {
                    self.created(ticket, record);
                    return seating(0, 0);
                }
            } else {
                let (pools, limits) = pools_and_limits(take);
                let creation = batch::SeatedCreation {
                    row,
                    lease: runner.as_str().to_owned(),
                    seat: seat.as_str().to_owned(),
                    pools,
                    limits,
                };
                let answer = self.seated.write(batch::Seated::Create(creation)).await?;
                return self.seated_answer(answer, ticket, record, take.len());
            }
        }
        let row = Columns::of(&record)?;
        let (pools, limits) = pools_and_limits(take);
        let ticket = self.cache.ticket(record.id().expose());
        let what = "PostgreSQL could not take seats and create the task";
        let (lease, seat) = (runner.as_str(), seat.as_str());
        let mut params = row.params().to_vec();
        params.extend([&lease as &(dyn ToSql + Sync), &seat, &pools, &limits]);
        let turn = fair.map(Turn::of);
        let sql = match &turn {
            None => &self.sql.create_seated,
            Some(turn) => {
                params.extend(turn.params());
                &self.sql.create_seated_fairly
            }
        };
        let rows = self.query(what, sql, &params).await?;
        let answer = answered(&rows, "a creation")?;
        self.seated_answer(answer, ticket, record, take.len())
    }

    /// What a seated creation's `answer` (`create_seated`'s code) means.
    fn seated_answer(
        &self,
        answer: i32,
        ticket: Option<CacheTicket<'_>>,
        record: TaskRecord,
        pools: usize,
    ) -> Result<Seating, StoreError> {
        match answer {
            -2 => return Err(StoreError::msg("a task with this id exists")),
            -3 => return Ok(Seating::Existing),
            0 => self.created(ticket, record),
            _ => {}
        }
        seating(answer, pools)
    }
}

impl Replicas for PostgresStore {
    fn acquire<'a>(
        &'a self,
        runner: &'a RunnerId,
        hold: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let taken = self
                .query_lease(
                    "PostgreSQL could not take the lease",
                    &self.sql.acquire,
                    &[&runner.as_str(), &millis(hold)],
                )
                .await?;
            if taken.is_empty() {
                return Err(StoreError::msg(
                    "this runner's lease was claimed: take a lease under a new runner",
                ));
            }
            Ok(())
        })
    }

    fn renew<'a>(
        &'a self,
        runner: &'a RunnerId,
        hold: Duration,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let rows = self
                .query_lease(
                    "PostgreSQL could not renew the lease",
                    &self.sql.renew,
                    &[&runner.as_str(), &millis(hold)],
                )
                .await?;
            rows.first()
                .ok_or_else(|| StoreError::msg("PostgreSQL answered a renewal with nothing"))?
                .try_get::<_, bool>(0)
                .map_err(column)
        })
    }

    fn orphans(&self, limit: usize) -> BoxFuture<'_, Result<Vec<Orphan>, StoreError>> {
        Box::pin(async move {
            if limit == 0 {
                return Ok(Vec::new());
            }
            let limit = i32::try_from(limit).unwrap_or(i32::MAX);
            let rows = self
                .query(
                    "PostgreSQL could not list the tasks of stopped servers",
                    &self.sql.orphans,
                    &[&limit],
                )
                .await?;
            rows.iter()
                .map(|row| {
                    let id: &str = row.try_get(0).map_err(column)?;
                    let runner: &str = row.try_get(1).map_err(column)?;
                    Ok(Orphan::new(TaskId::new(id), RunnerId::new(runner)))
                })
                .collect()
        })
    }

    fn feed_gaps(&self) -> watch::Receiver<u64> {
        self.gaps.clone()
    }

    fn move_seats<'a>(
        &'a self,
        seat: &'a SeatId,
        runner: &'a RunnerId,
        take: &'a [(SeatPool, u64)],
        free: &'a [SeatPool],
    ) -> BoxFuture<'a, Result<Seating, StoreError>> {
        Box::pin(self.move_seats_in_postgres(seat, Some(runner), take, free))
    }

    fn create_seated<'a>(
        &'a self,
        record: TaskRecord,
        seat: &'a SeatId,
        runner: &'a RunnerId,
        take: &'a [(SeatPool, u64)],
    ) -> BoxFuture<'a, Result<Seating, StoreError>> {
        Box::pin(self.create_seated_in_postgres(record, seat, runner, take, None))
    }

    fn supports_rate(&self) -> bool {
        true
    }

    fn take_rate<'a>(
        &'a self,
        bucket: &'a RateBucket,
        interval: Duration,
        burst: u32,
    ) -> BoxFuture<'a, Result<RateTake, StoreError>> {
        Box::pin(async move {
            let interval = i64::try_from(interval.as_micros())
                .unwrap_or(i64::MAX)
                .max(1);
            let rows = self
                .query(
                    "PostgreSQL could not count a creation rate",
                    &self.sql.take_rate,
                    &[
                        &stored_name(bucket.as_str()),
                        &interval,
                        &i64::from(burst.max(1)),
                    ],
                )
                .await?;
            let wait: i64 = rows
                .first()
                .ok_or_else(|| StoreError::msg("PostgreSQL answered a rate with nothing"))?
                .try_get(0)
                .map_err(column)?;
            Ok(match u64::try_from(wait) {
                Ok(0) | Err(_) => RateTake::Allowed,
                Ok(micros) => RateTake::Limited {
                    retry_after: Duration::from_micros(micros),
                },
            })
        })
    }

    fn supports_fair_share(&self) -> bool {
        true
    }

    fn create_seated_fairly<'a>(
        &'a self,
        record: TaskRecord,
        seat: &'a SeatId,
        runner: &'a RunnerId,
        take: &'a [(SeatPool, u64)],
        fair: &'a FairTurn,
    ) -> BoxFuture<'a, Result<Seating, StoreError>> {
        Box::pin(self.create_seated_in_postgres(record, seat, runner, take, Some(fair)))
    }

    fn move_seats_fairly<'a>(
        &'a self,
        seat: &'a SeatId,
        runner: &'a RunnerId,
        take: &'a [(SeatPool, u64)],
        free: &'a [SeatPool],
        fair: &'a FairTurn,
    ) -> BoxFuture<'a, Result<Seating, StoreError>> {
        // A fair turn is kept only for a take (a free alone changes no turn).
        if take.is_empty() {
            return self.move_seats(seat, runner, take, free);
        }
        Box::pin(self.move_seats_fairly_in_postgres(seat, runner, take, free, fair))
    }

    fn free_seats<'a>(
        &'a self,
        seat: &'a SeatId,
        pools: &'a [SeatPool],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let _ = self.move_seats_in_postgres(seat, None, &[], pools).await?;
            Ok(())
        })
    }

    fn frees_with_swap(&self) -> bool {
        true
    }

    fn compare_and_swap_freeing<'a>(
        &'a self,
        transition: Transition,
        seat: &'a SeatId,
        free: &'a [SeatPool],
    ) -> BoxFuture<'a, Result<Swap, StoreError>> {
        Box::pin(self.swap(transition, Some((seat.as_str(), pool_ids(free)))))
    }

    fn seats_taken<'a>(&'a self, pool: &'a SeatPool) -> BoxFuture<'a, Result<u64, StoreError>> {
        Box::pin(async move {
            let rows = self
                .query(
                    "PostgreSQL could not count the seats of a pool",
                    &self.sql.seats_taken,
                    &[&pool_id(pool)],
                )
                .await?;
            let taken: i64 = rows
                .first()
                .ok_or_else(|| StoreError::msg("PostgreSQL counted no seats"))?
                .try_get(0)
                .map_err(column)?;
            Ok(u64::try_from(taken).unwrap_or(0))
        })
    }

    fn seats_freed(&self) -> watch::Receiver<u64> {
        self.freed.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_is_named_by_a_hash_of_its_name() {
        let id = pool_id(&SeatPool::new("caller:secret token"));
        assert_eq!(id.len(), mcp_tasks::store::STORED_NAME_LEN);
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(id, pool_id(&SeatPool::new("caller:secret token ")));
        assert_eq!(seating(2, 2).ok(), Some(Seating::Full(1)));
        assert!(seating(3, 2).is_err());
    }
}
