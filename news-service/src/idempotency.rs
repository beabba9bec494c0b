//! `Idempotency-Key` for `POST /comments` (API.md section 3): the records of
//! [`shared_auth::idempotency`] (table `idempotency_keys` of this schema), in news's own
//! advisory-lock space. The record commits in the same transaction as the comment, so a failed
//! request stores nothing.

pub use shared_auth::pg::idempotency::{Begin, complete, key_from_headers, request_hash};
use sqlx::PgConnection;

use crate::error::Result;

/// Keeps news's advisory locks apart from other users of advisory locks in the database.
const LOCK_SCOPE: &str = "news-comments";

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
