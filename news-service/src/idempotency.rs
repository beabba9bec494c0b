//! `Idempotency-Key` for `POST /comments` (API.md section 3): keys are scoped to the caller and
//! kept 24 h; a repeat with the same body replays the stored answer with
//! `Idempotency-Replayed: true`; another body is 422 `idempotency_key_reused`; a repeat while the
//! first is running is 409 `idempotency_key_in_use`. The record commits in the same transaction as
//! the comment, so a failed request stores nothing.
//!
//! "Running" is a transaction-scoped advisory lock on (caller, key): the first request holds it
//! until it commits, and a concurrent one that cannot take it answers 409 instead of waiting.

use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use sha2::{Digest, Sha256};
use shared_auth::Problem;
use sqlx::{Postgres, Transaction};

use crate::error::Result;

pub static IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
pub static IDEMPOTENCY_REPLAYED: HeaderName = HeaderName::from_static("idempotency-replayed");

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey(pub String);

/// 1..=255 visible ASCII characters.
pub fn is_valid_key(key: &[u8]) -> bool {
    (1..=255).contains(&key.len()) && key.iter().all(|b| (0x21..=0x7e).contains(b))
}

impl IdempotencyKey {
    pub fn from_headers(headers: &HeaderMap) -> Result<Option<Self>, Problem> {
        let mut values = headers.get_all(&IDEMPOTENCY_KEY).iter();
        let Some(value) = values.next() else {
            return Ok(None);
        };
        if values.next().is_some() || !is_valid_key(value.as_bytes()) {
            return Err(
                Problem::new(StatusCode::BAD_REQUEST, "invalid_idempotency_key").with_detail(
                    "Idempotency-Key must be one value of 1 to 255 visible ASCII characters",
                ),
            );
        }
        Ok(Some(Self(
            String::from_utf8_lossy(value.as_bytes()).into_owned(),
        )))
    }
}

/// Hash of the parsed request (not its bytes): the same JSON with other spacing is the same body.
pub fn request_hash<T: Serialize>(input: &T) -> String {
    let bytes = serde_json::to_vec(input).unwrap_or_default();
    Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The advisory lock id of (caller, key): 64 bits of a SHA-256, so unrelated keys do not collide.
pub fn lock_key(caller: &str, key: &str) -> i64 {
    let digest = Sha256::new()
        .chain_update(b"news-comments\0")
        .chain_update(caller.as_bytes())
        .chain_update(b"\0")
        .chain_update(key.as_bytes())
        .finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(first)
}

/// A stored answer.
#[derive(Debug, Clone)]
pub struct Stored {
    pub status: StatusCode,
    pub location: Option<String>,
    pub body: serde_json::Value,
}

impl Stored {
    pub fn replay(self) -> Response {
        let mut response = (self.status, axum::Json(self.body)).into_response();
        let headers = response.headers_mut();
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
    /// First use (or the old record expired): do the work, then `store`.
    Fresh,
    Replay(Stored),
}

/// Takes the key for this transaction and looks for an earlier answer.
pub async fn begin(
    tx: &mut Transaction<'static, Postgres>,
    caller: &str,
    key: &IdempotencyKey,
    request_hash: &str,
) -> Result<Begin> {
    let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_xact_lock($1)")
        .bind(lock_key(caller, &key.0))
        .fetch_one(&mut **tx)
        .await?;
    if !locked {
        return Err(Problem::new(StatusCode::CONFLICT, "idempotency_key_in_use")
            .with_detail("a request with this Idempotency-Key is still being processed")
            .into());
    }
    let row: Option<(String, i16, Option<String>, serde_json::Value)> = sqlx::query_as(
        "SELECT request_hash, status, location, body FROM idempotency_keys \
         WHERE caller_id = $1 AND key = $2 AND created_at > now() - interval '24 hours'",
    )
    .bind(caller)
    .bind(&key.0)
    .fetch_optional(&mut **tx)
    .await?;
    let Some((stored_hash, status, location, body)) = row else {
        return Ok(Begin::Fresh);
    };
    if stored_hash != request_hash {
        return Err(
            Problem::new(StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused")
                .with_detail("this Idempotency-Key was used with a different request body")
                .into(),
        );
    }
    let status = StatusCode::from_u16(status as u16).unwrap_or(StatusCode::OK);
    Ok(Begin::Replay(Stored {
        status,
        location,
        body,
    }))
}

/// Records the answer in the request's transaction (replacing an expired record of the key).
pub async fn store(
    tx: &mut Transaction<'static, Postgres>,
    caller: &str,
    key: &IdempotencyKey,
    request_hash: &str,
    stored: &Stored,
) -> Result<()> {
    // Expired records of this caller go as a side effect; the key index keeps this cheap.
    sqlx::query("DELETE FROM idempotency_keys WHERE caller_id = $1 AND created_at <= now() - interval '24 hours'")
        .bind(caller)
        .execute(&mut **tx)
        .await?;
    sqlx::query(
        "INSERT INTO idempotency_keys (caller_id, key, request_hash, status, location, body) \
         VALUES ($1, $2, $3, $4, $5, $6) \
         ON CONFLICT (caller_id, key) DO UPDATE SET request_hash = EXCLUDED.request_hash, \
           status = EXCLUDED.status, location = EXCLUDED.location, body = EXCLUDED.body, \
           created_at = now()",
    )
    .bind(caller)
    .bind(&key.0)
    .bind(request_hash)
    .bind(stored.status.as_u16() as i16)
    .bind(&stored.location)
    .bind(&stored.body)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_syntax() {
        let long = "k".repeat(255);
        let too_long = "k".repeat(256);
        let table: [(&str, bool); 6] = [
            ("abc-123", true),
            (&long, true),
            ("", false),
            (&too_long, false),
            ("has space", false),
            ("tab\t", false),
        ];
        for (key, ok) in table {
            assert_eq!(is_valid_key(key.as_bytes()), ok, "{key:?}");
        }
        assert!(!is_valid_key("clé".as_bytes()));
    }

    #[test]
    fn lock_keys_separate_callers_and_keys() {
        assert_eq!(lock_key("u1", "k"), lock_key("u1", "k"));
        assert_ne!(lock_key("u1", "k"), lock_key("u2", "k"));
        assert_ne!(lock_key("u1", "k1"), lock_key("u1", "k"));
        // The separator keeps ("ab", "c") and ("a", "bc") apart.
        assert_ne!(lock_key("ab", "c"), lock_key("a", "bc"));
    }
}
