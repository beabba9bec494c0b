//! Postgres plumbing both services need: connections pinned to the service's own schema, lazy
//! pools that turn an unreachable database into a 503 instead of a hang, and the one rule for
//! which sqlx errors mean "the database is unavailable" (503 `database_unavailable` with
//! `Retry-After`) rather than a bug (logged 500). It knows no service's tables.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres, Transaction};

use crate::http::problem::Problem;

pub use crate::pg::unavailable::{DATABASE_RETRY_AFTER_SECS, unavailable_problem};

/// Options for `url` with `search_path` pinned to `schema`, so the service's SQL is unqualified
/// and sqlx's migration history lives in the service's own schema whatever the role's defaults.
pub fn connect_options(url: &str, schema: &str) -> Result<PgConnectOptions, sqlx::Error> {
    Ok(PgConnectOptions::from_str(url)?.options([("search_path", schema)]))
}

/// `options` whose statements the server cancels after `timeout`, and whose transactions it ends
/// when they sit idle that long: set to at most the request deadline, neither outlives the request
/// it served by more than that. (An abandoned open transaction would also hold back lingo's
/// analytics export, which never reads past the oldest transaction in progress.)
pub fn with_time_limits(options: PgConnectOptions, timeout: Duration) -> PgConnectOptions {
    let limit = postgres_millis(timeout);
    options.options([
        ("statement_timeout", limit.as_str()),
        ("idle_in_transaction_session_timeout", limit.as_str()),
    ])
}

/// A duration as a Postgres setting in milliseconds, at least 1 (0 would mean no limit).
fn postgres_millis(duration: Duration) -> String {
    format!("{}ms", duration.as_millis().max(1))
}

/// Begins a transaction whose statements the server cancels when the current request's deadline
/// passes (`SET LOCAL statement_timeout` to the time left), not a whole deadline after they
/// started: a write abandoned at its deadline then holds its connection and row locks no longer.
/// Outside a guarded request it is a plain `begin`. Not for a transaction that needs `SET
/// TRANSACTION`, which must be its first statement.
pub async fn begin_within_deadline(
    pool: &PgPool,
) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
    let mut transaction = begin_to_completion(pool, None).await?;
    if let Some(left) = crate::http::load::time_left() {
        sqlx::query("SELECT set_config('statement_timeout', $1, true)")
            .bind(postgres_millis(left))
            .execute(&mut *transaction)
            .await?;
    }
    Ok(transaction)
}

/// Begins a transaction on a connection of `pool` (with `statement`, else a plain `BEGIN`) and
/// sees the `BEGIN` through even when the request that asked for it is cancelled meanwhile (its
/// deadline passed, its client went away). sqlx 0.8 counts a transaction only once the server
/// has answered its `BEGIN`: a request dropped in between hands its connection back to the pool
/// with the server's transaction still open, and the next request on that connection runs inside
/// it (inside a `READ ONLY` one, a write fails: a 500). Run as a task of its own, the `BEGIN`
/// completes; a transaction nobody awaits any more is then dropped, so rolled back, as usual.
pub async fn begin_to_completion(
    pool: &PgPool,
    statement: Option<&'static str>,
) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
    let pool = pool.clone();
    let begin = tokio::spawn(async move {
        match statement {
            Some(statement) => pool.begin_with(statement).await,
            None => pool.begin().await,
        }
    });
    match begin.await {
        Ok(transaction) => transaction,
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        // The runtime is shutting down.
        Err(_) => Err(sqlx::Error::PoolClosed),
    }
}

/// A pool that connects on first use, so the service starts (and `/readyz` answers 503) while
/// the database is down; `acquire_timeout` bounds how long a request waits before it is a 503.
pub fn lazy_pool(
    options: PgConnectOptions,
    max_connections: u32,
    acquire_timeout: Duration,
) -> PgPool {
    // Each hand-out is evidence that the database is reachable (see `pool_pressure`).
    let reached = crate::pg::pool_pressure::reached(&options);
    let reached_on_connect = reached.clone();
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(acquire_timeout)
        .after_connect(move |_, _| {
            reached_on_connect.mark();
            Box::pin(async { Ok(()) })
        })
        .before_acquire(move |_, _| {
            reached.mark();
            Box::pin(async { Ok(true) })
        })
        .connect_lazy_with(options)
}

