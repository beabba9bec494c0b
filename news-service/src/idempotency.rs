//! `Idempotency-Key` for creates (the contract's idempotency rules, see docs/): the records of
//! [`shared_auth::idempotency`] (table `idempotency_keys` of this schema), in news's own
//! advisory-lock space. [`idempotent_create`] runs a create and stores its answer in one
//! transaction, so a failed request stores nothing; [`cleanup_task`] sweeps expired records.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
pub use shared_auth::pg::idempotency::{
    Begin, cleanup_task, complete, key_from_headers, request_hash,
};
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

/// Takes the key for this transaction and looks for an earlier answer (see the shared module).
pub async fn begin(
    tx: &mut PgConnection,
    caller: &str,
    key: &str,
    request_hash: &[u8],
) -> Result<Begin> {
    shared_auth::pg::idempotency::begin(tx, LOCK_SCOPE, caller, key, request_hash).await
}

/// What a create made: the 201 body and the new resource's `Location`.
pub struct Created<T> {
    pub body: T,
    pub location: String,
}

/// Runs `create` in one transaction and answers 201 with its body and `Location`. With a `key`
/// (already read with [`key_from_headers`]), the transaction first takes the key for
/// `caller_id`: a repeat of the same `request` replays the stored answer without running
/// `create`, a different request under the same key is refused, and a fresh answer is stored
/// with the transaction that made it.
pub async fn idempotent_create<T: Serialize>(
    db: &PgPool,
    caller_id: &str,
    key: Option<&str>,
    request: &impl Serialize,
    create: impl AsyncFnOnce(&mut PgConnection) -> Result<Created<T>>,
) -> Result<Response> {
    let request_hash = request_hash(request);
    let mut tx = db.begin().await?;
    if let Some(key) = key
        && let Begin::Replay(stored) = begin(&mut tx, caller_id, key, &request_hash).await?
    {
        return Ok(stored.into_response());
    }
    let created = create(&mut tx).await?;
    // Stored as the bytes the answer sends, so a replay is the same answer byte for byte.
    let body = serde_json::to_vec(&created.body).map_err(|_| shared_auth::Problem::internal())?;
    if let Some(key) = key {
        complete(
            &mut tx,
            caller_id,
            key,
            &request_hash,
            StatusCode::CREATED,
            &body,
            Some(&created.location),
        )
        .await?;
    }
    tx.commit().await?;
    Ok(created_response(body, &created.location))
}

fn created_response(body: Vec<u8>, location: &str) -> Response {
    let mut response = (StatusCode::CREATED, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Ok(location) = HeaderValue::from_str(location) {
        headers.insert(header::LOCATION, location);
    }
    response
}
