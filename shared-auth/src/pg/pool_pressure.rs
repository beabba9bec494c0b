//! Telling "no connection came free in time" (503 `overloaded`) from "the database cannot be
//! reached" (503 `database_unavailable`). sqlx reports both as `PoolTimedOut`, so the answer comes
//! from evidence that the database was reachable while the request waited:
//!
//! - the background check ([`pool_health`](crate::pg::pool_health)) last found it up. The check
//!   connects on its own when the pool has no idle connection, so it still reaches a database
//!   whose every pooled connection is held by slow statements; it finds an outage within one
//!   check (2 s, plus its 1 s time limit);
//! - or a connection of the pool was handed out (or opened) since the request started or within
//!   the acquire timeout (and a little slack) before now (the evidence before the first check).
//!
//! The pool's size is no evidence: a connection dropped by a cancelled acquire or a cancelled
//! statement is closed and reopened under load (fewer than the maximum for a moment), and while
//! the database is down waiters hold slots with connection attempts (the maximum, none of them
//! usable). Pools made by [`lazy_pool`](crate::pg::pool::lazy_pool) record each hand-out, and the
//! background check its finding, per database; the pools of the request being served are kept in
//! a task-local set by [`track`], so the error mapping can look at them without every handler
//! passing them along. [`track`] also answers a request 503 `database_unavailable` at once while
//! the check finds every one of its databases down.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, PoisonError, RwLock};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use sqlx::PgPool;
use sqlx::postgres::PgConnectOptions;

use crate::pg::unavailable::{DATABASE_RETRY_AFTER_SECS, unavailable_problem};

/// How long after the acquire timeout a hand-out still counts for a full pool: the time between
/// sqlx giving up and the error being classified, with room for a loaded machine.
const CLASSIFY_SLACK: Duration = Duration::from_secs(1);

tokio::task_local! {
    static REQUEST: Arc<Tracked>;
}

/// The request being served: its pools and when it started.
struct Tracked {
    pools: Arc<TrackedPools>,
    started: Instant,
}

/// What is known of a database's reachability: when a connection to it was last handed out, in
/// milliseconds since [`EPOCH`] (0: never), and what the background check found last. Keyed by
/// the database the options point at and the role they log in as.
#[derive(Debug, Default)]
pub struct Reached {
    handed_out: AtomicU64,
    /// What the last background check found: [`CHECKED_UP`], [`CHECKED_DOWN`], or 0 before the
    /// first check.
    last_check: AtomicU8,
}

const CHECKED_UP: u8 = 1;
const CHECKED_DOWN: u8 = 2;

static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);
static REACHED: LazyLock<RwLock<HashMap<String, Arc<Reached>>>> = LazyLock::new(Default::default);

impl Reached {
    /// Records that a connection was handed out now.
    pub fn mark(&self) {
        self.handed_out
            .store(millis_since_epoch(Instant::now()), Ordering::Relaxed);
    }

    /// Records what the background check found.
    pub fn checked(&self, up: bool) {
        let found = if up { CHECKED_UP } else { CHECKED_DOWN };
        self.last_check.store(found, Ordering::Relaxed);
    }

    fn last_check(&self) -> u8 {
        self.last_check.load(Ordering::Relaxed)
    }

    fn is_checked_down(&self) -> bool {
        self.last_check() == CHECKED_DOWN
    }

    fn since(&self, moment: Instant) -> bool {
        let last = self.handed_out.load(Ordering::Relaxed);
        last != 0 && last >= millis_since_epoch(moment)
    }
}

fn millis_since_epoch(moment: Instant) -> u64 {
    // +1 so that a mark at the epoch itself is not "never".
    u64::try_from(moment.saturating_duration_since(*EPOCH).as_millis()).unwrap_or(u64::MAX) + 1
}

/// The database and the role: what one role can use, another (refused at login, without
/// rights on the schema) may not.
fn database_key(options: &PgConnectOptions) -> String {
    format!(
        "{}@{}:{}/{}",
        options.get_username(),
        options.get_host(),
        options.get_port(),
        options.get_database().unwrap_or_default()
    )
}

