//! `Idempotency-Key` for creates (the contract's idempotency rules, see docs/): the records of
//! [`shared_auth::pg::idempotency`] (table `idempotency_keys` of this schema), in news's own
//! advisory-lock space. [`idempotent_create`] runs a create and stores its answer in one
//! transaction, so a failed request stores nothing; [`cleanup_task`] sweeps expired records.

use axum::response::Response;
use serde::Serialize;
use shared_auth::pg::idempotency;
pub use shared_auth::pg::idempotency::{Created, cleanup_task, key_from_headers};
use sqlx::{PgConnection, PgPool};
use utoipa::IntoParams;

use crate::error::Result;

/// `Idempotency-Key` of `POST /comments`.
#[derive(IntoParams)]
#[into_params(parameter_in = Header)]
pub struct IdempotencyKeyHeader {
    /// Scoped to the caller, kept 24 h. A repeat with the same body replays the first answer
    /// (`Idempotency-Replayed: true`) and changes nothing; with another body it is 422
    /// `idempotency_key_reused`; while the first is still running, 409 `idempotency_key_in_use`.
    /// A request that fails validation stores nothing.
    #[param(
        rename = "Idempotency-Key",
        value_type = String,
        required = false,
        min_length = 1,
        max_length = 255,
        pattern = "^[!-~]{1,255}$"
    )]
    pub idempotency_key: Option<String>,
}

/// Keeps news's advisory locks apart from other users of advisory locks in the database.
const LOCK_SCOPE: &str = "news:idempotency";

/// The advisory lock id a request holds on (caller, key) while it runs.
pub fn lock_key(caller: &str, key: &str) -> i64 {
    shared_auth::pg::idempotency::lock_key(LOCK_SCOPE, caller, key)
}

/// Runs `create` under the request's `Idempotency-Key` in this service's lock scope (see
/// [`shared_auth::pg::idempotency::idempotent_create`]).
pub async fn idempotent_create<T: Serialize>(
    db: &PgPool,
    caller_id: &str,
    key: Option<&str>,
    request: &impl Serialize,
    create: impl AsyncFnOnce(&mut PgConnection) -> Result<Created<T>> + Clone,
) -> Result<Response> {
    idempotency::idempotent_create(db, LOCK_SCOPE, caller_id, key, request, create).await
}