/// Whether the error means the database cannot be reached now (503, retry), not a bug (500).
pub fn is_unavailable(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) => true,
        sqlx::Error::Tls(_) | sqlx::Error::Protocol(_) => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            // 08: connection exception; 57P0x: shutting down / cannot connect now;
            // 53300: too many connections; 28: the login is refused (a role or password that
            // does not match, as during a half-done rotation); 3D000: no such database;
            // 3F000, 42P01: no such schema or table (the migrations have not run yet).
            code.starts_with("08")
                || code.starts_with("57P0")
                || code.starts_with("28")
                || ["53300", "3D000", "3F000", "42P01"].contains(&code.as_ref())
        }),
        _ => false,
    }
}

/// Whether PostgreSQL rolled the transaction back because it conflicted with another: 40P01
/// (`deadlock_detected`: it was one of a cycle of transactions waiting for each other's locks) or
/// 40001 (`serialization_failure`). Nothing of it was kept, and the same transaction run again
/// may well succeed.
pub fn is_transaction_conflict(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|db| db.code())
        .is_some_and(|code| code == "40P01" || code == "40001")
}

/// Whether the server ended the statement or its transaction for the request deadline: 57014
/// (`query_canceled`, the `statement_timeout`) or 25P03 (`idle_in_transaction_session_timeout`,
/// which terminates the connection of a transaction left idle that long). [`with_time_limits`]
/// and [`begin_within_deadline`] set both to the request deadline.
fn is_deadline_error(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|db| db.code())
        .is_some_and(|code| code == "57014" || code == "25P03")
}

/// The problem a failed query becomes: a constraint the service names in `on_constraint` (a
/// race the client caused), 503 when the database is unreachable, else a 500 logged with its
/// cause and rendered without it.
pub fn database_problem(
    error: &sqlx::Error,
    on_constraint: impl FnOnce(&str) -> Option<Problem>,
    retry_after_secs: u32,
) -> Problem {
    if let Some(problem) = error
        .as_database_error()
        .and_then(|db| db.constraint())
        .and_then(on_constraint)
    {
        return problem;
    }
    if is_deadline_error(error) || crate::http::load::past_deadline() {
        // The request is past its deadline: the same answer as when the deadline middleware
        // fires first. The two race under load: the middleware polls the handler before its
        // timer, so a handler failing at the same poll answers. And a request whose task was not
        // scheduled for a deadline's time between two statements finds its connection
        // terminated by the server (25P03, or a broken pipe): not a 500, nor the database
        // being unreachable.
        tracing::warn!(%error, "a database call failed past the request deadline");
        return crate::http::load::timeout_problem();
    }
    if matches!(error, sqlx::Error::PoolTimedOut) && crate::pg::pool_pressure::a_pool_is_busy() {
        tracing::warn!("no database connection came free in time");
        return crate::http::load::overloaded_problem();
    }
    if is_unavailable(error) {
        tracing::error!(%error, "database unavailable");
        return unavailable_problem(retry_after_secs);
    }
    tracing::error!(%error, "database error");
    Problem::internal()
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;

    use super::*;

    #[test]
    fn pool_exhaustion_is_unavailable_not_internal() {
        assert!(is_unavailable(&sqlx::Error::PoolTimedOut));
        assert!(is_unavailable(&sqlx::Error::PoolClosed));
        assert!(!is_unavailable(&sqlx::Error::RowNotFound));
        let problem = database_problem(&sqlx::Error::PoolTimedOut, |_| None, 7);
        assert_eq!(problem.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(problem.code, "database_unavailable");
        assert_eq!(
            database_problem(&sqlx::Error::RowNotFound, |_| None, 7).code,
            "internal_error"
        );
    }

    #[test]
    fn statements_and_idle_transactions_are_limited() {
        let options = connect_options("postgres://u@localhost/db", "news").expect("valid url");
        let text = format!("{:?}", with_time_limits(options, Duration::from_secs(5)));
        assert!(
            text.contains("statement_timeout")
                && text.contains("idle_in_transaction_session_timeout")
        );
        assert!(text.contains("5000ms"), "{text}");
    }

    #[test]
    fn search_path_is_pinned() {
        let options = connect_options("postgres://u@localhost/db", "news").expect("valid url");
        assert!(format!("{options:?}").contains("search_path"));
    }
}