/// The record of hand-outs for the database `options` connect to (shared by its pools).
pub fn reached(options: &PgConnectOptions) -> Arc<Reached> {
    let key = database_key(options);
    let mut map = REACHED.write().unwrap_or_else(PoisonError::into_inner);
    map.entry(key).or_default().clone()
}

/// The pools of the routes [`track`] wraps, each with what is known of its database.
struct TrackedPools(Vec<(PgPool, Arc<Reached>)>);

impl TrackedPools {
    fn new(pools: Vec<PgPool>) -> Self {
        let with_reached = pools
            .into_iter()
            .map(|pool| {
                let reached = reached(&pool.connect_options());
                (pool, reached)
            })
            .collect();
        Self(with_reached)
    }
}

/// Makes `pools` the pools of every request `routes` serve. While the background check finds
/// every one of their databases down, a request is answered 503 `database_unavailable` at once,
/// instead of holding its place while it waits out the acquire timeout.
pub fn track<S>(routes: Router<S>, pools: Vec<PgPool>) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    routes.layer(from_fn_with_state(
        Arc::new(TrackedPools::new(pools)),
        scope_pools,
    ))
}

async fn scope_pools(
    State(pools): State<Arc<TrackedPools>>,
    request: Request,
    next: Next,
) -> Response {
    if pools.0.iter().all(|(_, reached)| reached.is_checked_down()) {
        return unavailable_problem(DATABASE_RETRY_AFTER_SECS).into_response();
    }
    let tracked = Tracked {
        pools,
        started: Instant::now(),
    };
    REQUEST.scope(Arc::new(tracked), next.run(request)).await
}

/// Whether a `PoolTimedOut` of the current request means the pools were busy, not unreachable
/// (see the module documentation). Outside a tracked request: no evidence, so `false`.
pub fn a_pool_is_busy() -> bool {
    REQUEST
        .try_with(|tracked| {
            let now = Instant::now();
            // Which pool timed out is not known: with one database found down (news' primary,
            // its replica still up), the wait is blamed on that one.
            let pools = &tracked.pools.0;
            let one_down = pools.iter().any(|(_, reached)| reached.is_checked_down());
            !one_down
                && pools
                    .iter()
                    .any(|(pool, reached)| is_busy(pool, reached, tracked.started, now))
        })
        .unwrap_or(false)
}

fn is_busy(pool: &PgPool, reached: &Reached, request_started: Instant, now: Instant) -> bool {
    if reached.last_check() == CHECKED_UP {
        return true;
    }
    let window = pool.options().get_acquire_timeout() + CLASSIFY_SLACK;
    let window_start = now.checked_sub(window).unwrap_or(*EPOCH);
    reached.since(request_started.min(window_start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_counts_from_its_moment_on() {
        let reached = Reached::default();
        let before = Instant::now();
        assert!(!reached.since(before), "never reached");
        reached.mark();
        assert!(reached.since(before));
        assert!(!reached.since(Instant::now() + Duration::from_secs(1)));
    }

    #[test]
    fn outside_a_tracked_request_nothing_is_busy() {
        assert!(!a_pool_is_busy());
    }

    /// news with its primary down and its replica up: a write's timed-out wait is the primary's
    /// outage (`database_unavailable`), not a busy pool (`overloaded`).
    #[tokio::test]
    async fn a_database_found_down_is_blamed_for_the_wait() {
        let pool = |role: &str| {
            let options = PgConnectOptions::new()
                .host("127.0.0.1")
                .port(1)
                .username(role)
                .database("pressure_test");
            sqlx::postgres::PgPoolOptions::new().connect_lazy_with(options)
        };
        let (primary, replica) = (pool("primary_role"), pool("replica_role"));
        reached(&primary.connect_options()).checked(false);
        reached(&replica.connect_options()).checked(true);
        let busy_with = |pools: Vec<PgPool>| {
            let tracked = Arc::new(Tracked {
                pools: Arc::new(TrackedPools::new(pools)),
                started: Instant::now(),
            });
            REQUEST.scope(tracked, async { a_pool_is_busy() })
        };
        assert!(!busy_with(vec![primary.clone(), replica.clone()]).await);
        assert!(busy_with(vec![replica]).await, "a reachable database alone");
        assert!(!busy_with(vec![primary]).await);
    }
}
