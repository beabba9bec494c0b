//! `Idempotency-Key` for `POST /me/study-sessions` (API.md section 3): the records of
//! [`shared_auth::idempotency`] (table `idempotency_keys` of this schema), in lingo's own
//! advisory-lock space. A background task ([`cleanup_task`]) sweeps expired records.

pub use shared_auth::pg::idempotency::{
    Begin, StoredResponse, cleanup_expired, cleanup_task, complete, key_from_headers, request_hash,
};
use sqlx::PgConnection;

/// Keeps lingo's advisory locks apart from other users of advisory locks in the database.
const LOCK_SCOPE: &str = "lingo:idempotency";

/// Takes the key for this transaction and looks for an earlier answer (see the shared module).
pub async fn begin(
    tx: &mut PgConnection,
    learner_id: &str,
    key: &str,
    request_hash: &[u8],
) -> crate::Result<Begin> {
    shared_auth::pg::idempotency::begin(tx, LOCK_SCOPE, learner_id, key, request_hash).await
}
