//! Request dispatch: the [`Frontend`] every request of the listener goes through, sending
//! `/v1/*` to the edge and the rest to the gateway's own routes.

use std::sync::Arc;

use axum::Router;
use axum::extract::Request;
use axum::http::Method;
use axum::response::Response;
use axum::routing::get;
use shared_auth::http::request_id::in_request_context;
use shared_auth::http::serve::with_allowed_methods_named;
use tower::{Layer as _, ServiceExt as _};

use crate::cors::Cors;
use crate::state::AppState;
use crate::{docs, edge, metrics, ops};

const HEALTHZ: &str = "/healthz";
const READYZ: &str = "/readyz";
const METRICS: &str = "/metrics";

/// Whether `path` is one of the gateway's own routes (none is under `/v1/`).
pub(crate) fn is_own_route(path: &str) -> bool {
    matches!(path, HEALTHZ | READYZ | METRICS) || docs::PATHS.contains(&path)
}

/// Everything a request goes through, outermost first: the 405 detail, the request context
/// (request id, log line, problem bodies), the request metrics, then CORS and either the edge
/// (every `/v1/*` request) or the router of the gateway's own routes (whose fallback is the edge
/// too). Written as plain calls rather than `from_fn` middleware layers, and with `/v1/*` going
/// straight to the edge: on the proxy path each layer and the router (a service clone and a boxed
/// future per request each) showed as several percent of the gateway's CPU.
#[derive(Clone)]
pub struct Frontend(Arc<FrontendParts>);

struct FrontendParts {
    router: Router,
    /// The same routes without CORS, for `OPTIONS` requests that are no preflight it answers.
    router_without_cors: Router,
    state: AppState,
    cors: Option<Cors>,
}

impl Frontend {
    pub(crate) fn new(state: AppState, cors: Option<Cors>) -> Self {
        let routes = Router::new()
            .route(HEALTHZ, get(ops::healthz))
            .route(READYZ, get(ops::readyz))
            .route(METRICS, get(ops::metrics))
            .merge(docs::router())
            .fallback(edge::handler);
        let router = routes
            .clone()
            .layer(tower::util::option_layer(
                cors.as_ref().map(|c| c.layer.clone()),
            ))
            .with_state(state.clone());
        Self(Arc::new(FrontendParts {
            router,
            router_without_cors: routes.with_state(state.clone()),
            state,
            cors,
        }))
    }

    pub async fn handle(self, request: Request) -> Response {
        let parts = &*self.0;
        let response = in_request_context(request, |request| async move {
            // Boxed: inline, the router's and the edge's futures would make every request's
            // future four times larger (13 KiB), and that future is moved around whole (the
            // copies showed in the profile; without this box the gateway executes 102,800
            // instructions per request instead of 65,800, though server.rs boxes it too).
            metrics::tracked(&parts.state.metrics, request, |request| {
                Box::pin(parts.route(request))
            })
            .await
        })
        .await;
        with_allowed_methods_named(response).await
    }
}

impl FrontendParts {
    async fn route(&self, request: Request) -> Response {
        // tower-http's CORS layer answers every `OPTIONS` request with an empty 200. Only a
        // preflight it can accept goes to it; any other `OPTIONS` is judged like any method
        // (a 405 or a 404), as it is with CORS off.
        let cors = self.cors.as_ref().filter(|cors| {
            request.method() != Method::OPTIONS
                || cors.answers_preflight(&request, &self.state.routes)
        });
        // None of the gateway's own routes is under `/v1/`.
        let answer = if request.uri().path().starts_with("/v1/") {
            match cors {
                None => return edge::handle(&self.state, request).await,
                Some(cors) => {
                    let edge = tower::service_fn(|request| async {
                        Ok(edge::handle(&self.state, request).await)
                    });
                    cors.layer.layer(edge).oneshot(request).await
                }
            }
        } else if cors.is_none() && request.method() == Method::OPTIONS {
            self.router_without_cors.clone().oneshot(request).await
        } else {
            self.router.clone().oneshot(request).await
        };
        match answer {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }
}
