//! The Lua scripts behind every write: each runs atomically in Redis, so a
//! record, its indexes and its announcement change together.
//!
//! Keys under the prefix `P`: `P task:ID` (a hash: `v` the version, `r` the
//! record's JSON, `o` its runner, `w` its owner, `i` set once its id is in
//! its owner's set and in `P all`), `P expiry` (a sorted set
//! of ids by `expires_at`), `P owner:OWNER` (the ids of an owner's records,
//! a sorted set with every score 0, so in byte order: `ZRANGEBYLEX` reads
//! it from any id on), `P runners` (a sorted set of runners by the end of
//! their lease, in Redis's clock), `P claimed` (runners whose lease ran out
//! and was claimed), `P runner:RUNNER` (the unfinished tasks of a runner),
//! `P seats:POOL` (a seat pool: a hash of seat to the runner holding it,
//! `POOL` the first 32 hex digits of the SHA-256 of the pool's name),
//! `P held:RUNNER` (a runner's seats, as a set of `POOL` followed by the
//! seat), `P all` (the ids of every record, as the owner sets are, for
//! the admin command's listing), `P keyed:SLOT` (the id of the record
//! created under an idempotency key, `SLOT` the hex SHA-256 of its owner
//! and key, kept as long as the record: see `TaskStore::create_keyed`; the
//! record's hash names it in `k`, and a look-up checks that the record
//! still does), `P rate:ID` (a creation-rate bucket: its theoretical
//! arrival time in microseconds of Redis's clock, expiring when it passes;
//! `ID` as a pool's, from the bucket's name), `P fair:waiting`,
//! `P fair:idle` and `P fair:state` (the fair turns at the running seats,
//! see [`FAIR`]), and the channel `P changes` (ids of changed tasks, or the empty
//! string when seats were freed). Empty hashes and sets are dropped by
//! Redis, so pools and runners without seats cost nothing. The scripts build the
//! keys they derive from the prefix, so the store needs one Redis node (a
//! primary with replicas is fine; Redis Cluster is not supported).
//!
//! Redis may drop a record by itself (`expiry_grace` after its
//! `expiresAt`), which leaves its id in the owner's set and in `P all`:
//! [`LIST_OWNED`] and [`LIST_ALL`] skip and remove such ids, and an owner's set expires no sooner than
//! the last of its records ([`KEEP_OWNED`]), so with no server running
//! Redis's memory stays bounded as before.

use std::sync::LazyLock;

use mcp_tasks::store::STORED_NAME_LEN as POOL_ID_LEN;
use redis::Script;

/// Enters an id in its owner's set, which then lives at least as long as
/// the record: `keep_owned(key, id, keep_ms or '', listed)`, `listed` true
/// when the record says the set holds its id already (field `i`), which
/// skips the `ZADD` unless the set is gone. A set that holds a record
/// without expiry never expires (until it is empty). A set whose expiry is
/// lengthened gets an eighth more than it needs, so that the writes that
/// follow for a while (an owner creating task after task) leave its expiry
/// alone: one read (`PTTL`, which also tells a missing set) per write, the
/// `ZADD` when the id is new to the set, and now and then a `PEXPIRE`.
const KEEP_OWNED: &str = r"
local function keep_owned(key, id, keep, listed)
  local left = redis.call('PTTL', key)
  if not listed or left == -2 then redis.call('ZADD', key, 0, id) end
  if keep == '' then
    if left ~= -2 then redis.call('PERSIST', key) end
  elseif left == -2 or (left >= 0 and left < tonumber(keep)) then
    local ms = tonumber(keep)
    if ms < 1e15 then keep = string.format('%d', ms + math.floor(ms / 8)) end
    redis.call('PEXPIRE', key, keep)
  end
end
";

/// The record holding an idempotency slot, if it still does:
/// `keyed_live(prefix, slot)` returns `{id, version, record}` or nil.
const KEYED_LIVE: &str = r"
local function keyed_live(prefix, slot)
  if slot == '' then return nil end
  local id = redis.call('GET', prefix .. 'keyed:' .. slot)
  if not id then return nil end
  local record = redis.call('HMGET', prefix .. 'task:' .. id, 'v', 'r', 'k')
  if record[1] and record[3] == slot then return {id, record[1], record[2]} end
  return nil
