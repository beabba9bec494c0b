//! Connection pools and migrations. Every connection starts with `search_path = news`, so the
//! service's SQL is unqualified and the migration history table lives inside schema `news`.

use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

pub(crate) fn connect_options(
    url: &str,
    application_name: &str,
) -> Result<PgConnectOptions, sqlx::Error> {
    Ok(shared_auth::pg::pool::connect_options(url, "news")?.application_name(application_name))
}

/// How long a request may wait for a connection, and how long a statement may run.
#[derive(Clone, Copy, Debug)]
pub struct PoolTimeouts {
    pub acquire: Duration,
    /// At most the request deadline, so nothing outlives a timed-out request by long.
    pub statement: Duration,
}

/// A pool that connects on first use, so the service starts (and answers `/readyz` 503) while
/// the database is still down.
pub fn lazy_pool(
    url: &str,
    max_connections: u32,
    name: &str,
    timeouts: PoolTimeouts,
) -> Result<PgPool, sqlx::Error> {
    let options =
        shared_auth::pg::pool::with_time_limits(connect_options(url, name)?, timeouts.statement);
    Ok(shared_auth::pg::pool::lazy_pool(
        options,
        max_connections,
        timeouts.acquire,
    ))
}

/// A pool for the one-shot commands (migrate, seed, import): fails fast when unreachable.
pub async fn connect(url: &str, max_connections: u32, name: &str) -> Result<PgPool, sqlx::Error> {
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(connect_options(url, name)?)
        .await
}

/// Applies the migrations as the schema owner (`news_owner`).
pub async fn migrate(owner_url: &str) -> anyhow::Result<()> {
    let pool = connect(owner_url, 1, "news-service-migrate").await?;
    MIGRATOR.run(&pool).await?;
    pool.close().await;
    Ok(())
}
