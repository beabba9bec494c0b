//! PostgreSQL plumbing both services share (cargo feature `postgres`): pools pinned to a schema,
//! the mapping of database failures to problems, readiness checks, `Idempotency-Key` records
//! and pool metrics. It knows no service's tables beyond the idempotency record's shape.

pub mod health;
pub mod idempotency;
pub mod metrics;
pub mod pool;