end
";

/// Writes a new record (whose id the caller checked is free) and its
/// indexes. KEYS[1..3] and ARGV[1..10] as [`CREATE`]'s.
///
/// A creation is not published on the change feed: no other replica can
/// hold the record in its cache nor wait for it before it exists (its id
/// is answered to no one until the script returned), so every replica's
/// feed would carry a message that changes nothing. The creating store
/// announces it on its own feed (see `RedisStore::created`).
const CREATE_RECORD: &str = r"
local fields = {'v', ARGV[3], 'r', ARGV[2], 'w', ARGV[9], 'i', '1'}
if ARGV[10] ~= '' then
  local keyed = ARGV[8] .. 'keyed:' .. ARGV[10]
  fields[#fields + 1] = 'k'
  fields[#fields + 1] = ARGV[10]
  redis.call('SET', keyed, ARGV[1])
  if ARGV[5] ~= '' then redis.call('PEXPIRE', keyed, ARGV[5]) end
end
if ARGV[6] ~= '' then
  fields[#fields + 1] = 'o'
  fields[#fields + 1] = ARGV[6]
  if ARGV[7] == '0' then redis.call('SADD', ARGV[8] .. 'runner:' .. ARGV[6], ARGV[1]) end
end
redis.call('HSET', KEYS[1], unpack(fields))
if ARGV[4] ~= '' then redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1]) end
if ARGV[5] ~= '' then redis.call('PEXPIRE', KEYS[1], ARGV[5]) end
keep_owned(KEYS[3], ARGV[1], ARGV[5], false)
redis.call('ZADD', ARGV[8] .. 'all', 0, ARGV[1])
";

/// Creates a record unless its id exists. KEYS: task, expiry, owned.
/// ARGV: id, record, version, expires_at or '', keep_ms or '', runner or
/// '', finished ('1' or '0'), prefix, owner, idempotency slot or ''.
/// Returns 1, or 0 for an existing id.
pub(crate) static CREATE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        r"{KEEP_OWNED}
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
{CREATE_RECORD}
return 1
"
    ))
});

/// [`CREATE`] unless a record holds the new record's idempotency slot.
/// KEYS and ARGV as [`CREATE`]'s. Returns {0} created, {1, id, version,
/// record} for the record holding the slot, {2} for an existing id.
pub(crate) static CREATE_KEYED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        r"{KEEP_OWNED}{KEYED_LIVE}
local live = keyed_live(ARGV[8], ARGV[10])
if live then return {{1, live[1], live[2], live[3]}} end
if redis.call('EXISTS', KEYS[1]) == 1 then return {{2}} end
{CREATE_RECORD}
return {{0}}
"
    ))
});

/// The record holding an idempotency slot. ARGV: prefix, slot. Returns
/// {id, version, record} or {}.
pub(crate) static FIND_KEYED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        r"{KEYED_LIVE}
return keyed_live(ARGV[1], ARGV[2]) or {{}}
"
    ))
});

/// Takes a seat in pools, all or nothing, in two halves (a fair turn is
/// decided between them): `seats_room(runners, runner, seat, first_key,
/// first_arg, n)` reads the `n` pool keys from `KEYS[first_key]` on and
/// their limit and pool id from `ARGV[first_arg]` on (limit, id, limit,
/// id...) and returns 0 when every pool has room, `i` when the `i`-th pool
/// (from 1) is full, -1 when the runner holds no lease, writing nothing;
/// `seats_write(held, runner, seat, first_key, first_arg, n)` then takes
/// the seats. `take_seats(runners, held, ...)` does both.
const TAKE_SEATS: &str = r"
local function seats_room(runners, runner, seat, first_key, first_arg, n)
  if not redis.call('ZSCORE', runners, runner) then return -1 end
  for i = 1, n do
    local pool = KEYS[first_key + i - 1]
    if redis.call('HEXISTS', pool, seat) == 0
      and redis.call('HLEN', pool) >= tonumber(ARGV[first_arg + 2 * i - 2]) then
      return i
    end
  end
  return 0
