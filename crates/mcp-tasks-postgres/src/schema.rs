//! The tables and functions in the store's schema, and their versioned
//! migrations.
//!
//! Every object lives in one schema of its own (`PostgresOptions::schema`,
//! default `mcp_tasks`), so several deployments can share a database. The
//! schema's version is the highest row of `SCHEMA.migrations`; a store
//! reads it at connect and:
//!
//! * at this binary's version, changes nothing (a role without DDL grants
//!   runs a server on a schema an operator migrated);
//! * behind it, applies the missing migrations in order in one
//!   transaction, under an advisory lock, so replicas starting at once
//!   apply each once (unless told to only check: then it refuses, naming
//!   `mcp-tasks admin migrate`);
//! * ahead of it (a newer binary migrated), refuses to run, since this
//!   binary does not know what the newer schema means.
//!
//! # What is kept where
//!
//! * `tasks`: one row per task: its id (`COLLATE "C"`, so ids sort in byte
//!   order), owner, version, the record's JSON (the same JSON the other
//!   stores keep), its runner while it is unfinished, its `expiresAt` in
//!   Unix milliseconds, and its idempotency slot (unique while the row
//!   lives). Indexes: by owner and id (`tasks/list`), by expiry (the
//!   sweeper), by runner (takeover), by slot.
//! * `runners`: one row per lease: its end in the database's clock
//!   (milliseconds) and whether it was claimed.
//! * `pools` and `seats`: a pool's count of seats (no row for an empty
//!   pool), and each seat with the runner that holds it. A pool is named by
//!   the first 32 hex digits of the SHA-256 of its name (which may hold a
//!   principal). Every change of a pool happens under a transaction-scoped
//!   advisory lock on it, taken in one order (the lock keys sorted): takes,
//!   moves, frees and claims never deadlock. A take reads the runner's lease
//!   without locking its row (renewals never wait for takes); a seat a take
//!   wrote while its runner was being claimed is freed by the next claim,
//!   which frees every seat whose runner holds no lease.
//! * `meta`: the task hash key.
//! * `sweeper`: which store sweeps expired tasks, and until when.
//!
//! Writes that need more than one statement are functions, so that each
//! costs one round trip and runs in one transaction. A write's change is
//! announced (`announce`, a `NOTIFY`) after it committed, in a transaction
//! of its own that waits for no disk, several writes' at once: a `NOTIFY`
//! holds a lock of the whole database for its commit, so one in each
//! write's transaction made every write wait for the disk in turn (5,700
//! updates a second from 16 clients became 950). Only a claim of dead
//! replicas' leases (rare) and a batch of compare-and-sets (one in flight
//! per store and kind, see `batch.rs`; with seats, the seated creations
//! that waited with it too) notify in their own transaction.

use mcp_tasks::store::StoreError;
use tokio_postgres::Client;

use crate::connection::failure;

/// The migrations, in order: the version each brings the schema to, and
/// its SQL, where `{s}` is the schema (quoted) and `{channel}` the change
/// feed's channel name (a string literal).
pub(crate) const MIGRATIONS: &[(i32, &str)] = &[(1, V1), (2, V2), (3, V3)];

/// The version this binary's schema is at.
pub(crate) const VERSION: i32 = 3;

/// The seat batches of version 2, set-based: a batch of seated creations
/// whose tasks are all new, whose leases are all held and whose pools all
/// have room for every seat of the batch is written in three statements
/// (seats, pool counts, tasks) where the loop ran some ten a task; the
/// loop stays for a batch that does not all fit, so which task gets a
/// seat is decided exactly as before. A batch of freeing compare-and-sets
/// frees its seats in one statement where it ran about five a task; and
/// the two kinds that wait together go in one transaction
/// (`seated_batch`).
/// (Measured with `serve`'s default bounds, BENCHMARKS.md: PostgreSQL's
/// CPU was about 330 µs a creation, most of it these loops.) The two
/// functions keep their signatures and answers, so replicas of the binary
/// before keep working on this schema. Replacing them needs the role that
/// owns them (the one that applied the earlier migrations).
const V3: &str = r#"
CREATE OR REPLACE FUNCTION {s}.create_seated_batch(p_ids text[], p_owners text[],
  p_versions bigint[], p_records text[], p_runners text[], p_expires bigint[],
  p_leases text[], p_seats text[], p_item int[], p_pools text[], p_limits bigint[])
RETURNS int[] LANGUAGE plpgsql AS $$
DECLARE
  codes int[] := '{}';
  code int;
  mine text[];
  limits bigint[];
