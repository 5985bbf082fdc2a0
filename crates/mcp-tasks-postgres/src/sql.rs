//! The statements of one store, with its schema in them: each is prepared
//! once per pooled connection.

/// The statements, with the schema in them.
#[derive(Debug)]
pub(crate) struct Sql {
    pub(crate) schema: String,
    pub(crate) channel: String,
    pub(crate) create: String,
    pub(crate) create_keyed: String,
    /// Several creations without an idempotency key or seats: the ids it
    /// created (one whose runner's lease was claimed is not).
    pub(crate) create_batch: String,
    pub(crate) get: String,
    pub(crate) find_keyed: String,
    pub(crate) swap: String,
    /// Several compare-and-sets that free no seat, their rows locked in
    /// the ids' order: the ids it swapped, each announced in the same
    /// transaction (one batch in flight per store, so its commit holding
    /// the notification lock makes no write of the store wait).
    pub(crate) swap_batch: String,
    /// `create_batch` and `swap_batch` in one statement (parameters 1 to 7
    /// the creations', 8 to 14 the compare-and-sets'): the ids it created
    /// or swapped, in one transaction and one commit.
    pub(crate) write_batch: String,
    /// Several compare-and-sets that free seats: the ids it swapped, each
    /// announced (and the freeing) in the same transaction.
    pub(crate) swap_freeing_batch: String,
    pub(crate) delete: String,
    pub(crate) announce: String,
    pub(crate) expired: String,
    pub(crate) list_owned: String,
    pub(crate) list_all: String,
    pub(crate) hash_key: String,
    pub(crate) acquire: String,
    pub(crate) renew: String,
    pub(crate) orphans: String,
    /// Several seat moves: a code for each, as `move_seats`'s.
    pub(crate) move_seats_batch: String,
    pub(crate) create_seated: String,
    /// Several seated creations without a key: a code for each, as
    /// `create_seated`'s.
    pub(crate) create_seated_batch: String,
    /// `create_seated_batch` and `swap_freeing_batch` in one transaction
    /// (parameters 1 to 11 the creations', 12 to 21 the compare-and-sets'):
    /// the creations' codes, then 1 or 0 for each compare-and-set.
    pub(crate) seated_batch: String,
    pub(crate) seats_taken: String,
    pub(crate) take_rate: String,
    pub(crate) create_seated_fairly: String,
    pub(crate) move_seats_fairly: String,
}