end
local function seats_write(held, runner, seat, first_key, first_arg, n)
  for i = 1, n do
    if redis.call('HSETNX', KEYS[first_key + i - 1], seat, runner) == 1 then
      redis.call('SADD', held, ARGV[first_arg + 2 * i - 1] .. seat)
    end
  end
end
local function take_seats(runners, held, runner, seat, first_key, first_arg, n)
  local room = seats_room(runners, runner, seat, first_key, first_arg, n)
  if room ~= 0 then return room end
  seats_write(held, runner, seat, first_key, first_arg, n)
  return 0
end
";

/// Fair turns at the running seats (`mcp_tasks::store::FairTurn` states
/// the rules). Keys: `P fair:waiting` (a sorted set of the callers that
/// wait, by served count; a caller is the pool id of its queued seats,
/// and waits while `P seats:ID` exists), `P fair:idle` (the same for
/// callers that do not wait, kept only above `last`), `P fair:state` (a
/// hash: `last`, and `held`, the Redis time in ms since when a free seat
/// was held back). All three expire [`FAIR_KEEP_MS`] after their last
/// write, and are deleted whenever no caller waits.
///
/// `fair_args(first_key, first_arg, prefix)` reads the keys waiting, idle,
/// state and the caller's pool from `KEYS[first_key]` on, and the caller's
/// pool id, share, gate (0 for a take that queues, else the 1-based index
/// of the shared pool among those taken) and patience in ms from
/// `ARGV[first_arg]` on. `fair_turn(f)`, before any seat is written,
/// decides: `{go = false}` when it is not the caller's turn (then `held` is
/// set if it was not), else what `fair_after(f, turn)` writes once the
/// seats are taken and freed. A take of running seats while no caller
/// waits costs one `EXISTS` and writes nothing.
const FAIR: &str = r"
local function fair_args(first_key, first_arg, prefix)
  return {w = KEYS[first_key], i = KEYS[first_key + 1], s = KEYS[first_key + 2],
    pool = KEYS[first_key + 3], id = ARGV[first_arg], share = tonumber(ARGV[first_arg + 1]),
    gate = tonumber(ARGV[first_arg + 2]), patience = tonumber(ARGV[first_arg + 3]),
    prefix = prefix}
end
local function fair_keep(f)
  for _, key in ipairs({f.w, f.i, f.s}) do redis.call('PEXPIRE', key, FAIR_KEEP_MS) end
end
local function fair_number(x) return string.format('%d', x) end
local function fair_score(key, id)
  local score = redis.call('ZSCORE', key, id)
  if score then return tonumber(score) end
  return nil
end
local function fair_least(f, last)
  while true do
    local low = redis.call('ZRANGE', f.w, 0, 0, 'WITHSCORES')
    if #low == 0 then
      redis.call('DEL', f.i, f.s)
      return nil
    end
    if redis.call('EXISTS', f.prefix .. 'seats:' .. low[1]) == 1 then return tonumber(low[2]) end
    redis.call('ZREM', f.w, low[1])
    if tonumber(low[2]) > last then redis.call('ZADD', f.i, low[2], low[1]) end
  end
end
local function fair_turn(f)
  local turn = {go = true}
  if f.gate ~= 0 and redis.call('EXISTS', f.w) == 0 then return turn end
  local last = tonumber(redis.call('HGET', f.s, 'last') or '0')
  local waits = redis.call('EXISTS', f.pool) == 1
  local in_w = fair_score(f.w, f.id)
  local earned = math.max(in_w or fair_score(f.i, f.id) or 0, last)
  if f.gate == 0 then
    if not waits or not in_w then turn.joins = earned end
    return turn
  end
  local least = fair_least(f, last)
  if not least then return turn end
  local mine = earned
  if waits and in_w then mine = in_w end
  turn.least, turn.mine = least, mine
  if mine <= least then return turn end
  local held = redis.call('HGET', f.s, 'held')
  local time = redis.call('TIME')
  local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  if held and now - tonumber(held) >= f.patience then return turn end
  if not held then
    redis.call('HSET', f.s, 'held', fair_number(now))
    fair_keep(f)
  end
  return {go = false}