BEGIN
  PERFORM {s}.lock_pools(p_pools);
  -- All at once when the loop below would create every task: no id
  -- exists, every lease is held, and every pool has room for all the
  -- seats of the batch it does not hold yet, under the least of the
  -- limits given for it.
  IF NOT EXISTS (SELECT 1 FROM {s}.tasks t WHERE t.id = ANY (p_ids))
     AND NOT EXISTS (SELECT 1 FROM unnest(p_leases) AS l(runner)
                     WHERE NOT EXISTS (SELECT 1 FROM {s}.runners r
                                       WHERE r.runner = l.runner AND NOT r.claimed))
     AND NOT EXISTS (
       SELECT 1 FROM (
         SELECT e.pool, min(e.lim) AS lim, count(*) AS wanted
           FROM unnest(p_item, p_pools, p_limits) AS e(item, pool, lim)
           WHERE NOT EXISTS (SELECT 1 FROM {s}.seats s
                             WHERE s.pool = e.pool AND s.seat = p_seats[e.item])
           GROUP BY e.pool) w
       WHERE coalesce((SELECT p.taken FROM {s}.pools p WHERE p.pool = w.pool), 0)
             + w.wanted > w.lim)
  THEN
    -- A seat named twice in a pool is taken once, for the first task
    -- naming it, as the loop would.
    WITH e AS (SELECT DISTINCT ON (e.pool, p_seats[e.item])
                      e.pool, p_seats[e.item] AS seat, p_leases[e.item] AS runner
                 FROM unnest(p_item, p_pools) WITH ORDINALITY AS e(item, pool, n)
                 ORDER BY e.pool, p_seats[e.item], e.n),
         taken AS (INSERT INTO {s}.seats (pool, seat, runner)
                     SELECT e.pool, e.seat, e.runner FROM e
                     ON CONFLICT DO NOTHING RETURNING pool)
    INSERT INTO {s}.pools AS p (pool, taken)
      SELECT taken.pool, count(*) FROM taken GROUP BY taken.pool
      ON CONFLICT (pool) DO UPDATE SET taken = p.taken + EXCLUDED.taken;
    -- In the ids' order, as the batches of plain creations.
    INSERT INTO {s}.tasks (id, owner, version, record, runner, expires_at)
      SELECT i.id, i.owner, i.version, i.record, i.runner, i.expires_at
        FROM unnest(p_ids, p_owners, p_versions, p_records, p_runners, p_expires)
          AS i(id, owner, version, record, runner, expires_at)
        ORDER BY i.id COLLATE "C";
    RETURN array_fill(0, ARRAY[coalesce(array_length(p_ids, 1), 0)]);
  END IF;
  FOR i IN 1 .. coalesce(array_length(p_ids, 1), 0) LOOP
    IF EXISTS (SELECT 1 FROM {s}.tasks t WHERE t.id = p_ids[i]) THEN
      code := -2;
    ELSIF NOT EXISTS (SELECT 1 FROM {s}.runners r
                      WHERE r.runner = p_leases[i] AND NOT r.claimed) THEN
      code := -1;
    ELSE
      SELECT coalesce(array_agg(p.pool ORDER BY p.n), '{}'),
             coalesce(array_agg(p.lim ORDER BY p.n), '{}')
        INTO mine, limits
        FROM unnest(p_item, p_pools, p_limits) WITH ORDINALITY AS p(item, pool, lim, n)
        WHERE p.item = i;
      code := {s}.take_locked(p_leases[i], p_seats[i], mine, limits);
      IF code = 0 THEN
        INSERT INTO {s}.tasks (id, owner, version, record, runner, expires_at)
          VALUES (p_ids[i], p_owners[i], p_versions[i], p_records[i], p_runners[i], p_expires[i]);
      END IF;
    END IF;
    codes := codes || code;
  END LOOP;
  RETURN codes;
END $$;

CREATE OR REPLACE FUNCTION {s}.swap_freeing_batch(p_ids text[], p_expected bigint[],
  p_owners text[], p_versions bigint[], p_records text[], p_runners text[], p_expires bigint[],
  p_seats text[], p_item int[], p_pools text[])
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  swapped text[];
BEGIN
  PERFORM 1 FROM {s}.tasks t WHERE t.id = ANY (p_ids) ORDER BY t.id FOR UPDATE;
  PERFORM {s}.lock_pools(p_pools);
  WITH u AS (
    UPDATE {s}.tasks t SET owner = i.owner, version = i.version, record = i.record,
        runner = i.runner, expires_at = i.expires_at
      FROM unnest(p_ids, p_expected, p_owners, p_versions, p_records, p_runners, p_expires)
        AS i(id, expected, owner, version, record, runner, expires_at)
      WHERE t.id = i.id AND t.version = i.expected
      RETURNING t.id::text AS id)
  SELECT coalesce(array_agg(u.id), '{}') INTO swapped FROM u;
  -- The seats of the tasks swapped, given up in their pools, whichever
  -- runner took them (as free_seats does for one).
  WITH f AS (SELECT DISTINCT e.pool, p_seats[e.item] AS seat
               FROM unnest(p_item, p_pools) AS e(item, pool)
               WHERE p_ids[e.item] = ANY (swapped)),
       d AS (DELETE FROM {s}.seats s USING f
               WHERE s.pool = f.pool AND s.seat = f.seat RETURNING s.pool),
       n AS (SELECT d.pool, count(*) AS freed FROM d GROUP BY d.pool)
  UPDATE {s}.pools p SET taken = p.taken - n.freed FROM n WHERE p.pool = n.pool;
  DELETE FROM {s}.pools p WHERE p.pool = ANY (p_pools) AND p.taken <= 0;
  PERFORM pg_notify({channel}, x) FROM unnest(swapped) AS x;
  IF array_length(swapped, 1) > 0 THEN PERFORM pg_notify({channel}, ''); END IF;
  RETURN QUERY SELECT unnest(swapped);
END $$;

-- Seated creations and freeing compare-and-sets that waited together, in
-- one transaction and one commit (each kind alone holds the pools it
-- shares with the other until its commit is on disk, so apart they commit
-- one after the other). The compare-and-sets' rows are locked first, then
-- every pool of both kinds in one order, as each kind alone does; then the
-- compare-and-sets (their seats freed first, so creations may take them)
-- and the creations. Returns the creations' codes (as
-- create_seated_batch's), then 1 for each compare-and-set that swapped and
-- 0 for one that did not.
CREATE FUNCTION {s}.seated_batch(p_ids text[], p_owners text[], p_versions bigint[],
  p_records text[], p_runners text[], p_expires bigint[], p_leases text[], p_seats text[],
  p_item int[], p_pools text[], p_limits bigint[],
  q_ids text[], q_expected bigint[], q_owners text[], q_versions bigint[], q_records text[],
  q_runners text[], q_expires bigint[], q_seats text[], q_item int[], q_pools text[])
RETURNS int[] LANGUAGE plpgsql AS $$
DECLARE
  swapped text[];
  codes int[];
BEGIN
  PERFORM 1 FROM {s}.tasks t WHERE t.id = ANY (q_ids) ORDER BY t.id FOR UPDATE;
  PERFORM {s}.lock_pools(p_pools || q_pools);
  SELECT coalesce(array_agg(x), '{}') INTO swapped
    FROM {s}.swap_freeing_batch(q_ids, q_expected, q_owners, q_versions, q_records,
                                q_runners, q_expires, q_seats, q_item, q_pools) AS x;
  codes := {s}.create_seated_batch(p_ids, p_owners, p_versions, p_records, p_runners,
                                   p_expires, p_leases, p_seats, p_item, p_pools, p_limits);
  RETURN codes || ARRAY(SELECT (q.id = ANY (swapped))::int
                          FROM unnest(q_ids) WITH ORDINALITY AS q(id, n) ORDER BY q.n);
