//! `Idempotency-Key` on creates: [`idempotent_create`] runs a create in the transaction that
//! holds the key and stores its answer, so a repeat replays the first answer and changes
//! nothing. The records are shared-auth's (table `idempotency_keys` of this schema), in lingo's
//! own advisory-lock space; [`cleanup_task`] sweeps expired ones while the service runs.

use axum::response::Response;
use serde::Serialize;
use shared_auth::pg::idempotency;
pub use shared_auth::pg::idempotency::{Created, cleanup_expired, cleanup_task, key_from_headers};
use sqlx::{PgConnection, PgPool};

use crate::error::Result;

/// Keeps lingo's advisory locks apart from other users of advisory locks in the database.
const LOCK_SCOPE: &str = "lingo:idempotency";

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
