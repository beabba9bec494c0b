//! `Idempotency-Key` on creates: [`idempotent_create`] runs a create in the transaction that
//! holds the key and stores its answer, so a repeat replays the first answer and changes
//! nothing. The records are shared-auth's (table `idempotency_keys` of this schema), in lingo's
//! own advisory-lock space; [`cleanup_task`] sweeps expired ones while the service runs.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use shared_auth::pg::idempotency::{Begin, begin, complete, request_hash};
pub use shared_auth::pg::idempotency::{cleanup_expired, cleanup_task, key_from_headers};
use sqlx::{PgConnection, PgPool};

use crate::error::{Error, Result};

/// Keeps lingo's advisory locks apart from other users of advisory locks in the database.
const LOCK_SCOPE: &str = "lingo:idempotency";

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
        && let Begin::Replay(stored) =
            begin::<Error>(&mut tx, LOCK_SCOPE, caller_id, key, &request_hash).await?
    {
        return Ok(stored.into_response());
    }
    let created = create(&mut tx).await?;
    let body = serde_json::to_vec(&created.body).map_err(anyhow::Error::from)?;
    if let Some(key) = key {
        let status = StatusCode::CREATED;
        let location = Some(created.location.as_str());
        complete(
            &mut tx,
            caller_id,
            key,
            &request_hash,
            status,
            &body,
            location,
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
    if let Ok(value) = HeaderValue::from_str(location) {
        headers.insert(header::LOCATION, value);
    }
    response
}