END $$;
"#;

/// Seated creations, and compare-and-sets that free seats, in batches
/// (`batch.rs`).
const V2: &str = r#"
-- Creates the tasks of a batch, each as create_seated does (none with an
-- idempotency key): the pools of all of them locked first, in one order,
-- then each in turn. The i-th task's pools are the entries of p_pools (and
-- p_limits) whose p_item is i. Returns one code per task, as
-- create_seated's (0 created, -2 an existing id, -1 no lease, i the i-th of
-- its pools full).
CREATE FUNCTION {s}.create_seated_batch(p_ids text[], p_owners text[], p_versions bigint[],
  p_records text[], p_runners text[], p_expires bigint[], p_leases text[], p_seats text[],
  p_item int[], p_pools text[], p_limits bigint[])
RETURNS int[] LANGUAGE plpgsql AS $$
DECLARE
  codes int[] := '{}';
  code int;
  mine text[];
  limits bigint[];
BEGIN
  PERFORM {s}.lock_pools(p_pools);
  FOR i IN 1 .. coalesce(array_length(p_ids, 1), 0) LOOP
    IF EXISTS (SELECT 1 FROM {s}.tasks t WHERE t.id = p_ids[i]) THEN
      code := -2;
    ELSIF NOT EXISTS (SELECT 1 FROM {s}.runners r
                      WHERE r.runner = p_leases[i] AND NOT r.claimed) THEN
      code := -1;
    ELSE
      SELECT coalesce(array_agg(p.pool ORDER BY p.n), '{}'),
             coalesce(array_agg(p.lim ORDER BY p.n), '{}')
        INTO mine, limits
        FROM unnest(p_item, p_pools, p_limits) WITH ORDINALITY AS p(item, pool, lim, n)
        WHERE p.item = i;
      code := {s}.take_locked(p_leases[i], p_seats[i], mine, limits);
      IF code = 0 THEN
        INSERT INTO {s}.tasks (id, owner, version, record, runner, expires_at)
          VALUES (p_ids[i], p_owners[i], p_versions[i], p_records[i], p_runners[i], p_expires[i]);
      END IF;
    END IF;
    codes := codes || code;
  END LOOP;
  RETURN codes;
END $$;

-- Seat moves of a batch, each as move_seats does: every pool of the batch
-- locked first, in one order. The i-th move takes its seat in the entries
-- of p_take (with p_limits) whose p_take_item is i, and frees it in those
-- of p_free whose p_free_item is i. Returns one code per move, as
-- move_seats's.
CREATE FUNCTION {s}.move_seats_batch(p_runners text[], p_seats text[], p_take_item int[],
  p_take text[], p_limits bigint[], p_free_item int[], p_free text[])
RETURNS int[] LANGUAGE plpgsql AS $$
DECLARE
  codes int[] := '{}';
  take text[];
  limits bigint[];
  free text[];
BEGIN
  PERFORM {s}.lock_pools(p_take || p_free);
  FOR i IN 1 .. coalesce(array_length(p_seats, 1), 0) LOOP
    SELECT coalesce(array_agg(p.pool ORDER BY p.n), '{}'),
           coalesce(array_agg(p.lim ORDER BY p.n), '{}')
      INTO take, limits
      FROM unnest(p_take_item, p_take, p_limits) WITH ORDINALITY AS p(item, pool, lim, n)
      WHERE p.item = i;
    SELECT coalesce(array_agg(p.pool), '{}') INTO free
      FROM unnest(p_free_item, p_free) AS p(item, pool) WHERE p.item = i;
    codes := codes || {s}.move_seats(p_runners[i], p_seats[i], take, limits, free);
  END LOOP;
  RETURN codes;
END $$;

-- Compare-and-sets of a batch that free seats, each as swap does: the
-- tasks' rows locked in the ids' order, then every pool of the batch in
-- one order; each task that still has its expected version is replaced
-- and gives its seat up in its pools (the entries of p_pools whose p_item
-- is its index). The changes are announced in this transaction (one batch
-- in flight per store). Returns the ids swapped.
CREATE FUNCTION {s}.swap_freeing_batch(p_ids text[], p_expected bigint[], p_owners text[],
  p_versions bigint[], p_records text[], p_runners text[], p_expires bigint[],
  p_seats text[], p_item int[], p_pools text[])
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  swapped text[];
  mine text[];
BEGIN
  PERFORM 1 FROM {s}.tasks t WHERE t.id = ANY (p_ids) ORDER BY t.id FOR UPDATE;
  PERFORM {s}.lock_pools(p_pools);
  WITH u AS (
    UPDATE {s}.tasks t SET owner = i.owner, version = i.version, record = i.record,
        runner = i.runner, expires_at = i.expires_at
      FROM unnest(p_ids, p_expected, p_owners, p_versions, p_records, p_runners, p_expires)
        AS i(id, expected, owner, version, record, runner, expires_at)
      WHERE t.id = i.id AND t.version = i.expected
      RETURNING t.id::text AS id)
  SELECT coalesce(array_agg(u.id), '{}') INTO swapped FROM u;
  FOR i IN 1 .. coalesce(array_length(p_ids, 1), 0) LOOP
    IF p_ids[i] = ANY (swapped) THEN
      SELECT coalesce(array_agg(p.pool), '{}') INTO mine
        FROM unnest(p_item, p_pools) AS p(item, pool) WHERE p.item = i;
      PERFORM {s}.free_seats(p_seats[i], mine);
    END IF;
  END LOOP;
  PERFORM pg_notify({channel}, x) FROM unnest(swapped) AS x;
  IF array_length(swapped, 1) > 0 THEN PERFORM pg_notify({channel}, ''); END IF;
  RETURN QUERY SELECT unnest(swapped);