impl Sql {
    pub(crate) fn new(schema: &str) -> Self {
        let s = format!("\"{schema}\"");
        // `SELECT SCHEMA.function($1, ..., $n)`.
        let call = |function: &str, n: usize| {
            let params: Vec<String> = (1..=n).map(|k| format!("${k}")).collect();
            format!("SELECT {s}.{function}({})", params.join(", "))
        };
        let columns = "id, owner, version, record, runner, expires_at, keyed";
        // Creations ($1 to $7): a row is created unless its id exists or
        // the lease it names was claimed. Inserted in the ids' order, so two
        // statements creating the same ids (two replicas; a test) wait for
        // each other in one order, never in a deadlock.
        let creations = format!(
            "WITH c AS (INSERT INTO {s}.tasks (id, owner, version, record, runner, expires_at) \
             SELECT i.id, i.owner, i.version, i.record, i.runner, i.expires_at \
             FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], \
               $6::bigint[], $7::text[]) \
               AS i(id, owner, version, record, runner, expires_at, lease) \
             WHERE i.lease IS NULL OR EXISTS (SELECT 1 FROM {s}.runners r \
               WHERE r.runner = i.lease AND NOT r.claimed) \
             ORDER BY i.id COLLATE \"C\" \
             ON CONFLICT (id) DO NOTHING RETURNING id)"
        );
        // Compare-and-sets (from $first on), their rows locked in the ids'
        // order.
        let swaps = |first: usize| {
            let p: Vec<String> = (first..first + 7).map(|n| format!("${n}")).collect();
            format!(
                "i AS MATERIALIZED (SELECT * FROM unnest({}::text[], {}::bigint[], \
                   {}::text[], {}::bigint[], {}::text[], {}::text[], {}::bigint[]) \
                   AS i(id, expected, owner, version, record, runner, expires_at)), \
                 l AS MATERIALIZED (SELECT t.id FROM {s}.tasks t \
                   WHERE t.id IN (SELECT i.id FROM i) ORDER BY t.id FOR UPDATE), \
                 u AS (UPDATE {s}.tasks t SET owner = i.owner, version = i.version, \
                   record = i.record, runner = i.runner, expires_at = i.expires_at \
                 FROM i, l WHERE l.id = t.id AND i.id = t.id AND t.version = i.expected \
                 RETURNING t.id)",
                p[0], p[1], p[2], p[3], p[4], p[5], p[6]
            )
        };
        Self {
            schema: schema.to_owned(),
            channel: format!("{schema}_changes"),
            create: format!(
                "INSERT INTO {s}.tasks ({columns}) VALUES ($1, $2, $3, $4, $5, $6, $7) \
                 ON CONFLICT (id) DO NOTHING RETURNING 1"
            ),
            create_keyed: format!(
                "SELECT o_code, o_id, o_version, o_record \
                 FROM {s}.create_keyed($1, $2, $3, $4, $5, $6, $7)"
            ),
            create_batch: format!("{creations} SELECT c.id::text FROM c"),
            swap_batch: format!(
                "WITH {} \
                 SELECT u.id::text, pg_notify('{schema}_changes', u.id) FROM u",
                swaps(1)
            ),
            write_batch: format!(
                "{creations}, {} \
                 SELECT c.id::text FROM c UNION ALL \
                 SELECT n.id FROM (SELECT u.id::text AS id, \
                   pg_notify('{schema}_changes', u.id) AS notified FROM u) AS n",
                swaps(8)
            ),
            swap_freeing_batch: call("swap_freeing_batch", 10),
            get: format!("SELECT version, record FROM {s}.tasks WHERE id = $1"),
            find_keyed: format!("SELECT id, version, record FROM {s}.tasks WHERE keyed = $1"),
            swap: format!(
                "SELECT o_code, o_version, o_record \
                 FROM {s}.swap($1, $2, $3, $4, $5, $6, $7, $8, $9)"
            ),
            delete: format!("DELETE FROM {s}.tasks WHERE id = $1 RETURNING 1"),
            announce: format!("SELECT {s}.announce($1)"),
            expired: format!(
                "WITH turn AS ( \
                   INSERT INTO {s}.sweeper (id, holder, until) VALUES (1, $1, {s}.now_ms() + $2) \
                   ON CONFLICT (id) DO UPDATE SET holder = $1, until = {s}.now_ms() + $2 \
                   WHERE {s}.sweeper.holder = $1 OR {s}.sweeper.until < {s}.now_ms() \
                   RETURNING 1) \
                 SELECT id FROM {s}.tasks WHERE EXISTS (SELECT 1 FROM turn) AND expires_at <= $3 \
                 ORDER BY expires_at LIMIT $4"
            ),
            list_owned: format!(
                "SELECT id, version, record FROM {s}.tasks WHERE owner = $1 AND id > $2 \
                 ORDER BY id LIMIT $3"
            ),
            list_all: format!(
                "SELECT id, version, record FROM {s}.tasks WHERE id > $1 ORDER BY id LIMIT $2"
            ),
            // The key made here, or the one already kept: `DO UPDATE` (of
            // nothing) returns the kept row even when another replica's
            // insert committed after this statement began, which a `SELECT`
            // in the same statement (its snapshot older) would not see.
            hash_key: format!(
                "INSERT INTO {s}.meta (key, value) VALUES ('hash_key', $1) \
                 ON CONFLICT (key) DO UPDATE SET value = {s}.meta.value RETURNING value"
            ),
            acquire: format!(
                "INSERT INTO {s}.runners (runner, until) VALUES ($1, {s}.now_ms() + $2) \
                 ON CONFLICT (runner) DO UPDATE SET until = EXCLUDED.until \
                 WHERE NOT {s}.runners.claimed RETURNING 1"
            ),
            renew: format!("SELECT {s}.renew($1, $2)"),
            orphans: format!("SELECT o_id, o_runner FROM {s}.orphans($1)"),
            move_seats_batch: call("move_seats_batch", 7),
            create_seated: call("create_seated", 11),
            create_seated_batch: call("create_seated_batch", 11),
            seated_batch: call("seated_batch", 21),
            seats_taken: format!(
                "SELECT coalesce((SELECT taken FROM {s}.pools WHERE pool = $1), 0)"
            ),
            take_rate: format!("SELECT {s}.take_rate($1, $2, $3)"),
            create_seated_fairly: call("create_seated_fairly", 15),
            move_seats_fairly: call("move_seats_fairly", 9),
        }
    }
}