end
local function fair_after(f, turn)
  if turn.joins then
    redis.call('ZREM', f.i, f.id)
    redis.call('ZADD', f.w, fair_number(turn.joins), f.id)
  elseif turn.least then
    local served = fair_number(turn.mine + f.share)
    redis.call('HSET', f.s, 'last', fair_number(turn.mine))
    if turn.mine <= turn.least then redis.call('HDEL', f.s, 'held') end
    if redis.call('EXISTS', f.pool) == 1 then
      redis.call('ZADD', f.w, served, f.id)
    else
      redis.call('ZREM', f.w, f.id)
      if redis.call('EXISTS', f.w) == 0 then
        redis.call('DEL', f.i, f.s)
        return
      end
      redis.call('ZADD', f.i, served, f.id)
    end
    redis.call('ZREMRANGEBYSCORE', f.i, '-inf', fair_number(turn.mine))
  else
    return
  end
  fair_keep(f)
end
";

/// How long the fair turns are kept after their last write.
pub(crate) const FAIR_KEEP_MS: u64 = 600_000;

/// [`CREATE`] with seats: takes a seat in pools as [`MOVE_SEATS`] does and
/// creates the record only when they were taken. KEYS: task, expiry,
/// owned, runners, the runner's `held`, the `n` pools. ARGV: [`CREATE`]'s
/// ten, then runner, seat, n, then limit and pool id of each pool.
/// Returns 0 created, -2 for an existing id, -3 when a record holds the
/// idempotency slot (nothing taken either way), else as `take_seats`.
pub(crate) static CREATE_SEATED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        r"{KEEP_OWNED}{TAKE_SEATS}{KEYED_LIVE}
if redis.call('EXISTS', KEYS[1]) == 1 then return -2 end
if keyed_live(ARGV[8], ARGV[10]) then return -3 end
local taken = take_seats(KEYS[4], KEYS[5], ARGV[11], ARGV[12], 6, 14, tonumber(ARGV[13]))
if taken ~= 0 then return taken end
{CREATE_RECORD}
return 0
"
    ))
});

/// [`CREATE_SEATED`] with a fair turn. KEYS: [`CREATE_SEATED`]'s, then
/// fair waiting, idle, state and the caller's pool (see [`FAIR`]). ARGV:
/// [`CREATE_SEATED`]'s, then the caller's pool id, share, gate, patience
/// ms. Returns as [`CREATE_SEATED`]; a turn not come is the gate's
/// index, as a full pool.
pub(crate) static CREATE_SEATED_FAIRLY: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        r"local FAIR_KEEP_MS = {FAIR_KEEP_MS}
{KEEP_OWNED}{TAKE_SEATS}{KEYED_LIVE}{FAIR}
if redis.call('EXISTS', KEYS[1]) == 1 then return -2 end
if keyed_live(ARGV[8], ARGV[10]) then return -3 end
local n = tonumber(ARGV[13])
local room = seats_room(KEYS[4], ARGV[11], ARGV[12], 6, 14, n)
if room ~= 0 then return room end
local f = fair_args(6 + n, 14 + 2 * n, ARGV[8])
local turn = fair_turn(f)
if not turn.go then return f.gate end
seats_write(KEYS[5], ARGV[11], ARGV[12], 6, 14, n)
fair_after(f, turn)
{CREATE_RECORD}
return 0
"
    ))
});

