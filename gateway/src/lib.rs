//! gateway: the front door of the system.
//!
//! It owns the edge: the route table of which endpoints exist and need a token (learned from the
//! services' own OpenAPI documents, never written here), token verification (through shared-auth,
//! with a bounded cache of verified tokens), per-caller rate limits, CORS, the 1 MiB body limit, a
//! shared cache of public answers (cache.rs), and proxying `/v1/lingo/*` and `/v1/news/*` to the
//! services' replicas with streamed bodies, cooldowns, readiness probes, panic routing and the
//! failure answers of docs/gateway.md. It owns no data and must never answer a `/v1` request itself
//! beyond refusing it or replaying a service's public answer: the services decide every success,
//! and they verify the forwarded `Authorization` header again themselves.
//!
//! Where things are: `app.rs` assembles the gateway ([`Application`]), `state.rs` what every
//! request handler shares ([`state::AppState`]), `dispatch.rs` the path of every request (the
//! gateway's own routes, or the edge), `cors.rs` CORS, `edge.rs` what the edge does to a `/v1`
//! request, `proxy.rs` forwarding it with retries, `headers.rs` which headers pass, `error.rs` the
//! gateway's own error codes and problems, `server.rs` the listener.

pub mod app;
pub mod auth;
pub mod cache;
pub mod client;
pub mod client_addr;
pub mod config;
pub mod cors;
pub mod dispatch;
pub mod docs;
pub mod edge;
pub mod error;
pub mod headers;
pub mod learn;
pub mod metrics;
pub mod ops;
pub mod proxy;
pub mod ratelimit;
pub mod routes;
pub mod server;
pub mod state;
pub mod upstream;

pub use app::Application;
