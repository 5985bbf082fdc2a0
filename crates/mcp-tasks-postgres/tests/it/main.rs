//! The PostgreSQL store against real PostgreSQL servers (started by each
//! test with `mcp_tasks_postgres::testing::PostgresServer`; never skipped).

mod admission;
mod batches;
mod cache;
mod contract;
mod outage;
mod schema;
