//! `Idempotency-Key` records (docs/conventions.md), the same for every service that takes the header.
//!
//! Keys are scoped to the caller and kept 24 h. Within the write's own transaction:
//! 1. `pg_try_advisory_xact_lock` on a hash of (scope, caller, key). Failing to get it means
//!    another request with this key is running: 409 `idempotency_key_in_use`. The lock dies with
//!    its transaction, so a crashed or abandoned attempt never blocks a retry.
//! 2. A stored, unexpired record with the same request hash is replayed byte for byte with
//!    `Idempotency-Replayed: true`; another hash is 422 `idempotency_key_reused`.
//! 3. Otherwise the write proceeds and [`complete`] stores the response in the same transaction,
//!    so the record exists exactly when the write does. Validation failures store nothing.
//!
//! The SQL names an unqualified `idempotency_keys` table: each service has one of the same shape
//! in its own schema (connections pin `search_path`), with columns `caller_id`, `key`,
//! `request_hash` (bytea), `response_status`, `response_body` (bytea), `location`, `created_at`
//! and `expires_at`, keyed by (`caller_id`, `key`).

use std::time::Duration;

use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use sha2::{Digest, Sha256};
use sqlx::{FromRow, PgConnection, PgPool};

use crate::http::codes::SharedCode;
use crate::http::problem::Problem;

pub static IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
pub static IDEMPOTENCY_REPLAYED: HeaderName = HeaderName::from_static("idempotency-replayed");

pub const MAX_KEY_LEN: usize = 255;
/// How long a key is remembered.
pub const RETENTION_HOURS: i32 = 24;

/// The key of the request, if any: 1..=255 visible ASCII characters, at most one header.
pub fn key_from_headers(headers: &HeaderMap) -> Result<Option<String>, Problem> {
    let mut values = headers.get_all(&IDEMPOTENCY_KEY).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(invalid_key("send at most one Idempotency-Key header"));
    }
    let bytes = value.as_bytes();
    if !is_valid_key(bytes) {
        return Err(Problem::from_code(SharedCode::InvalidIdempotencyKey));
    }
    Ok(Some(String::from_utf8_lossy(bytes).into_owned()))
}

pub fn is_valid_key(bytes: &[u8]) -> bool {
    (1..=MAX_KEY_LEN).contains(&bytes.len()) && bytes.iter().all(|b| (0x21..=0x7e).contains(b))
}

fn invalid_key(detail: &str) -> Problem {
    Problem::from_code(SharedCode::InvalidIdempotencyKey).with_detail(detail)
}

/// Hash of the validated input (not its bytes), so bodies that differ only in whitespace or key
/// order are the same request.
pub fn request_hash<T: Serialize>(input: &T) -> Vec<u8> {
    let canonical = serde_json::to_vec(input).unwrap_or_default();
    Sha256::digest(&canonical).to_vec()
}

/// The advisory lock id of (caller, key) in `scope`: 64 bits of a SHA-256, so unrelated keys do
/// not collide. The scope keeps each service's lock space apart when schemas share a database.
pub fn lock_key(scope: &str, caller: &str, key: &str) -> i64 {
    let digest = Sha256::new()
        .chain_update(scope.as_bytes())
        .chain_update(b"\0")
        .chain_update(caller.as_bytes())
        .chain_update(b"\0")
        .chain_update(key.as_bytes())
        .finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(first)
}

/// A response stored under a key, replayed byte for byte.
#[derive(Debug, Clone, FromRow)]
pub struct StoredResponse {
    pub request_hash: Vec<u8>,
    pub response_status: i16,
    pub response_body: Vec<u8>,
    pub location: Option<String>,
}

impl IntoResponse for StoredResponse {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.response_status as u16).unwrap_or(StatusCode::OK);
        let mut response = (status, self.response_body).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(
            IDEMPOTENCY_REPLAYED.clone(),
            HeaderValue::from_static("true"),
        );
        if let Some(location) = self.location.and_then(|l| HeaderValue::from_str(&l).ok()) {
            headers.insert(header::LOCATION, location);
        }
        response
    }
}

pub enum Begin {
    /// First use of the key (or its record expired): do the work, then call [`complete`].
    Proceed,
    /// Seen before with the same body: answer with this.
    Replay(StoredResponse),
}

