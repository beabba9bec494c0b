//! The application state: everything a request handler needs, shared by every request.

use std::sync::Arc;

use axum::extract::FromRef;

use crate::auth::EdgeAuth;
use crate::cache::AnswerCache;
use crate::client_addr::TrustedProxies;
use crate::docs::ApiReference;
use crate::metrics::Metrics;
use crate::proxy::Proxy;
use crate::ratelimit::RateLimiter;
use crate::routes::{Group, RouteTable};
use crate::upstream::UpstreamGroup;

/// Everything a request handler needs.
#[derive(Clone)]
pub struct AppState {
    pub auth: Arc<EdgeAuth>,
    pub limiter: Option<Arc<RateLimiter>>,
    pub proxy: Arc<Proxy>,
    pub lingo: Arc<UpstreamGroup>,
    pub news: Arc<UpstreamGroup>,
    pub metrics: Arc<Metrics>,
    pub trusted_proxies: Arc<TrustedProxies>,
    /// Both groups' routes, learned from their documents.
    pub routes: Arc<RouteTable>,
    /// The cache of public answers; `None` when `GATEWAY_CACHE_MAX_BYTES` is 0.
    pub cache: Option<Arc<AnswerCache>>,
    /// What `GET /openapi.json` serves: the documents the routes were learned from, merged.
    pub reference: Arc<ApiReference>,
}

impl AppState {
    pub fn group(&self, group: Group) -> &UpstreamGroup {
        match group {
            Group::Lingo => &self.lingo,
            Group::News => &self.news,
        }
    }
}

impl FromRef<AppState> for Arc<Metrics> {
    fn from_ref(state: &AppState) -> Self {
        state.metrics.clone()
    }
}

impl FromRef<AppState> for Arc<ApiReference> {
    fn from_ref(state: &AppState) -> Self {
        state.reference.clone()
    }
}