/// Gives a seat up in pools: `free_seats(prefix, seat, first_key,
/// first_arg, n)` reads the `n` pool keys from `KEYS[first_key]` on and
/// their pool ids from `ARGV[first_arg]` on; pools that do not hold the
/// seat are skipped, and a freeing is announced (the empty message).
const FREE_SEATS: &str = r"
local function free_seats(prefix, seat, first_key, first_arg, n)
  local freed = false
  for k = 1, n do
    local pool = KEYS[first_key + k - 1]
    local holder = redis.call('HGET', pool, seat)
    if holder then
      redis.call('HDEL', pool, seat)
      redis.call('SREM', prefix .. 'held:' .. holder, ARGV[first_arg + k - 1] .. seat)
      freed = true
    end
  end
  if freed then redis.call('PUBLISH', prefix .. 'changes', '') end
end
";

/// Compare-and-set, and when it swaps, gives a seat up in the pools given
/// (none: a plain swap). KEYS: task, expiry, owned, then the pools to
/// free. ARGV: id, expected version, record, its version, expires_at or
/// '', keep_ms or '', runner or '', finished, prefix, owner, then (with
/// pools) the seat and the pool id of each. Returns {2} swapped, {1,
/// version, record} conflict, {0} missing; nothing is freed but with {2}.
/// A record whose hash says it is listed (`i`, written by every creation
/// since) is not entered in its owner's set nor in `all` again; one of an
/// older build, which kept no such index, is entered at its first change,
/// and marked.
pub(crate) static SWAP: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        r"{KEEP_OWNED}{FREE_SEATS}
local current = redis.call('HMGET', KEYS[1], 'v', 'r', 'o', 'k', 'i')
if not current[1] then return {{0}} end
if current[1] ~= ARGV[2] then return {{1, current[1], current[2]}} end
local old = current[3]
local listed = current[5] == '1'
if old and (old ~= ARGV[7] or ARGV[8] == '1') then
  redis.call('SREM', ARGV[9] .. 'runner:' .. old, ARGV[1])
end
local fields = {{'v', ARGV[4], 'r', ARGV[3], 'w', ARGV[10]}}
if not listed then
  fields[#fields + 1] = 'i'
  fields[#fields + 1] = '1'
end
if ARGV[7] ~= '' then
  fields[#fields + 1] = 'o'
  fields[#fields + 1] = ARGV[7]
  redis.call('HSET', KEYS[1], unpack(fields))
  if ARGV[8] == '0' and old ~= ARGV[7] then
    redis.call('SADD', ARGV[9] .. 'runner:' .. ARGV[7], ARGV[1])
  end
else
  redis.call('HSET', KEYS[1], unpack(fields))
  if old then redis.call('HDEL', KEYS[1], 'o') end
end
if ARGV[5] ~= '' then
  redis.call('ZADD', KEYS[2], ARGV[5], ARGV[1])
else
  redis.call('ZREM', KEYS[2], ARGV[1])
end
if ARGV[6] ~= '' then
  redis.call('PEXPIRE', KEYS[1], ARGV[6])
else
  redis.call('PERSIST', KEYS[1])
end
if current[4] then
  local keyed = ARGV[9] .. 'keyed:' .. current[4]
  if redis.call('GET', keyed) == ARGV[1] then
    if ARGV[6] ~= '' then redis.call('PEXPIRE', keyed, ARGV[6]) else redis.call('PERSIST', keyed) end
  end
end
keep_owned(KEYS[3], ARGV[1], ARGV[6], listed)
if not listed then redis.call('ZADD', ARGV[9] .. 'all', 0, ARGV[1]) end
redis.call('PUBLISH', ARGV[9] .. 'changes', ARGV[1])
if #KEYS > 3 then free_seats(ARGV[9], ARGV[11], 4, 12, #KEYS - 3) end
return {{2}}
"
    ))
});

/// Deletes a record and its index entries, and announces it (replicas
/// drop it from their read caches). KEYS: task, expiry. ARGV: id, prefix.
pub(crate) static DELETE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local old = redis.call('HMGET', KEYS[1], 'o', 'w', 'k')
if redis.call('DEL', KEYS[1]) == 1 then redis.call('PUBLISH', ARGV[2] .. 'changes', ARGV[1]) end
if old[3] and redis.call('GET', ARGV[2] .. 'keyed:' .. old[3]) == ARGV[1] then
  redis.call('DEL', ARGV[2] .. 'keyed:' .. old[3])
