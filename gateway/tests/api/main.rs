//! The gateway over real HTTP: in-process gateways (and the real binary where a process boundary
//! matters) in front of small axum upstreams on port 0.
#![allow(clippy::unwrap_used)]

mod auth_table;
mod binary;
mod cache;
mod contract_review_auth;
mod contract_review_cache;
mod contract_review_edge;
mod contract_review_learned;
mod contract_review_replicas;
mod failures;
mod hardening;
mod helpers;
mod learned;
mod learned_reference;
mod lifecycle;
mod limits;
mod ops;
mod routing;
