//! Seat pools in Redis (see [`mcp_tasks::store::replicas`], "Seats"): one
//! script per take, move or free, and one that takes seats and creates a
//! task, so admission adds no round trip to a creation, and one to a
//! queued task's start and to a task's end. With a fair turn, the same
//! steps run in scripts that also keep the turns (`scripts::FAIR`); a
//! creation rate is one script of its own (`scripts::TAKE_RATE`).

use std::time::Duration;

use mcp_tasks::store::{
    FairTurn, RateBucket, RateTake, RunnerId, SeatId, SeatPool, Seating, StoreError, TaskRecord,
    stored_name,
};

use crate::scripts;
use crate::{Keys, RedisStore};

/// A pool's id in its key ([`stored_name`] of its name).
pub(crate) fn pool_id(pool: &SeatPool) -> String {
    stored_name(pool.as_str())
}

impl Keys {
    /// The hash of a pool's seats.
    fn pool(&self, id: &str) -> String {
        format!("{}seats:{id}", self.prefix)
    }

    /// The set of a runner's seats.
    fn held(&self, runner: &str) -> String {
        format!("{}held:{runner}", self.prefix)
    }

    /// The key of a rate bucket.
    fn rate(&self, bucket: &RateBucket) -> String {
        format!("{}rate:{}", self.prefix, stored_name(bucket.as_str()))
    }
}

/// Adds a fair turn's keys and arguments to a script's invocation (see
/// `scripts::FAIR`).
fn push_fair(keys: &Keys, invocation: &mut redis::ScriptInvocation<'_>, fair: &FairTurn) {
    let id = pool_id(&fair.caller);
    let gate = fair.gate.map_or(0, |gate| gate + 1);
    let patience = u64::try_from(fair.patience.as_millis()).unwrap_or(u64::MAX);
    invocation
        .key(format!("{}fair:waiting", keys.prefix))
        .key(format!("{}fair:idle", keys.prefix))
        .key(format!("{}fair:state", keys.prefix))
        .key(keys.pool(&id))
        .arg(id)
        .arg(fair.share)
        .arg(gate)
        .arg(patience);
}

impl RedisStore {
    /// [`Replicas::move_seats`](mcp_tasks::store::Replicas::move_seats) and
    /// `free_seats` (no runner, nothing to take).
    pub(crate) async fn move_seats_in_redis(
        &self,
        seat: &SeatId,
        runner: Option<&RunnerId>,
        take: &[(SeatPool, u64)],
        free: &[SeatPool],
        fair: Option<&FairTurn>,
    ) -> Result<Seating, StoreError> {
        let runner = runner.map_or("", RunnerId::as_str);
        // A fair turn is kept only for a take (a free alone changes no turn).
        let fair = fair.filter(|_| !take.is_empty());
        let script = match fair {
            Some(_) => &scripts::MOVE_SEATS_FAIRLY,
            None => &scripts::MOVE_SEATS,
        };
        let mut invocation = script.key(&self.keys.runners);
        invocation
            .key(self.keys.held(runner))
            .arg(runner)
            .arg(seat.as_str())
            .arg(take.len())
            .arg(&self.keys.prefix);
        for (pool, limit) in take {
            let id = pool_id(pool);
            invocation.key(self.keys.pool(&id)).arg(*limit).arg(id);
        }
        for pool in free {
            let id = pool_id(pool);
            invocation.key(self.keys.pool(&id)).arg(id);
        }
        if let Some(fair) = fair {
            push_fair(&self.keys, &mut invocation, fair);
        }
        let mut connection = self.connection.clone();
        let answer: i64 = self
            .bounded(
                "Redis could not take or free seats",
                invocation.invoke_async(&mut connection),
            )
            .await?;
        seating(answer, take.len())
    }

