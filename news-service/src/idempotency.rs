//! `Idempotency-Key` for creates (the contract's idempotency rules, see docs/): the records of
//! [`shared_auth::idempotency`] (table `idempotency_keys` of this schema), in news's own
//! advisory-lock space. [`idempotent_create`] runs a create and stores its answer in one
//! transaction, so a failed request stores nothing; [`cleanup_task`] sweeps expired records.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
pub use shared_auth::idempotency::{Begin, cleanup_task, complete, key_from_headers, request_hash};
use sqlx::{PgConnection, PgPool};

use crate::error::Result;

/// Keeps news's advisory locks apart from other users of advisory locks in the database.
const LOCK_SCOPE: &str = "news:idempotency";

/// The advisory lock id a request holds on (caller, key) while it runs.
pub fn lock_key(caller: &str, key: &str) -> i64 {
    shared_auth::idempotency::lock_key(LOCK_SCOPE, caller, key)
}

/// Takes the key for this transaction and looks for an earlier answer (see the shared module).
pub async fn begin(
    tx: &mut PgConnection,
    caller: &str,
    key: &str,
    request_hash: &[u8],
) -> Result<Begin> {
    shared_auth::idempotency::begin(tx, LOCK_SCOPE, caller, key, request_hash).await
}

/// Runs `create` in a transaction and answers 201 with the created resource and its
/// `Location`. With a key, the transaction first takes the key (a repeat with the same request
/// replays the first answer and creates nothing) and stores the answer before it commits.
pub async fn idempotent_create<T: Serialize>(
    pool: &PgPool,
    caller: &str,
    key: Option<&str>,
    request_hash: &[u8],
    location_of: impl FnOnce(&T) -> String,
    create: impl AsyncFnOnce(&mut PgConnection) -> Result<T>,
) -> Result<Response> {
    let mut tx = pool.begin().await?;
    if let Some(key) = key
        && let Begin::Replay(stored) = begin(&mut tx, caller, key, request_hash).await?
    {
        return Ok(stored.into_response());
    }
    let resource = create(&mut tx).await?;
    // Stored as the bytes the answer sends, so a replay is the same answer byte for byte.
    let body = serde_json::to_vec(&resource).map_err(|_| shared_auth::Problem::internal())?;
    let location = location_of(&resource);
    if let Some(key) = key {
        complete(
            &mut tx,
            caller,
            key,
            request_hash,
            StatusCode::CREATED,
            &body,
            Some(&location),
        )
        .await?;
    }
    tx.commit().await?;
    Ok(created(body, &location))
}

fn created(body: Vec<u8>, location: &str) -> Response {
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