end
redis.call('ZREM', KEYS[2], ARGV[1])
if old[1] then redis.call('SREM', ARGV[2] .. 'runner:' .. old[1], ARGV[1]) end
if old[2] then redis.call('ZREM', ARGV[2] .. 'owner:' .. old[2], ARGV[1]) end
redis.call('ZREM', ARGV[2] .. 'all', ARGV[1])
return 1
",
    )
});

/// Up to `limit` records of an owner whose ids sort after `after`, in byte
/// order, as a flat list id, version, record, id, version, record... Ids
/// whose record is gone (or, after an id was reused, is another owner's)
/// are removed from the set and skipped. KEYS: owned. ARGV: where to start
/// (`-` from the first, `(ID` after ID), limit (at least 1), prefix, owner.
pub(crate) static LIST_OWNED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local limit = tonumber(ARGV[2])
local from = ARGV[1]
local found = {}
local listed = 0
while listed < limit do
  local want = limit - listed
  local ids = redis.call('ZRANGEBYLEX', KEYS[1], from, '+', 'LIMIT', 0, want)
  for _, id in ipairs(ids) do
    local record = redis.call('HMGET', ARGV[3] .. 'task:' .. id, 'v', 'r', 'w')
    if record[1] and record[3] == ARGV[4] then
      found[#found + 1] = id
      found[#found + 1] = record[1]
      found[#found + 1] = record[2]
      listed = listed + 1
    else
      redis.call('ZREM', KEYS[1], id)
    end
  end
  if #ids < want then break end
  from = '(' .. ids[#ids]
end
return found
",
    )
});

/// Up to `limit` records of any owner whose ids sort after `after`, in
/// byte order, as [`LIST_OWNED`] gives them; ids whose record is gone are
/// removed from the index and skipped. KEYS: all. ARGV: where to start
/// (`-` or `(ID`), limit (at least 1), prefix.
pub(crate) static LIST_ALL: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local limit = tonumber(ARGV[2])
local from = ARGV[1]
local found = {}
local listed = 0
while listed < limit do
  local want = limit - listed
  local ids = redis.call('ZRANGEBYLEX', KEYS[1], from, '+', 'LIMIT', 0, want)
  for _, id in ipairs(ids) do
    local record = redis.call('HMGET', ARGV[3] .. 'task:' .. id, 'v', 'r')
    if record[1] then
      found[#found + 1] = id
      found[#found + 1] = record[1]
      found[#found + 1] = record[2]
      listed = listed + 1
    else
      redis.call('ZREM', KEYS[1], id)
    end
  end
  if #ids < want then break end
  from = '(' .. ids[#ids]
end
return found
",
    )
});

/// Ids due at `now`, soonest first; entries whose record Redis already
/// expired are dropped from the index. KEYS: expiry. ARGV: now, limit, prefix.
pub(crate) static EXPIRED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
local due = {}
for _, id in ipairs(ids) do
  if redis.call('EXISTS', ARGV[3] .. 'task:' .. id) == 1 then
    due[#due + 1] = id
  else
    redis.call('ZREM', KEYS[1], id)
  end
end
return due
",
    )
});

/// Redis's clock in milliseconds, inside a script.
const NOW: &str = r"
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
";

/// Takes a lease. KEYS: runners. ARGV: runner, hold_ms.
pub(crate) static ACQUIRE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        r"{NOW}
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
return 1
"
    ))
});

/// Renews a lease unless it was claimed. KEYS: runners. ARGV: runner,
/// hold_ms. Returns 1 renewed, 0 claimed.
pub(crate) static RENEW: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        r"{NOW}
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
return 1
"
    ))
});

/// A take from a GCRA bucket (see `mcp_tasks::store::replicas`, "Rates
/// and fair turns") on Redis's clock, in microseconds. KEYS: the bucket
/// (its value the theoretical arrival time; it expires once that passed).
/// ARGV: emission interval, burst. Returns 0 taken, else how long to wait.
pub(crate) static TAKE_RATE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local interval = tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local over = tat - now - interval * (tonumber(ARGV[2]) - 1)
if over > 0 then return over end
tat = tat + interval
redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', string.format('%d', math.ceil((tat - now) / 1000)))
return 0
",
    )
});