END $$;
"#;

/// The first schema.
const V1: &str = r#"
CREATE TABLE {s}.tasks (
  id text COLLATE "C" PRIMARY KEY,
  owner text COLLATE "C" NOT NULL,
  version bigint NOT NULL,
  record text NOT NULL,
  runner text,
  expires_at bigint,
  keyed text
);
CREATE INDEX tasks_owner ON {s}.tasks (owner, id);
CREATE INDEX tasks_expiry ON {s}.tasks (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX tasks_runner ON {s}.tasks (runner) WHERE runner IS NOT NULL;
CREATE UNIQUE INDEX tasks_keyed ON {s}.tasks (keyed) WHERE keyed IS NOT NULL;

CREATE TABLE {s}.meta (key text PRIMARY KEY, value text NOT NULL);

CREATE TABLE {s}.runners (
  runner text PRIMARY KEY,
  until bigint NOT NULL,
  claimed boolean NOT NULL DEFAULT false
);
CREATE INDEX runners_until ON {s}.runners (until) WHERE NOT claimed;

CREATE TABLE {s}.pools (pool text PRIMARY KEY, taken bigint NOT NULL);
CREATE TABLE {s}.seats (
  pool text NOT NULL,
  seat text NOT NULL,
  runner text NOT NULL,
  PRIMARY KEY (pool, seat)
);
CREATE INDEX seats_runner ON {s}.seats (runner);

CREATE TABLE {s}.sweeper (id int PRIMARY KEY, holder text NOT NULL, until bigint NOT NULL);

-- The database's clock, in Unix milliseconds: leases are measured by it,
-- so the replicas' clocks need not agree.
CREATE FUNCTION {s}.now_ms() RETURNS bigint LANGUAGE sql VOLATILE AS $$
  SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint
$$;

-- Renews a lease unless it was claimed. Its commit does not wait for the
-- disk (a renewal lost in a crash only makes the lease look older; the
-- next write that waits for the disk writes this one too), so renewals
-- stay quick while the disk is busy with the tasks' writes.
CREATE FUNCTION {s}.renew(p_runner text, p_hold bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  UPDATE {s}.runners r SET until = {s}.now_ms() + p_hold
    WHERE r.runner = p_runner AND NOT r.claimed;
  RETURN FOUND;
END $$;

-- Locks the pools given for the rest of the transaction, in one order.
CREATE FUNCTION {s}.lock_pools(p_pools text[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE k bigint;
BEGIN
  FOR k IN SELECT DISTINCT hashtextextended({schema_literal} || ':' || p, 0) AS k
           FROM unnest(p_pools) AS p ORDER BY k LOOP
    PERFORM pg_advisory_xact_lock(k);
  END LOOP;
END $$;

-- Whether every pool of p_pools has room for p_seat (fewer seats than the
-- limit beside it, or this seat already): 0, or i when the i-th pool (from
-- 1) is full. The caller locked the pools. Writes nothing.
CREATE FUNCTION {s}.seats_room(p_seat text, p_pools text[], p_limits bigint[])
RETURNS int LANGUAGE plpgsql AS $$
DECLARE i int;
BEGIN
  FOR i IN 1 .. coalesce(array_length(p_pools, 1), 0) LOOP
    IF NOT EXISTS (SELECT 1 FROM {s}.seats s WHERE s.pool = p_pools[i] AND s.seat = p_seat)
       AND coalesce((SELECT p.taken FROM {s}.pools p WHERE p.pool = p_pools[i]), 0) >= p_limits[i] THEN
      RETURN i;
    END IF;
  END LOOP;
  RETURN 0;
END $$;

-- Takes p_seat for p_runner in every pool of p_pools (the caller locked
-- them and found room).
CREATE FUNCTION {s}.seats_write(p_runner text, p_seat text, p_pools text[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE i int;
BEGIN
  FOR i IN 1 .. coalesce(array_length(p_pools, 1), 0) LOOP
    INSERT INTO {s}.seats (pool, seat, runner) VALUES (p_pools[i], p_seat, p_runner)
      ON CONFLICT DO NOTHING;
    IF FOUND THEN
      INSERT INTO {s}.pools (pool, taken) VALUES (p_pools[i], 1)
        ON CONFLICT (pool) DO UPDATE SET taken = {s}.pools.taken + 1;
    END IF;
  END LOOP;
END $$;

-- Takes p_seat for p_runner in every pool of p_pools with room, all or
-- nothing: 0 taken, else as seats_room (nothing written).
CREATE FUNCTION {s}.take_locked(p_runner text, p_seat text, p_pools text[], p_limits bigint[])
RETURNS int LANGUAGE plpgsql AS $$
DECLARE room int;
BEGIN
  room := {s}.seats_room(p_seat, p_pools, p_limits);
  IF room = 0 THEN PERFORM {s}.seats_write(p_runner, p_seat, p_pools); END IF;
  RETURN room;
END $$;

-- Gives p_seat up in every pool of p_pools that holds it, whichever runner
-- took it (the caller announces a freeing once it committed).
CREATE FUNCTION {s}.free_seats(p_seat text, p_pools text[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE freed text[];
BEGIN
  IF coalesce(array_length(p_pools, 1), 0) = 0 THEN RETURN; END IF;
  PERFORM {s}.lock_pools(p_pools);
  WITH d AS (DELETE FROM {s}.seats s WHERE s.seat = p_seat AND s.pool = ANY (p_pools) RETURNING s.pool)
  SELECT array_agg(d.pool) INTO freed FROM d;
  IF freed IS NULL THEN RETURN; END IF;
  UPDATE {s}.pools p SET taken = p.taken - 1 WHERE p.pool = ANY (freed);
  DELETE FROM {s}.pools p WHERE p.pool = ANY (freed) AND p.taken <= 0;
END $$;

-- Whether p_runner holds a lease (one not claimed). No lock is taken: a
-- seat taken while the lease is claimed (a race of a moment) belongs to a
-- claimed runner, and the next claim's sweep frees it with the others.
CREATE FUNCTION {s}.leased(p_runner text) RETURNS boolean LANGUAGE sql STABLE AS $$
  SELECT EXISTS (SELECT 1 FROM {s}.runners r WHERE r.runner = p_runner AND NOT r.claimed)
$$;

-- Takes p_seat in the pools of p_take (all or nothing) and gives it up in
-- those of p_free. Returns 0 done, i when the i-th pool to take is full, -1
-- when the runner holds no lease (taking needs one; freeing alone does not).
CREATE FUNCTION {s}.move_seats(p_runner text, p_seat text, p_take text[], p_limits bigint[], p_free text[])
RETURNS int LANGUAGE plpgsql AS $$
DECLARE taken int;
BEGIN
  IF coalesce(array_length(p_take, 1), 0) > 0 THEN
    IF NOT {s}.leased(p_runner) THEN RETURN -1; END IF;
    PERFORM {s}.lock_pools(p_take || p_free);
    taken := {s}.take_locked(p_runner, p_seat, p_take, p_limits);
    IF taken <> 0 THEN RETURN taken; END IF;
  END IF;
  PERFORM {s}.free_seats(p_seat, p_free);
  RETURN 0;
END $$;

-- Creates a task unless a task holds its idempotency slot. Returns 0
-- created, 1 with the task holding the slot, 2 for an existing id.
CREATE FUNCTION {s}.create_keyed(p_id text, p_owner text, p_version bigint, p_record text,
  p_runner text, p_expires bigint, p_keyed text)
RETURNS TABLE (o_code int, o_id text, o_version bigint, o_record text) LANGUAGE plpgsql AS $$
BEGIN
  IF p_keyed IS NOT NULL THEN
    PERFORM pg_advisory_xact_lock(hashtextextended({schema_literal} || ':keyed:' || p_keyed, 0));
    RETURN QUERY SELECT 1, t.id::text, t.version, t.record FROM {s}.tasks t WHERE t.keyed = p_keyed;
    IF FOUND THEN RETURN; END IF;
  END IF;
  INSERT INTO {s}.tasks (id, owner, version, record, runner, expires_at, keyed)
    VALUES (p_id, p_owner, p_version, p_record, p_runner, p_expires, p_keyed)
    ON CONFLICT (id) DO NOTHING;
  IF FOUND THEN
    RETURN QUERY SELECT 0, NULL::text, NULL::bigint, NULL::text;
  ELSE
    RETURN QUERY SELECT 2, NULL::text, NULL::bigint, NULL::text;
  END IF;
END $$;

-- Whether a seated creation of task p_id (idempotency slot p_keyed, or
-- NULL) may go on for runner p_lease: 0, -2 for an existing id, -3 when a
-- task holds the slot, -1 when the runner holds no lease. Locks the slot
-- for the rest of the transaction.
CREATE FUNCTION {s}.creatable(p_id text, p_keyed text, p_lease text)
RETURNS int LANGUAGE plpgsql AS $$
BEGIN
  IF p_keyed IS NOT NULL THEN
    PERFORM pg_advisory_xact_lock(hashtextextended({schema_literal} || ':keyed:' || p_keyed, 0));
  END IF;
  IF EXISTS (SELECT 1 FROM {s}.tasks t WHERE t.id = p_id) THEN RETURN -2; END IF;
  IF p_keyed IS NOT NULL AND EXISTS (SELECT 1 FROM {s}.tasks t WHERE t.keyed = p_keyed) THEN
    RETURN -3;
  END IF;
  IF NOT {s}.leased(p_lease) THEN RETURN -1; END IF;
  RETURN 0;
END $$;

-- Takes seats as move_seats does and creates the task only when they were
-- taken. Returns 0 created, -2 for an existing id, -3 when a task holds the
-- idempotency slot (nothing taken either way), else as move_seats.
CREATE FUNCTION {s}.create_seated(p_id text, p_owner text, p_version bigint, p_record text,
  p_runner text, p_expires bigint, p_keyed text,
  p_lease text, p_seat text, p_pools text[], p_limits bigint[])
RETURNS int LANGUAGE plpgsql AS $$
DECLARE room int;
DECLARE taken int;
BEGIN
  room := {s}.creatable(p_id, p_keyed, p_lease);
  IF room <> 0 THEN RETURN room; END IF;
  PERFORM {s}.lock_pools(p_pools);
  taken := {s}.take_locked(p_lease, p_seat, p_pools, p_limits);
  IF taken <> 0 THEN RETURN taken; END IF;
  INSERT INTO {s}.tasks (id, owner, version, record, runner, expires_at, keyed)
    VALUES (p_id, p_owner, p_version, p_record, p_runner, p_expires, p_keyed);
  RETURN 0;
END $$;

-- Compare-and-set: replaces the task if it still has p_expected, and then
-- gives p_seat up in p_free (when given); the caller announces the change
-- once it committed. Returns 2 swapped, 1 with the current version and
-- record on a conflict, 0 when missing.
CREATE FUNCTION {s}.swap(p_id text, p_expected bigint, p_owner text, p_version bigint,
  p_record text, p_runner text, p_expires bigint, p_seat text, p_free text[])
RETURNS TABLE (o_code int, o_version bigint, o_record text) LANGUAGE plpgsql AS $$
BEGIN
  UPDATE {s}.tasks t SET owner = p_owner, version = p_version, record = p_record,
      runner = p_runner, expires_at = p_expires
    WHERE t.id = p_id AND t.version = p_expected;
  IF FOUND THEN
    IF p_seat IS NOT NULL THEN PERFORM {s}.free_seats(p_seat, p_free); END IF;
    RETURN QUERY SELECT 2, NULL::bigint, NULL::text;
    RETURN;
  END IF;
  RETURN QUERY SELECT 1, t.version, t.record FROM {s}.tasks t WHERE t.id = p_id;
  IF NOT FOUND THEN RETURN QUERY SELECT 0, NULL::bigint, NULL::text; END IF;
END $$;

-- Claims the leases that ran out, frees every seat held by a runner
-- without a lease (claimed now or before, or forgotten: a seat a take wrote
-- while its runner was being claimed is freed here too), lists at most
-- p_limit unfinished tasks of claimed runners, and forgets claimed runners
-- with none left.
CREATE FUNCTION {s}.orphans(p_limit int)
RETURNS TABLE (o_id text, o_runner text) LANGUAGE plpgsql AS $$
DECLARE pools text[];
BEGIN
  UPDATE {s}.runners r SET claimed = true
    WHERE r.runner IN (SELECT x.runner FROM {s}.runners x
                       WHERE NOT x.claimed AND x.until < {s}.now_ms()
                       ORDER BY x.until LIMIT 64 FOR UPDATE SKIP LOCKED);
  SELECT array_agg(DISTINCT s.pool) INTO pools FROM {s}.seats s
    WHERE NOT {s}.leased(s.runner);
  IF pools IS NOT NULL THEN
    PERFORM {s}.lock_pools(pools);
    WITH d AS (DELETE FROM {s}.seats s WHERE s.pool = ANY (pools) AND NOT {s}.leased(s.runner)
               RETURNING s.pool),
         n AS (SELECT d.pool, count(*) AS freed FROM d GROUP BY d.pool)
    UPDATE {s}.pools p SET taken = p.taken - n.freed FROM n WHERE p.pool = n.pool;
    DELETE FROM {s}.pools p WHERE p.pool = ANY (pools) AND p.taken <= 0;
    PERFORM pg_notify({channel}, '');
  END IF;
  DELETE FROM {s}.rate_buckets b WHERE b.tat < {s}.now_us();
  RETURN QUERY SELECT t.id::text, t.runner FROM {s}.tasks t
    WHERE t.runner IN (SELECT r.runner FROM {s}.runners r WHERE r.claimed)
    LIMIT p_limit;
  -- SKIP LOCKED: two replicas forgetting at once never wait for each other
  -- (each would hold rows the other wants: a deadlock).
  DELETE FROM {s}.runners r WHERE r.runner IN (
    SELECT x.runner FROM {s}.runners x WHERE x.claimed
      AND NOT EXISTS (SELECT 1 FROM {s}.tasks t WHERE t.runner = x.runner)
    FOR UPDATE SKIP LOCKED);
END $$;

-- Announces changes (task ids, or the empty payload: seats were freed) on
-- the change feed's channel, in a transaction of its own that does not wait
-- for the disk: a NOTIFY holds a lock of the whole database from its
-- commit's start to its end, so one in each write's transaction would make
-- every write wait for the disk one after the other.
CREATE FUNCTION {s}.announce(p_ids text[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  PERFORM pg_notify({channel}, x) FROM unnest(p_ids) AS x;
END $$;

-- Creation rates (GCRA): one bucket per row, its theoretical arrival time
-- in microseconds of the database's clock; a row whose time passed means
-- the same as none, and the claims' sweep deletes it.
CREATE TABLE {s}.rate_buckets (bucket text PRIMARY KEY, tat bigint NOT NULL);

CREATE FUNCTION {s}.now_us() RETURNS bigint LANGUAGE sql VOLATILE AS $$
  SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint
$$;

-- One take from bucket p_bucket with emission interval p_interval (us) and
-- burst p_burst: 0 counted, else how long to wait (us), nothing counted.
CREATE FUNCTION {s}.take_rate(p_bucket text, p_interval bigint, p_burst bigint)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE v_now bigint := {s}.now_us();
DECLARE v_tat bigint;
DECLARE v_over bigint;
BEGIN
  INSERT INTO {s}.rate_buckets AS b (bucket, tat) VALUES (p_bucket, 0)
    ON CONFLICT (bucket) DO UPDATE SET tat = b.tat
    RETURNING b.tat INTO v_tat;
  v_tat := greatest(v_tat, v_now);
  v_over := v_tat - v_now - p_interval * (greatest(p_burst, 1) - 1);
  IF v_over > 0 THEN RETURN v_over; END IF;
  UPDATE {s}.rate_buckets b SET tat = v_tat + p_interval WHERE b.bucket = p_bucket;
  RETURN 0;
END $$;

-- Fair turns at the running seats (mcp_tasks::store::FairTurn states the
-- rules): each caller's served count (a caller is the pool of its queued
-- seats, and waits while that pool holds a seat; rows of callers that do
-- not wait are kept only above last), and one row: last, since when a
-- free seat was held back, and when it was last written (all of it is
-- forgotten ten minutes after that, and whenever no caller waits). Every
-- turn is decided under one advisory lock, after the pools' locks.
CREATE TABLE {s}.fair_callers (
  caller text PRIMARY KEY,
  served bigint NOT NULL,
  waiting boolean NOT NULL
);
CREATE INDEX fair_callers_waiting ON {s}.fair_callers (served, caller) WHERE waiting;
CREATE TABLE {s}.fair_state (
  id int PRIMARY KEY CHECK (id = 1),
  last bigint NOT NULL,
  held bigint,
  touched bigint NOT NULL
);

-- The turn of a take by caller p_caller (p_gate 0: a take that queues,
-- else the 1-based index of the shared pool), decided before any seat is
-- written: go false when it is not the caller's turn (the hold is started
-- then), else what fair_after writes once the seats are taken.
CREATE FUNCTION {s}.fair_turn(p_caller text, p_gate int, p_patience bigint,
  OUT o_go boolean, OUT o_joins bigint, OUT o_least bigint, OUT o_mine bigint)
LANGUAGE plpgsql AS $$
DECLARE v_now bigint := {s}.now_ms();
DECLARE v_last bigint;
DECLARE v_held bigint;
DECLARE v_waits boolean;
DECLARE v_in bigint;
DECLARE v_idle bigint;
DECLARE v_earned bigint;
DECLARE v_low record;
BEGIN
  o_go := true;
  IF p_gate <> 0 AND NOT EXISTS (SELECT 1 FROM {s}.fair_callers c WHERE c.waiting) THEN
    RETURN;
  END IF;
  PERFORM pg_advisory_xact_lock(hashtextextended({schema_literal} || ':fair', 0));
  DELETE FROM {s}.fair_state f WHERE f.touched < v_now - 600000;
  IF FOUND THEN DELETE FROM {s}.fair_callers; END IF;
  SELECT f.last, f.held INTO v_last, v_held FROM {s}.fair_state f;
  v_last := coalesce(v_last, 0);
  v_waits := EXISTS (SELECT 1 FROM {s}.seats s WHERE s.pool = p_caller);
  SELECT c.served INTO v_in FROM {s}.fair_callers c WHERE c.caller = p_caller AND c.waiting;
  SELECT c.served INTO v_idle FROM {s}.fair_callers c WHERE c.caller = p_caller AND NOT c.waiting;
  v_earned := greatest(coalesce(v_in, v_idle, 0), v_last);
  IF p_gate = 0 THEN
    IF NOT v_waits OR v_in IS NULL THEN o_joins := v_earned; END IF;
    RETURN;
  END IF;
  LOOP
    SELECT c.caller, c.served INTO v_low FROM {s}.fair_callers c
      WHERE c.waiting ORDER BY c.served, c.caller LIMIT 1;
    IF NOT FOUND THEN
      DELETE FROM {s}.fair_callers;
      DELETE FROM {s}.fair_state;
      RETURN;
    END IF;
    EXIT WHEN EXISTS (SELECT 1 FROM {s}.seats s WHERE s.pool = v_low.caller);
    IF v_low.served > v_last THEN
      UPDATE {s}.fair_callers c SET waiting = false WHERE c.caller = v_low.caller;
    ELSE
      DELETE FROM {s}.fair_callers c WHERE c.caller = v_low.caller;
    END IF;
  END LOOP;
  o_least := v_low.served;
  o_mine := CASE WHEN v_waits AND v_in IS NOT NULL THEN v_in ELSE v_earned END;
  IF o_mine <= o_least THEN RETURN; END IF;
  IF v_held IS NOT NULL AND v_now - v_held >= p_patience THEN RETURN; END IF;
  IF v_held IS NULL THEN
    INSERT INTO {s}.fair_state AS f (id, last, held, touched) VALUES (1, v_last, v_now, v_now)
      ON CONFLICT (id) DO UPDATE SET held = v_now, touched = v_now;
  END IF;
  o_go := false;
  o_least := NULL;
  o_mine := NULL;
END $$;

-- What a take that went writes of the turn (see fair_turn).
CREATE FUNCTION {s}.fair_after(p_caller text, p_share bigint, p_joins bigint,
  p_least bigint, p_mine bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE v_now bigint := {s}.now_ms();
DECLARE v_served bigint := p_mine + p_share;
BEGIN
  IF p_joins IS NOT NULL THEN
    INSERT INTO {s}.fair_callers AS c (caller, served, waiting) VALUES (p_caller, p_joins, true)
      ON CONFLICT (caller) DO UPDATE SET served = p_joins, waiting = true;
  ELSIF p_least IS NOT NULL THEN
    INSERT INTO {s}.fair_state AS f (id, last, held, touched) VALUES (1, p_mine, NULL, v_now)
      ON CONFLICT (id) DO UPDATE SET last = p_mine,
        held = CASE WHEN p_mine <= p_least THEN NULL ELSE f.held END;
    IF EXISTS (SELECT 1 FROM {s}.seats s WHERE s.pool = p_caller) THEN
      INSERT INTO {s}.fair_callers AS c (caller, served, waiting) VALUES (p_caller, v_served, true)
        ON CONFLICT (caller) DO UPDATE SET served = v_served, waiting = true;
    ELSE
      DELETE FROM {s}.fair_callers c WHERE c.caller = p_caller AND c.waiting;
      IF NOT EXISTS (SELECT 1 FROM {s}.fair_callers c WHERE c.waiting) THEN
        DELETE FROM {s}.fair_callers;
        DELETE FROM {s}.fair_state;
        RETURN;
      END IF;
      INSERT INTO {s}.fair_callers AS c (caller, served, waiting) VALUES (p_caller, v_served, false)
        ON CONFLICT (caller) DO UPDATE SET served = v_served, waiting = false;
    END IF;
    DELETE FROM {s}.fair_callers c WHERE NOT c.waiting AND c.served <= p_mine;
  ELSE
    RETURN;
  END IF;
  INSERT INTO {s}.fair_state AS f (id, last, held, touched) VALUES (1, 0, NULL, v_now)
    ON CONFLICT (id) DO UPDATE SET touched = v_now;
END $$;

-- create_seated with a fair turn: a turn not come yet answers p_gate, as a
-- full pool would.
CREATE FUNCTION {s}.create_seated_fairly(p_id text, p_owner text, p_version bigint,
  p_record text, p_runner text, p_expires bigint, p_keyed text,
  p_lease text, p_seat text, p_pools text[], p_limits bigint[],
  p_caller text, p_share bigint, p_gate int, p_patience bigint)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE room int;
DECLARE turn record;
BEGIN
  room := {s}.creatable(p_id, p_keyed, p_lease);
  IF room <> 0 THEN RETURN room; END IF;
  PERFORM {s}.lock_pools(p_pools);
  room := {s}.seats_room(p_seat, p_pools, p_limits);
  IF room <> 0 THEN RETURN room; END IF;
  SELECT * INTO turn FROM {s}.fair_turn(p_caller, p_gate, p_patience);
  IF NOT turn.o_go THEN RETURN p_gate; END IF;
  PERFORM {s}.seats_write(p_lease, p_seat, p_pools);
  PERFORM {s}.fair_after(p_caller, p_share, turn.o_joins, turn.o_least, turn.o_mine);
  INSERT INTO {s}.tasks (id, owner, version, record, runner, expires_at, keyed)
    VALUES (p_id, p_owner, p_version, p_record, p_runner, p_expires, p_keyed);
  RETURN 0;
END $$;

-- move_seats with a fair turn and at least one pool to take.
CREATE FUNCTION {s}.move_seats_fairly(p_runner text, p_seat text, p_take text[],
  p_limits bigint[], p_free text[], p_caller text, p_share bigint, p_gate int, p_patience bigint)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE room int;
DECLARE turn record;
BEGIN
  IF NOT {s}.leased(p_runner) THEN RETURN -1; END IF;
  PERFORM {s}.lock_pools(p_take || p_free);
  room := {s}.seats_room(p_seat, p_take, p_limits);
  IF room <> 0 THEN RETURN room; END IF;
  SELECT * INTO turn FROM {s}.fair_turn(p_caller, p_gate, p_patience);
  IF NOT turn.o_go THEN RETURN p_gate; END IF;
  PERFORM {s}.seats_write(p_runner, p_seat, p_take);
  PERFORM {s}.free_seats(p_seat, p_free);
  PERFORM {s}.fair_after(p_caller, p_share, turn.o_joins, turn.o_least, turn.o_mine);
  RETURN 0;
END $$;
"#;

/// What a schema's migration did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Migrated {
    /// The schema's version before (0: there was none).
    pub from: i32,
    /// Its version now: this binary's.
    pub to: i32,
}

/// `sql` for schema `schema`, whose change feed is `channel`.
pub(crate) fn render(sql: &str, schema: &str, channel: &str) -> String {
    sql.replace("{s}", &format!("\"{schema}\""))
        .replace("{schema_literal}", &format!("'{schema}'"))
        .replace("{channel}", &format!("'{channel}'"))
}

/// The schema's version: 0 when it has none.
pub(crate) async fn version(client: &Client, schema: &str) -> Result<i32, StoreError> {
    let table = format!("\"{schema}\".migrations");
    let row = client
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&table])
        .await
        .map_err(|error| failure("PostgreSQL could not read the schema's version", error))?;
    if !row.get::<_, bool>(0) {
        return Ok(0);
    }
    let row = client
        .query_one(
            &format!("SELECT coalesce(max(version), 0) FROM {table}"),
            &[],
        )
        .await
        .map_err(|error| failure("PostgreSQL could not read the schema's version", error))?;
    Ok(row.get(0))
}

/// Refuses a schema newer than this binary's.
pub(crate) fn check_not_newer(schema: &str, found: i32) -> Result<(), StoreError> {
    if found > VERSION {
        return Err(StoreError::msg(format!(
            "the PostgreSQL schema {schema:?} is at version {found}, newer than this \
             binary's {VERSION}: a newer mcp-tasks migrated it; run that version (or newer)"
        )));
    }
    Ok(())
}

/// Brings the schema to this binary's version, applying what is missing
/// in one transaction under an advisory lock (replicas starting at once
/// apply each migration once).
pub(crate) async fn migrate(
    client: &mut Client,
    schema: &str,
    channel: &str,
) -> Result<Migrated, StoreError> {
    let failed = |error| failure("PostgreSQL could not migrate the schema", error);
    let transaction = client.transaction().await.map_err(failed)?;
    transaction
        .execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
            &[&format!("{schema}:migrate")],
        )
        .await
        .map_err(failed)?;
    transaction
        .batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS \"{schema}\";
             CREATE TABLE IF NOT EXISTS \"{schema}\".migrations (
               version int PRIMARY KEY,
               applied_at timestamptz NOT NULL DEFAULT now()
             );"
        ))
        .await
        .map_err(failed)?;
    let from: i32 = transaction
        .query_one(
            &format!("SELECT coalesce(max(version), 0) FROM \"{schema}\".migrations"),
            &[],
        )
        .await
        .map_err(failed)?
        .get(0);
    check_not_newer(schema, from)?;
    for (version, sql) in MIGRATIONS.iter().filter(|(version, _)| *version > from) {
        transaction
            .batch_execute(&render(sql, schema, channel))
            .await
            .map_err(failed)?;
        transaction
            .execute(
                &format!("INSERT INTO \"{schema}\".migrations (version) VALUES ($1)"),
                &[version],
            )
            .await
            .map_err(failed)?;
    }
    transaction.commit().await.map_err(failed)?;
    Ok(Migrated { from, to: VERSION })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_migration_is_this_binarys_version_and_every_placeholder_is_filled() {
        assert_eq!(
            MIGRATIONS.last().map(|(version, _)| *version),
            Some(VERSION)
        );
        assert!(MIGRATIONS.windows(2).all(|pair| pair[0].0 < pair[1].0));
        for (_, migration) in MIGRATIONS {
            let sql = render(migration, "mcp_tasks", "mcp_tasks_changes");
            assert!(
                !sql.contains("{s}")
                    && !sql.contains("{channel}")
                    && !sql.contains("{schema_literal}")
            );
        }
        let sql = render(V1, "mcp_tasks", "mcp_tasks_changes");
        assert!(sql.contains("pg_notify('mcp_tasks_changes', x)"));
        assert!(check_not_newer("s", VERSION + 1).is_err());
        assert!(check_not_newer("s", VERSION).is_ok());
    }

    /// A migration a released binary applied is history: a schema already
    /// at its version never runs it again, so a change to its text would
    /// reach new schemas only (a function added to version 2 would be
    /// missing from every schema an older binary brought to 2). Change the
    /// next version instead.
    #[test]
    fn released_migrations_never_change() {
        let fnv = |text: &str| {
            text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
                (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
            })
        };
        assert_eq!(
            (fnv(V1), V1.len()),
            (0x59e3_9b54_2472_38f9, 20_198),
            "version 1 changed"
        );
        assert_eq!(
            (fnv(V2), V2.len()),
            (0xd9de_0c4a_aa80_3081, 4_673),
            "version 2 changed"
        );
    }
}
