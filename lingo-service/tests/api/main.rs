//! lingo-service through real HTTP against a real Postgres (one test binary, so one throwaway
//! cluster for all of them; every test gets its own database).
#![allow(clippy::unwrap_used)]

mod analytics;
mod catalogue;
mod contract_review;
mod contract_review_reads;
mod cursors;
mod grants;
mod hardening;
mod health;
mod helpers;
mod idempotency;
mod incremental_copy;
mod openapi;
mod phrase_deletes;
mod phrase_moves;
mod phrase_progress;
mod phrase_progress_review;
mod plan_cache;
mod plans;
mod progress;
mod recommendations;
mod search;
mod seed;
mod study_sessions;
mod transactions;
mod translation_counts;
