//! news-service integration tests: real Postgres (a throwaway cluster per test process, a fresh
//! database per test) and real HTTP against the service on port 0.
#![allow(clippy::unwrap_used)]

mod articles;
mod cancellation;
mod commands;
mod comments;
mod contract_review_edges;
mod contract_review_reads;
mod contract_review_writes;
mod counts;
mod curation;
mod cursors;
mod directory;
mod engagement;
mod fold;
mod hardening;
mod health;
mod helpers;
mod highlight_model;
mod me;
mod openapi;
mod plan_cache;
mod schema;
mod search;
mod search_walks;
