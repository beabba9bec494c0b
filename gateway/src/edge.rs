//! The handler of every `/v1/lingo/*` and `/v1/news/*` request: route, authenticate, rate-limit,
//! authorize, then answer from the cache of public answers or proxy. Everything refused here never
//! reaches an upstream.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Instant;

use axum::body::HttpBody as _;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use shared_auth::http::head;
use shared_auth::{Problem, SharedCode, telemetry};

use crate::auth::authorize;
use crate::cache;
use crate::client::MAX_BODY_BYTES;
use crate::error::payload_too_large;
use crate::headers::to_upstream_headers;
use crate::proxy::Outgoing;
use crate::ratelimit::{Budget, Decision, RateLimiter};
use crate::routes::{self, Lookup};
use crate::state::AppState;

/// The router's fallback: every path that is none of the gateway's own routes.
pub async fn handler(State(state): State<AppState>, request: Request) -> Response {
    handle(&state, request).await
}

pub async fn handle(state: &AppState, request: Request) -> Response {
    let has_body = !request.body().is_end_stream();
    let mut decision = None;
    let mut response = match serve(state, request, &mut decision).await {
        Ok(response) => response,
        Err(problem) => refused(problem, has_body),
    };
    if let Some(decision) = decision {
        decision.apply(response.headers_mut());
    }
    response
}

/// A request the gateway answers itself (a problem, so `Cache-Control: private, no-store`). Its
/// body, if any, was not read here: it is read to its end and thrown away before the connection
/// closes (server.rs), so a client still sending it gets this answer rather than a reset.
/// `Connection: close` tells the client not to send another request on this connection.
fn refused(problem: Problem, has_body: bool) -> Response {
    let mut response = problem.into_response();
    if has_body {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

async fn serve(
    state: &AppState,
    request: Request,
    decision: &mut Option<Decision>,
) -> Result<Response, Problem> {
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |info| info.0.ip());
    let (mut parts, body) = request.into_parts();
    head::check(parts.version, &parts.uri, &parts.headers)?;
    if let Some(authority) = parts.uri.authority() {
        // RFC 9112 3.2.2: a target in absolute form names the host; its `Host` is ignored.
        if let Ok(host) = HeaderValue::from_str(authority.as_str()) {
            parts.headers.insert(header::HOST, host);
        }
    }
    let client = state.trusted_proxies.client_of(peer, &parts.headers);
    let not_found = || Problem::from_status(StatusCode::NOT_FOUND);
    let path_and_query = routes::upstream_target(&parts.uri).ok_or_else(not_found)?;
    // What no service serves is the service's 404 or 405, answered here before the token is
    // looked at (the order the services judge in) and whether or not a replica is up.
    let route = match state.routes.lookup(path_and_query.path(), &parts.method) {
        Lookup::Route(route) => route,
        Lookup::NotFound => return Err(not_found()),
        Lookup::MethodNotAllowed(allow) => return Err(method_not_allowed(allow)),
    };
    // The request's span started before the route was known, named by the method alone.
    telemetry::name_request_span(&route.span_name);

    let caller = state.auth.caller(&parts.headers).await;
    if let Some(limiter) = &state.limiter {
        // Callers with a valid token are limited by identity, everyone else (invalid tokens
        // included, so guessing costs budget) by address.
        let key = match &caller {
            Ok(Some(caller)) => limiter.sub_key(&caller.sub),
            _ => RateLimiter::ip_key(client.ip),
        };
        let outcome = limiter.check(key, Budget::of(&parts.method), Instant::now());
        *decision = Some(outcome);
        if !outcome.allowed {
            tracing::info!(client = %client.ip, "rate limited");
            return Err(outcome.problem());
        }
    }
    let authorized = caller.and_then(|caller| authorize(&route.access, caller.as_deref()));
    if let Err(refusal) = authorized {
        return Err(refusal.into());
    }

    if body.size_hint().lower() > MAX_BODY_BYTES {
        return Err(payload_too_large());
    }

    let mut headers = parts.headers;
    to_upstream_headers(&mut headers, client);
    let outgoing = Outgoing {
        method: parts.method,
        path_and_query,
        headers,
        body,
    };
    let group = state.group(route.group);
    match &state.cache {
        Some(cache) if cache::takes(&outgoing) => cache.serve(&state.proxy, group, outgoing).await,
        Some(cache) if !outgoing.method.is_safe() => {
            let target = outgoing.path_and_query.clone();
            let answer = state.proxy.forward(group, outgoing).await?;
            cache.invalidate_after_write(&target, &answer);
            Ok(answer)
        }
        _ => state.proxy.forward(group, outgoing).await,
    }
}

/// A 405 for an endpoint that answers the methods of `allow` (`GET,HEAD`), as the services'
/// routers answer it, with the `detail` the contract wants.
fn method_not_allowed(allow: HeaderValue) -> Problem {
    let methods = allow.to_str().unwrap_or_default().replace(',', ", ");
    Problem::from_code(SharedCode::MethodNotAllowed)
        .with_detail(format!("this resource allows only {methods}"))
        .with_header(header::ALLOW, allow)
}