/// Claims the leases that ran out (freeing every seat their runners held)
/// and lists unfinished tasks of claimed runners, as a flat list id,
/// runner, id, runner... KEYS: runners, claimed. ARGV: limit, prefix.
pub(crate) static ORPHANS: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        r"{NOW}
local ran_out = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. now, 'LIMIT', 0, 64)
local freed = false
for _, runner in ipairs(ran_out) do
  redis.call('ZREM', KEYS[1], runner)
  redis.call('SADD', KEYS[2], runner)
  local held = ARGV[2] .. 'held:' .. runner
  for _, entry in ipairs(redis.call('SMEMBERS', held)) do
    local pool = ARGV[2] .. 'seats:' .. string.sub(entry, 1, {POOL_ID_LEN})
    local seat = string.sub(entry, {POOL_ID_LEN} + 1)
    if redis.call('HGET', pool, seat) == runner then redis.call('HDEL', pool, seat) end
    freed = true
  end
  redis.call('DEL', held)
end
if freed then redis.call('PUBLISH', ARGV[2] .. 'changes', '') end
local limit = tonumber(ARGV[1])
local found = {{}}
for _, runner in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  if #found >= 2 * limit then break end
  local tasks = ARGV[2] .. 'runner:' .. runner
  local ids = redis.call('SRANDMEMBER', tasks, limit - #found / 2)
  if #ids == 0 then
    redis.call('SREM', KEYS[2], runner)
  else
    for _, id in ipairs(ids) do
      if redis.call('HGET', ARGV[2] .. 'task:' .. id, 'o') == runner then
        found[#found + 1] = id
        found[#found + 1] = runner
      else
        redis.call('SREM', tasks, id)
      end
    end
  end
end
return found
"
    ))
});

/// [`MOVE_SEATS`] with a fair turn, and at least one pool to take. KEYS:
/// [`MOVE_SEATS`]'s, then fair waiting, idle, state and the caller's pool
/// (see [`FAIR`]). ARGV: [`MOVE_SEATS`]'s, then the caller's pool id,
/// share, gate, patience ms. Returns as [`MOVE_SEATS`]; a turn not come
/// is the gate's index, as a full pool.
pub(crate) static MOVE_SEATS_FAIRLY: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        r"local FAIR_KEEP_MS = {FAIR_KEEP_MS}
{TAKE_SEATS}{FREE_SEATS}{FAIR}
local runner, seat, n, prefix = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local m = #KEYS - 6 - n
local room = seats_room(KEYS[1], runner, seat, 3, 5, n)
if room ~= 0 then return room end
local f = fair_args(3 + n + m, 5 + 2 * n + m, prefix)
local turn = fair_turn(f)
if not turn.go then return f.gate end
seats_write(KEYS[2], runner, seat, 3, 5, n)
free_seats(prefix, seat, 3 + n, 5 + 2 * n, m)
fair_after(f, turn)
return 0
"
    ))
});

/// Takes a seat in some pools, all or nothing, and frees it in others.
/// KEYS: runners, the runner's `held`, the `n` pools to take, the pools to
/// free. ARGV: runner, seat, n, prefix, then limit and pool id of each pool
/// to take, then the pool id of each pool to free. Returns 0 done, `i` when
/// the `i`-th pool to take (from 1) is full, -1 when the runner holds no
/// lease (taking needs one; freeing alone does not).
pub(crate) static MOVE_SEATS: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        r"{TAKE_SEATS}{FREE_SEATS}
local runner, seat, n, prefix = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
if n > 0 then
  local taken = take_seats(KEYS[1], KEYS[2], runner, seat, 3, 5, n)
  if taken ~= 0 then return taken end
end
free_seats(prefix, seat, 3 + n, 5 + 2 * n, #KEYS - 2 - n)
return 0
"
    ))
});
