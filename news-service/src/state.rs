//! What every handler can reach: the database handle (the two pools and the routing of reads
//! between them, see `read_routing`), the token verifier and the OpenAPI document, each
//! extractable on its own with `State<_>` (`FromRef`). Handlers take `State<Db>`, never a pool
//! or the whole state. Route modules depend on it and never on the crate root that assembles
//! them.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::FromRef;
use shared_auth::Verifier;
use tokio::sync::{Semaphore, SemaphorePermit};

pub use crate::read_routing::Db;
use crate::store::search::QueryParses;

/// The service's OpenAPI document, built once from the routers and served as it is.
#[derive(Clone)]
pub struct ApiDocument(pub Arc<utoipa::openapi::OpenApi>);

/// Searches served at once. A search can cost the database seconds where any other read costs
/// milliseconds (docs/news.md, "GET /v1/news/search"): searches may hold at most half of the
/// connections, so a caller sending many expensive ones cannot take every connection from the
/// other endpoints. A search past the limit waits for a turn as long as a request waits for a
/// pooled connection, then is refused with 503 `overloaded`: a burst of cheap searches is served,
/// not refused.
#[derive(Clone)]
pub struct SearchSlots {
    slots: Arc<Semaphore>,
    wait: Duration,
}

impl SearchSlots {
    /// Half of a pool of `connections` (at least one), each turn waited for at most `wait`.
    pub fn for_pool(connections: u32, wait: Duration) -> Self {
        let slots = (connections as usize).div_ceil(2).max(1);
        Self {
            slots: Arc::new(Semaphore::new(slots)),
            wait,
        }
    }

    /// A turn to search, held until dropped; `None` when none came free in time.
    pub async fn take(&self) -> Option<SemaphorePermit<'_>> {
        tokio::time::timeout(self.wait, self.slots.acquire())
            .await
            .ok()?
            .ok()
    }
}

/// Every field is its own `State<_>`: the derive writes a `FromRef` for each field's type.
#[derive(Clone, FromRef)]
pub struct AppState {
    pub db: Db,
    pub verifier: Arc<Verifier>,
    pub document: ApiDocument,
    pub search_slots: SearchSlots,
    /// Searches' queries as each text search configuration reads them (bounded).
    pub query_parses: Arc<QueryParses>,
}
