//! lingo-service: the learning API of `/v1/lingo` (the contract is in docs/).
//!
//! It owns the `lingo` schema: the curated catalogue (languages, phrases, translations) and the
//! analytics tables, which it only reads, and the learners' study sessions, totals, answers
//! (review log), phrase memory states (FSRS) and idempotency records, which it writes. It verifies every token itself (analytics tools call it
//! without the gateway). It must never read another service's schema, write the catalogue or
//! analytics tables, or trust an identity that does not come from a verified token.
//!
//! Where things are: an endpoint's handler and OpenAPI annotation in `routes/<resource>.rs`, its
//! SQL in `store/<aggregate>.rs`, the rules and resource shapes it uses in `domain/`, its error
//! codes in `error.rs`, its documented problem responses in `problems.rs`; its tests in
//! `tests/api/<resource>.rs`. `app.rs` assembles the service, `openapi.rs` the document.
//!
//! Embedding (tests of other crates): [`migrate`] as `lingo_owner`, optionally [`seed()`] as
//! `lingo_pipeline`, then [`Application::build`] with a [`ServeConfig`] for `lingo_app`.

pub mod app;
pub mod config;
pub mod db;
pub mod domain;
pub mod error;
pub mod idempotency;
pub mod openapi;
pub mod problems;
pub mod routes;
pub mod seed;
pub mod state;
pub mod store;

pub use app::{Application, MAX_BODY_BYTES, router};
pub use config::{Config, ServeConfig};
pub use db::{Db, migrate};
pub use error::{Error, ErrorCode, Result};
pub use openapi::openapi;
pub use seed::{SeedSummary, seed, seed_demo_sessions, seed_with};
pub use state::AppState;
