//! The answer for a database the service cannot use: 503 `database_unavailable` with
//! `Retry-After`. A leaf: the error mapping (`pool`) and the pool-pressure check both give it.

use crate::http::codes::SharedCode;
use crate::http::problem::Problem;

/// `Retry-After` of 503 `database_unavailable`, the same at every service: about one background
/// pool check (`pool_health`), after which a recovered database is seen as up again.
pub const DATABASE_RETRY_AFTER_SECS: u32 = 2;

/// 503 `database_unavailable`, telling the client to come back after `retry_after_secs`.
pub fn unavailable_problem(retry_after_secs: u32) -> Problem {
    Problem::from_code(SharedCode::DatabaseUnavailable).with_retry_after(retry_after_secs)
}
