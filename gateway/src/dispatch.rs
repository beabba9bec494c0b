//! Request dispatch: the [`Frontend`] every request of the listener goes through, sending
//! `/v1/*` to the edge and the rest to the gateway's own routes.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use axum::Router;
use axum::extract::Request;
use axum::http::Method;
use axum::response::{IntoResponse as _, Response};
use axum::routing::get;
use futures_util::FutureExt as _;
use shared_auth::Problem;
use shared_auth::http::request_id::in_request_context;
use shared_auth::http::serve::with_allowed_methods_named;
use tower::{Layer as _, ServiceExt as _};

use crate::cors::Cors;
use crate::state::AppState;
use crate::{docs, edge, metrics, ops};

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
            .route(ops::HEALTHZ, get(ops::healthz))
            .route(ops::READYZ, get(ops::readyz))
            .route(ops::METRICS, get(ops::metrics))
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
                Box::pin(answer_even_if_it_panics(parts.route(request)))
            })
            .await
        })
        .await;
        with_allowed_methods_named(response).await
    }
}

/// `route`'s answer, or 500 `internal_error` when it panics: the client gets the contract's
/// problem (with its request id, counted in the metrics) rather than a connection closed without
/// an answer, as the services' panic layer does for them.
async fn answer_even_if_it_panics(route: impl Future<Output = Response>) -> Response {
    match AssertUnwindSafe(route).catch_unwind().await {
        Ok(response) => response,
        Err(_) => {
            tracing::error!("a request handler panicked; answered 500");
            Problem::internal().into_response()
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_while_answering_is_a_500_problem() {
        let panics = async { panic!("a bug") };
        let response = answer_even_if_it_panics(panics).await;
        assert_eq!(response.status(), 500);
        assert_eq!(
            response.headers()["content-type"],
            "application/problem+json"
        );
        let answered =
            answer_even_if_it_panics(async { axum::http::StatusCode::NO_CONTENT.into_response() });
        assert_eq!(answered.await.status(), 204, "an answer passes unchanged");
    }
}
