//! shared-auth: the one library every binary links.
//!
//! It owns what the gateway and both services must do identically: bearer-token verification
//! and the caller extractors (`auth`, the heart), the HTTP plumbing every answer goes through
//! (`http`: RFC 9457 problems and their typed codes, request ids, strict JSON and query
//! extractors, paging, the layer stack, request metrics, OpenAPI pieces), PostgreSQL pools,
//! readiness, `Idempotency-Key` records and pool metrics (`pg`, feature `postgres`, so the
//! gateway links no database driver), logging and tracing (`telemetry`), and the test harness
//! (`testing`, feature `testing`). It owns no resource routes and no data of its own: it must
//! never learn about lingo or news resources, and `auth` and `http` must never need a database.

pub mod auth;
pub mod http;
#[cfg(feature = "postgres")]
pub mod pg;
pub mod telemetry;
#[cfg(feature = "testing")]
pub mod testing;

pub use auth::claims::Caller;
pub use auth::error::AuthError;
pub use auth::extract::{OptionalCaller, RequiredCaller};
pub use auth::verify::{AuthConfig, Verifier, bearer_token};
pub use http::codes::{ErrorCode, SharedCode};
pub use http::json::{FieldRules, Json, Query};
pub use http::paging::{Page, PageQuery, Paging};
pub use http::problem::{FieldError, Problem};
