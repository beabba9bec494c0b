//! shared-auth: the one library every binary links.
//!
//! It owns bearer-token verification (HS256 secret, JWKS file or URL with rotation), the axum
//! extractors for a required or optional caller, and the RFC 9457 problem type every refusal is
//! written in, plus the request plumbing all three binaries need (request ids, strict JSON and
//! query extractors, paging, logging, shutdown, database availability, `Idempotency-Key` records,
//! health checks). It owns no resource routes and no data of its own: it must never learn about
//! lingo or news resources.

pub mod claims;
pub mod db;
pub mod extract;
pub mod health;
pub mod idempotency;
pub mod json;
pub mod jwks;
pub mod load;
pub mod metrics;
pub mod mint;
pub mod openapi;
pub mod otlp_http;
pub mod paging;
pub mod pool_pressure;
pub mod problem;
pub mod request_id;
pub mod serve;
pub mod stack;
pub mod telemetry;
pub mod verify;

#[cfg(feature = "testing")]
pub mod testing;

pub use claims::{Caller, Claims};
pub use extract::{OptionalCaller, RequiredCaller};
pub use json::{Json, Query};
pub use paging::{Page, PageQuery, Paging};
pub use problem::{FieldError, Problem};
pub use verify::{AuthConfig, AuthError, Verifier, bearer_token};
