//! Integration tests of the Redis store, each against a real
//! `redis-server` started on a free port (see `mcp_tasks_redis::testing`).

mod cache;
mod contract;
mod handoff;
mod keyed;
mod outage;
mod owned;
mod pause;
mod replicas;
mod seats;
mod shared_admission;
mod support;
