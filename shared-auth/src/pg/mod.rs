//! PostgreSQL plumbing both services share (cargo feature `postgres`): pools pinned to a schema,
//! the mapping of database failures to problems, readiness from a background pool check,
//! `Idempotency-Key` records and pool metrics. It knows no service's tables beyond the
//! idempotency record's shape.

pub mod health;
pub mod idempotency;
pub mod metrics;
pub mod opaque;
pub mod pool;
pub mod pool_health;
pub mod pool_pressure;
pub mod unavailable;

pub use opaque::push_opaque;
