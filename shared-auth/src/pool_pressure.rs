//! Telling "no connection came free in time" (503 `overloaded`) from "the database refuses
//! connections" (503 `database_unavailable`). sqlx reports both as `PoolTimedOut`; the difference
//! is the pool: holding every connection it may open means they were all busy (overload), fewer
//! means it could not open one (the database is unavailable). The pools of the request being served are kept in a task-local set by [`track`],
//! so the error mapping in `db` can look at them without every handler passing them along.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::Response;
use sqlx::PgPool;

tokio::task_local! {
    static POOLS: Arc<[PgPool]>;
}

/// Makes `pools` the pools of every request `routes` serve.
pub fn track<S>(routes: Router<S>, pools: Vec<PgPool>) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    routes.layer(from_fn_with_state(Arc::from(pools), scope_pools))
}

async fn scope_pools(State(pools): State<Arc<[PgPool]>>, request: Request, next: Next) -> Response {
    POOLS.scope(pools, next.run(request)).await
}

/// Whether a pool of the current request has opened every connection it may open.
pub fn a_pool_is_full() -> bool {
    POOLS
        .try_with(|pools| pools.iter().any(is_full))
        .unwrap_or(false)
}

/// Idle connections are not looked at: under load a connection released an instant ago is idle
/// only until the next waiter takes it, and that waiter is not the one that timed out.
fn is_full(pool: &PgPool) -> bool {
    pool.size() >= pool.options().get_max_connections()
}
