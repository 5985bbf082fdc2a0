//! The stores several `serve` replicas share, as real servers: a
//! `redis-server` or a PostgreSQL, each started by the test (and failing
//! it with a clear message when it cannot start), for the replica tests
//! that run on both.

use mcp_tasks_postgres::testing::PostgresServer;
use mcp_tasks_redis::testing::RedisServer;

/// A real server of a store replicas share.
#[derive(Debug)]
pub(crate) enum Shared {
    Redis(RedisServer),
    Postgres(PostgresServer),
}

impl Shared {
    /// A `redis-server` of its own.
    pub(crate) fn redis() -> Self {
        Self::Redis(RedisServer::start())
    }

    /// A PostgreSQL of its own.
    pub(crate) fn postgres() -> Self {
        Self::Postgres(PostgresServer::start())
    }

    /// What `serve --store` takes.
    pub(crate) fn url(&self) -> String {
        match self {
            Self::Redis(server) => server.url(),
            Self::Postgres(server) => server.url(),
        }
    }

    /// `serve`'s flags that keep the deployment `name` apart from others on
    /// the same server: a key prefix, or a schema.
    pub(crate) fn namespace(&self, name: &str) -> [String; 2] {
        match self {
            Self::Redis(_) => ["--redis-key-prefix".to_owned(), format!("{name}:")],
            Self::Postgres(_) => ["--postgres-schema".to_owned(), name.replace('-', "_")],
        }
    }
}