/// Steps 1 and 2 of the module docs, inside the caller's transaction. Generic over the service's
/// error type, which must take both a refusal and a database error.
pub async fn begin<E>(
    tx: &mut PgConnection,
    scope: &str,
    caller: &str,
    key: &str,
    request_hash: &[u8],
) -> Result<Begin, E>
where
    E: From<Problem> + From<sqlx::Error>,
{
    let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_xact_lock($1)")
        .bind(lock_key(scope, caller, key))
        .fetch_one(&mut *tx)
        .await?;
    if !locked {
        return Err(Problem::from_code(SharedCode::IdempotencyKeyInUse).into());
    }
    let stored = sqlx::query_as::<_, StoredResponse>(
        "SELECT request_hash, response_status, response_body, location FROM idempotency_keys \
         WHERE caller_id = $1 AND key = $2 AND expires_at > now()",
    )
    .bind(caller)
    .bind(key)
    .fetch_optional(&mut *tx)
    .await?;
    match stored {
        None => Ok(Begin::Proceed),
        Some(stored) if stored.request_hash == request_hash => Ok(Begin::Replay(stored)),
        Some(_) => Err(Problem::from_code(SharedCode::IdempotencyKeyReused).into()),
    }
}

/// Stores the response under the key (replacing an expired record), in the caller's
/// transaction, and drops the caller's other expired records while at it.
pub async fn complete(
    tx: &mut PgConnection,
    caller: &str,
    key: &str,
    request_hash: &[u8],
    status: StatusCode,
    body: &[u8],
    location: Option<&str>,
) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM idempotency_keys WHERE caller_id = $1 AND expires_at <= now()")
        .bind(caller)
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "INSERT INTO idempotency_keys \
           (caller_id, key, request_hash, response_status, response_body, location, \
            created_at, expires_at) \
         VALUES ($1, $2, $3, $4, $5, $6, now(), now() + make_interval(hours => $7))",
    )
    .bind(caller)
    .bind(key)
    .bind(request_hash)
    .bind(status.as_u16() as i16)
    .bind(body)
    .bind(location)
    .bind(RETENTION_HOURS)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// What a create made: the 201 body and the new resource's `Location`.
pub struct Created<T> {
    pub body: T,
    pub location: String,
}

/// Runs `create` in one transaction and answers 201 with its body and `Location`. With a `key`
/// (already read with [`key_from_headers`]), the transaction first takes the key for
/// `caller_id` in the service's lock `scope`: a repeat of the same `request` replays the stored
/// answer without running `create`, a different request under the same key is refused, and a
/// fresh answer is stored with the transaction that made it, so a failed create stores nothing.
///
/// A transaction PostgreSQL rolls back to break a deadlock (see [`TransactionConflict`]) kept
/// nothing, key record included, so it is run again, at most [`CONFLICT_ATTEMPTS`] times in all
/// (within the request's deadline, like any statement): the client gets the answer of a run that
/// was not caught in the cycle rather than a 500. So `create` is cloned for each run (a closure
/// that borrows what it reads is).
pub async fn idempotent_create<T, E>(
    db: &PgPool,
    scope: &str,
    caller_id: &str,
    key: Option<&str>,
    request: &impl Serialize,
    create: impl AsyncFnOnce(&mut PgConnection) -> Result<Created<T>, E> + Clone,
) -> Result<Response, E>
where
    T: Serialize,
    E: From<Problem> + From<sqlx::Error> + TransactionConflict,
{
    let request_hash = request_hash(request);
    let mut attempt = 1;
    loop {
        let run = create.clone();
        match create_once(db, scope, caller_id, key, &request_hash, run).await {
            Err(error) if error.is_transaction_conflict() && attempt < CONFLICT_ATTEMPTS => {
                tracing::warn!(
                    attempt,
                    "PostgreSQL rolled the transaction back (a deadlock); running it again"
                );
                attempt += 1;
            }
            answer => return answer,
        }
    }
}

/// How many times [`idempotent_create`] runs a transaction that PostgreSQL keeps rolling back
/// to break deadlocks. A round rolled back for a deadlock has waited `deadlock_timeout` (1 s by
/// default) or more, so the request's deadline (5 s by default) allows a few.
pub const CONFLICT_ATTEMPTS: u32 = 3;

/// An error that may be PostgreSQL rolling the transaction back because it conflicted with
/// another ([`crate::pg::pool::is_transaction_conflict`]): the services' error types say so of
/// their database errors.
pub trait TransactionConflict {
    fn is_transaction_conflict(&self) -> bool;
}