    /// [`Replicas::create_seated`](mcp_tasks::store::Replicas::create_seated),
    /// and with `fair`, `create_seated_fairly`.
    pub(crate) async fn create_seated_in_redis(
        &self,
        record: TaskRecord,
        seat: &SeatId,
        runner: &RunnerId,
        take: &[(SeatPool, u64)],
        fair: Option<&FairTurn>,
    ) -> Result<Seating, StoreError> {
        let script = match fair {
            Some(_) => &scripts::CREATE_SEATED_FAIRLY,
            None => &scripts::CREATE_SEATED,
        };
        let mut invocation = self.creation(script, &record)?;
        invocation
            .key(&self.keys.runners)
            .key(self.keys.held(runner.as_str()))
            .arg(runner.as_str())
            .arg(seat.as_str())
            .arg(take.len());
        for (pool, limit) in take {
            let id = pool_id(pool);
            invocation.key(self.keys.pool(&id)).arg(*limit).arg(id);
        }
        if let Some(fair) = fair {
            push_fair(&self.keys, &mut invocation, fair);
        }
        let mut connection = self.connection.clone();
        let ticket = self.cache.ticket(record.id().expose());
        let answer: i64 = self
            .bounded(
                "Redis could not take seats and create the task",
                invocation.invoke_async(&mut connection),
            )
            .await?;
        match answer {
            -2 => return Err(StoreError::msg("a task with this id exists")),
            -3 => return Ok(Seating::Existing),
            0 => self.created(ticket, record),
            _ => {}
        }
        seating(answer, take.len())
    }

    /// Adds to a [`scripts::SWAP`] invocation the seat to give up and the
    /// pools to give it up in.
    pub(crate) fn freeing(
        &self,
        invocation: &mut redis::ScriptInvocation<'_>,
        seat: &SeatId,
        pools: &[SeatPool],
    ) {
        invocation.arg(seat.as_str());
        for pool in pools {
            let id = pool_id(pool);
            invocation.key(self.keys.pool(&id)).arg(id);
        }
    }

    /// [`Replicas::take_rate`](mcp_tasks::store::Replicas::take_rate): one
    /// script, in microseconds of Redis's clock (an interval below one
    /// microsecond counts as one).
    pub(crate) async fn take_rate_in_redis(
        &self,
        bucket: &RateBucket,
        interval: Duration,
        burst: u32,
    ) -> Result<RateTake, StoreError> {
        let interval = u64::try_from(interval.as_micros())
            .unwrap_or(u64::MAX)
            .max(1);
        let mut invocation = scripts::TAKE_RATE.key(self.keys.rate(bucket));
        invocation.arg(interval).arg(burst.max(1));
        let mut connection = self.connection.clone();
        let wait: u64 = self
            .bounded(
                "Redis could not count a creation rate",
                invocation.invoke_async(&mut connection),
            )
            .await?;
        Ok(match wait {
            0 => RateTake::Allowed,
            micros => RateTake::Limited {
                retry_after: Duration::from_micros(micros),
            },
        })
    }

    /// [`Replicas::seats_taken`](mcp_tasks::store::Replicas::seats_taken).
    pub(crate) async fn seats_in_redis(&self, pool: &SeatPool) -> Result<u64, StoreError> {
        let mut command = redis::cmd("HLEN");
        command.arg(self.keys.pool(&pool_id(pool)));
        let mut connection = self.connection.clone();
        self.bounded(
            "Redis could not count the seats of a pool",
            command.query_async(&mut connection),
        )
        .await
    }
}

/// What a script's answer about taking seats in `pools` pools says.
fn seating(answer: i64, pools: usize) -> Result<Seating, StoreError> {
    Seating::from_code(answer, pools)
        .ok_or_else(|| StoreError::msg("Redis answered a take of seats with something unexpected"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_is_keyed_by_a_hash_of_its_name() {
        let id = pool_id(&SeatPool::new("caller:secret token"));
        assert_eq!(id.len(), mcp_tasks::store::STORED_NAME_LEN);
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(id, pool_id(&SeatPool::new("caller:secret token ")));
        // SHA-256("running") starts so.
        assert_eq!(
            pool_id(&SeatPool::running()),
            "c071cf5f5ed6f884cc70155b6f05f755"
        );
    }
}
