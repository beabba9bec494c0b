//! news-service: the news API (`/v1/news`; the contract is in docs/).
//!
//! It owns the `news` schema: the curated catalogue (organisations, journalists, articles), which
//! it only reads at run time, and the engagement tables (likes, bookmarks, follows, comments) it
//! writes. It serves article reads (anonymous ones from a read pool, cacheable), engagement,
//! personal lists and its own OpenAPI 3.1 document (`openapi()`, at `/v1/news/openapi.json`),
//! plus the `migrate`, `seed`, `import` and `recount` commands. It must not read any other service's
//! schema, trust an identity header, or write curated tables as its runtime role: it verifies
//! every token itself through shared-auth.
//!
//! Where things live: `routes/` (HTTP only, one module per resource), `store/` (all SQL),
//! `domain/` (pure rules and the resource shapes clients see), `path_params` (the path
//! parameters several routes share), `error` (the error enum and codes), `problems` (the
//! catalogue of problem answers), `openapi` (the document), `read_routing` (the database handle
//! `Db` and which database serves a read), `state` (what handlers reach), `app` (the service
//! skeleton).

pub mod app;
pub mod config;
pub mod counter_fold;
pub mod db;
pub mod domain;
pub mod error;
pub mod idempotency;
pub mod import;
pub mod openapi;
pub mod path_params;
pub mod problems;
pub mod read_routing;
pub mod recount;
pub mod routes;
pub mod seed;
pub mod state;
pub mod store;

pub use app::{Application, MAX_BODY_BYTES, router};
pub use config::ServeConfig;
pub use db::migrate;
pub use error::{Error, ErrorCode, Result};
pub use import::{ImportSummary, import};
pub use openapi::openapi;
pub use read_routing::Db;
pub use recount::{RecountSummary, recount};
pub use seed::seed;
pub use state::{ApiDocument, AppState};