/// One run of [`idempotent_create`]'s transaction.
async fn create_once<T, E>(
    db: &PgPool,
    scope: &str,
    caller_id: &str,
    key: Option<&str>,
    request_hash: &[u8],
    create: impl AsyncFnOnce(&mut PgConnection) -> Result<Created<T>, E>,
) -> Result<Response, E>
where
    T: Serialize,
    E: From<Problem> + From<sqlx::Error>,
{
    let mut tx = crate::pg::pool::begin_within_deadline(db).await?;
    let answer = async {
        if let Some(key) = key
            && let Begin::Replay(stored) =
                begin::<E>(&mut tx, scope, caller_id, key, request_hash).await?
        {
            return Ok(stored.into_response());
        }
        let created = create(&mut tx).await?;
        // Stored as the bytes the answer sends, so a replay is the same answer byte for byte.
        let body = serde_json::to_vec(&created.body).map_err(|_| Problem::internal())?;
        if let Some(key) = key {
            let location = Some(created.location.as_str());
            let status = StatusCode::CREATED;
            complete(
                &mut tx,
                caller_id,
                key,
                request_hash,
                status,
                &body,
                location,
            )
            .await?;
        }
        Ok(created_response(body, &created.location))
    }
    .await;
    // Ended before answering, whatever the outcome: a transaction merely dropped is rolled back
    // later, when its connection goes back to the pool, and until then it holds the key's lock,
    // so a client retrying at once after a refusal could find its own key "in use" (409).
    match answer {
        Ok(response) => {
            tx.commit().await?;
            Ok(response)
        }
        Err(error) => {
            let _ = tx.rollback().await;
            Err(error)
        }
    }
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

/// Deletes expired records in small batches; returns how many went.
///
/// A batch skips the records another transaction holds: a request's [`complete`] deletes its
/// caller's expired records in the order of its own plan, and a batch that waited for one of them
/// while holding others could deadlock with it (the request would fail). Skipped records are
/// being deleted by their holder, or are left for the next sweep.
pub async fn cleanup_expired(db: &PgPool) -> Result<u64, sqlx::Error> {
    let mut removed = 0;
    loop {
        let batch = sqlx::query(
            "DELETE FROM idempotency_keys WHERE (caller_id, key) IN ( \
               SELECT caller_id, key FROM idempotency_keys WHERE expires_at <= now() \
               LIMIT 1000 FOR UPDATE SKIP LOCKED)",
        )
        .execute(db)
        .await?
        .rows_affected();
        removed += batch;
        if batch < 1000 {
            return Ok(removed);
        }
    }
}

/// Runs [`cleanup_expired`] every `every` for as long as the service serves.
pub async fn cleanup_task(db: PgPool, every: Duration) {
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        match cleanup_expired(&db).await {
            Ok(0) => {}
            Ok(removed) => tracing::info!(removed, "expired idempotency keys removed"),
            Err(error) => tracing::warn!(%error, "idempotency key cleanup failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_syntax() {
        assert!(is_valid_key(b"a"));
        assert!(is_valid_key(&[b'k'; 255]));
        assert!(is_valid_key(b"0193a1b2-c3d4_!~"));
        assert!(!is_valid_key(b""));
        assert!(!is_valid_key(&[b'k'; 256]));
        assert!(!is_valid_key(b"has space"));
        assert!(!is_valid_key(b"tab\there"));
        assert!(!is_valid_key("caf\u{e9}".as_bytes()));
    }

    #[test]
    fn same_input_same_hash() {
        #[derive(Serialize)]
        struct Input {
            a: i64,
        }
        assert_eq!(request_hash(&Input { a: 1 }), request_hash(&Input { a: 1 }));
        assert_ne!(request_hash(&Input { a: 1 }), request_hash(&Input { a: 2 }));
    }

    #[test]
    fn lock_keys_separate_scopes_callers_and_keys() {
        assert_eq!(lock_key("s", "u1", "k"), lock_key("s", "u1", "k"));
        assert_ne!(lock_key("s", "u1", "k"), lock_key("t", "u1", "k"));
        assert_ne!(lock_key("s", "u1", "k"), lock_key("s", "u2", "k"));
        assert_ne!(lock_key("s", "u1", "k1"), lock_key("s", "u1", "k"));
        // The separator keeps ("ab", "c") and ("a", "bc") apart.
        assert_ne!(lock_key("s", "ab", "c"), lock_key("s", "a", "bc"));
    }

    #[test]
    fn replays_carry_the_header_status_and_location() {
        let stored = StoredResponse {
            request_hash: vec![],
            response_status: 201,
            response_body: b"{}".to_vec(),
            location: Some("/x/1".into()),
        };
        let response = stored.into_response();
        assert_eq!(response.status(), StatusCode::CREATED);
        assert_eq!(response.headers()[&IDEMPOTENCY_REPLAYED], "true");
        assert_eq!(response.headers()[header::LOCATION], "/x/1");
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
    }
}
