//! Whether each database pool can reach its server (and finds its schema migrated), checked in
//! the background and kept in memory, so `/readyz`, `/metrics` and a service's own routing read a
//! state instead of sending a query per request. A check uses an idle pooled connection when
//! there is one and a connection of its own otherwise, so a pool that is merely busy under load
//! still counts as up.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use sqlx::postgres::PgConnection;
use sqlx::{Connection, PgPool};
use tokio::sync::watch;

/// What the last check of a pool found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolState {
    /// No check has finished yet.
    Unknown,
    Up,
    Down,
}

impl PoolState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unknown => "unknown",
            Self::Up => "up",
            Self::Down => "down",
        }
    }
}

/// How often the pools are checked and how long one check may take.
#[derive(Clone, Copy, Debug)]
pub struct CheckEvery {
    pub interval: Duration,
    pub timeout: Duration,
}

impl Default for CheckEvery {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(2),
            timeout: Duration::from_secs(1),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolName {
    pool: &'static str,
}

/// The shared, cheaply cloned view of the background check (one per application).
#[derive(Clone, Debug)]
pub struct PoolHealth {
    names: Arc<[&'static str]>,
    states: watch::Receiver<Vec<PoolState>>,
    up_gauge: Family<PoolName, Gauge>,
}

impl PoolHealth {
    /// Starts checking `pools` (named as in `/readyz` and `/metrics`) every `every.interval`,
    /// for as long as any clone of the returned value lives.
    pub fn spawn(pools: Vec<(&'static str, PgPool)>, every: CheckEvery) -> Self {
        let names: Arc<[&'static str]> = pools.iter().map(|(name, _)| *name).collect();
        let (sender, states) = watch::channel(vec![PoolState::Unknown; pools.len()]);
        let health = Self {
            names,
            states,
            up_gauge: Family::default(),
        };
        tokio::spawn(check_forever(pools, every, sender, health.up_gauge.clone()));
        health
    }

    /// The pools' names and states, in the order given to [`PoolHealth::spawn`].
    pub fn snapshot(&self) -> Vec<(&'static str, PoolState)> {
        let states = self.states.borrow();
        self.names
            .iter()
            .copied()
            .zip(states.iter().copied())
            .collect()
    }

    /// The state of the pool called `name` (`Unknown` for a name never given).
    pub fn state(&self, name: &str) -> PoolState {
        let states = self.states.borrow();
        self.names
            .iter()
            .position(|n| *n == name)
            .and_then(|index| states.get(index).copied())
            .unwrap_or(PoolState::Unknown)
    }

    /// Waits (at most `within`) until every pool has been checked once; a process that has just
    /// started answers its first readiness probe with facts, not with "unknown".
    pub async fn first_check(&self, within: Duration) {
        let mut states = self.states.clone();
        let checked = states.wait_for(|states| !states.contains(&PoolState::Unknown));
        let _ = tokio::time::timeout(within, checked).await;
    }

    /// Registers `db_pool_up{pool}` (1 up, 0 down or not checked yet) in a service's registry.
    pub fn register_metrics(&self, registry: &mut Registry) {
        registry.register(
            "db_pool_up",
            "Whether the background check reached the pool's database (1) or not (0), by pool",
            self.up_gauge.clone(),
        );
    }
}

async fn check_forever(
    pools: Vec<(&'static str, PgPool)>,
    every: CheckEvery,
    sender: watch::Sender<Vec<PoolState>>,
    up_gauge: Family<PoolName, Gauge>,
) {
    let reached: Vec<_> = pools
        .iter()
        .map(|(_, pool)| crate::pg::pool_pressure::reached(&pool.connect_options()))
        .collect();
    let mut ticker = tokio::time::interval(every.interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            () = sender.closed() => return,
        }
        let checks = pools.iter().map(|(_, pool)| check(pool, every.timeout));
        let found = futures_util::future::join_all(checks).await;
        for (((name, _), up), reached) in pools.iter().zip(&found).zip(&reached) {
            up_gauge
                .get_or_create(&PoolName { pool: name })
                .set(i64::from(*up));
            // Evidence for telling a busy pool from a dead database (pool_pressure).
            reached.checked(*up);
        }
        sender.send_if_modified(|states| {
            let mut changed = false;
            for ((state, up), (name, _)) in states.iter_mut().zip(&found).zip(&pools) {
                let now = if *up { PoolState::Up } else { PoolState::Down };
                if *state != now {
                    log_change(name, *state, now);
                    *state = now;
                    changed = true;
                }
            }
            changed
        });
    }
}

fn log_change(pool: &str, before: PoolState, now: PoolState) {
    match now {
        PoolState::Down => tracing::warn!(
            pool,
            "database pool is down: unreachable, its login refused, or its schema not migrated"
        ),
        _ if before == PoolState::Down => tracing::info!(pool, "database pool is up again"),
        _ => tracing::debug!(pool, state = now.as_str(), "database pool checked"),
    }
}

/// Whether `pool`'s server answers within `timeout`.
async fn check(pool: &PgPool, timeout: Duration) -> bool {
    tokio::time::timeout(timeout, ping(pool))
        .await
        .unwrap_or(false)
}

async fn ping(pool: &PgPool) -> bool {
    // A connection left over from before a server restart fails once; a new one decides.
    if let Some(mut idle) = pool.try_acquire()
        && can_serve(&mut idle).await
    {
        return true;
    }
    match PgConnection::connect_with(&pool.connect_options()).await {
        Ok(mut own) => {
            let up = can_serve(&mut own).await;
            let _ = own.close().await;
            up
        }
        Err(error) => {
            tracing::debug!(%error, "database check could not connect");
            false
        }
    }
}

/// Whether the server answers and the pool's schema (the first of its pinned `search_path`) has
/// been migrated: a database whose migrations have not run yet cannot serve a request either.
async fn can_serve(connection: &mut PgConnection) -> bool {
    let migrated = sqlx::query_scalar::<_, bool>(
        "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables \
           WHERE schemaname = current_schema() AND tablename = '_sqlx_migrations')",
    )
    .fetch_one(connection)
    .await;
    match migrated {
        Ok(true) => true,
        Ok(false) => {
            // Logged at each check; the change to "down" is logged once, as a warning.
            tracing::debug!("the database answers, but its schema has no migrations applied");
            false
        }
        Err(_) => false,
    }
}
