//! Connections to the `lingo` schema and its migrations. Every connection pins `search_path` to
//! `lingo`, so the tables (and sqlx's migration history) live in the service's own schema
//! whatever the role's defaults are.

use std::time::Duration;

use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection, PgPool};

pub const SCHEMA: &str = "lingo";

/// The database as a handler reaches it: `State<Db>`, taken from `AppState`. The same handle
/// as news-service's, where `Db` also routes anonymous reads to a read replica; lingo has no
/// replica, so writes and reads all use `primary`.
#[derive(Clone, Debug)]
pub struct Db {
    /// The runtime pool (role `lingo_app`).
    pub primary: PgPool,
}

pub fn connect_options(url: &str) -> Result<PgConnectOptions, sqlx::Error> {
    shared_auth::pg::pool::connect_options(url, SCHEMA)
}

/// The runtime pool. Lazy, so the service starts (and `/readyz` reports 503) while the database
/// is down; the acquire timeout turns an unreachable database into a 503, never a hang, and the
/// statement timeout (the request deadline) ends whatever a timed-out request left running.
pub fn runtime_pool(
    url: &str,
    max_connections: u32,
    acquire_timeout: Duration,
    statement_timeout: Duration,
) -> Result<PgPool, sqlx::Error> {
    let options = shared_auth::pg::pool::with_time_limits(connect_options(url)?, statement_timeout);
    Ok(shared_auth::pg::pool::lazy_pool(
        options,
        max_connections,
        acquire_timeout,
    ))
}

pub async fn connect_one(url: &str) -> Result<PgConnection, sqlx::Error> {
    PgConnection::connect_with(&connect_options(url)?).await
}

/// Applies the migrations of `migrations/` as the schema owner (`lingo_owner`).
pub async fn migrate(owner_url: &str) -> anyhow::Result<()> {
    let mut connection = connect_one(owner_url).await?;
    sqlx::migrate!("./migrations").run(&mut connection).await?;
    connection.close().await?;
    Ok(())
}
