//! Telling "no connection came free in time" (503 `overloaded`) from "the database cannot be
//! reached" (503 `database_unavailable`). sqlx reports both as `PoolTimedOut`, so the answer comes
//! from evidence that the database was reachable while the request waited:
//!
//! - a connection of the pool was handed out (or opened) since the request started: others were
//!   served, this one waited its turn in vain;
//! - or every connection the pool may open is open and checked out, and one was handed out
//!   within the acquire timeout before now: all are busy with other requests.
//!
//! The pool's size alone is no evidence: a connection dropped by a cancelled acquire is closed and
//! reopened under load (fewer than the maximum for a moment), and while the database is down
//! waiters hold slots with connection attempts (the maximum, none of them usable). Pools made by
//! [`lazy_pool`](crate::pg::pool::lazy_pool) record each hand-out; the pools of the request being
//! served are kept in a task-local set by [`track`], so the error mapping can look at them
//! without every handler passing them along.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, PoisonError, RwLock};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::Response;
use sqlx::PgPool;
use sqlx::postgres::PgConnectOptions;

/// How long after the acquire timeout a hand-out still counts for a full pool: the time between
/// sqlx giving up and the error being classified, with room for a loaded machine.
const CLASSIFY_SLACK: Duration = Duration::from_secs(1);

tokio::task_local! {
    static REQUEST: Arc<Tracked>;
}

struct Tracked {
    pools: Vec<PgPool>,
    started: Instant,
}

/// When a connection to a database was last handed out, in milliseconds since [`EPOCH`] (0:
/// never). Keyed by the database the options point at, which is what "reachable" is about.
#[derive(Debug, Default)]
pub struct Reached(AtomicU64);

static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);
static REACHED: LazyLock<RwLock<HashMap<String, Arc<Reached>>>> = LazyLock::new(Default::default);

impl Reached {
    /// Records that a connection was handed out now.
    pub fn mark(&self) {
        self.0
            .store(millis_since_epoch(Instant::now()), Ordering::Relaxed);
    }

    fn since(&self, moment: Instant) -> bool {
        let last = self.0.load(Ordering::Relaxed);
        last != 0 && last >= millis_since_epoch(moment)
    }
}

fn millis_since_epoch(moment: Instant) -> u64 {
    // +1 so that a mark at the epoch itself is not "never".
    u64::try_from(moment.saturating_duration_since(*EPOCH).as_millis()).unwrap_or(u64::MAX) + 1
}

fn database_key(options: &PgConnectOptions) -> String {
    format!(
        "{}:{}/{}",
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

fn reached_for(pool: &PgPool) -> Option<Arc<Reached>> {
    let key = database_key(&pool.connect_options());
    let map = REACHED.read().unwrap_or_else(PoisonError::into_inner);
    map.get(&key).cloned()
}

/// Makes `pools` the pools of every request `routes` serve.
pub fn track<S>(routes: Router<S>, pools: Vec<PgPool>) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    routes.layer(from_fn_with_state(
        Arc::<[PgPool]>::from(pools),
        scope_pools,
    ))
}

async fn scope_pools(State(pools): State<Arc<[PgPool]>>, request: Request, next: Next) -> Response {
    let tracked = Tracked {
        pools: pools.to_vec(),
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
            tracked
                .pools
                .iter()
                .any(|pool| is_busy(pool, tracked.started, now))
        })
        .unwrap_or(false)
}

fn is_busy(pool: &PgPool, request_started: Instant, now: Instant) -> bool {
    let Some(reached) = reached_for(pool) else {
        return false;
    };
    if reached.since(request_started) {
        return true;
    }
    let window = pool.options().get_acquire_timeout() + CLASSIFY_SLACK;
    let all_checked_out =
        pool.size() >= pool.options().get_max_connections() && pool.num_idle() == 0;
    all_checked_out
        && now
            .checked_sub(window)
            .is_none_or(|start| reached.since(start))
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
}
