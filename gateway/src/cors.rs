//! CORS (`CORS_ALLOWED_ORIGINS`): the tower-http layer for the configured origins, and which
//! preflights it may answer.

use std::time::Duration;

use anyhow::Context as _;
use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, Method, header};
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::ops;
use crate::routes::RouteTable;

/// CORS for the configured origins: the layer, and which origins its preflights accept.
pub(crate) struct Cors {
    pub(crate) layer: CorsLayer,
    /// `None` for `*`.
    origins: Option<Vec<HeaderValue>>,
}

impl Cors {
    /// Whether `request` is a preflight (the Fetch standard's `OPTIONS` with `Origin` and
    /// `Access-Control-Request-Method`) from an allowed origin, to a path that is an endpoint:
    /// one of `routes` under `/v1/`, else one of the gateway's own. A preflight to any other
    /// path is left to the router, which answers it 404 like any request there.
    pub(crate) fn answers_preflight(&self, request: &Request, routes: &RouteTable) -> bool {
        let headers = request.headers();
        let Some(origin) = headers.get(header::ORIGIN) else {
            return false;
        };
        let allowed = self
            .origins
            .as_ref()
            .is_none_or(|origins| origins.contains(origin));
        let path = request.uri().path();
        let endpoint = if path.starts_with("/v1/") {
            routes.has_endpoint(path)
        } else {
            ops::is_own_route(path)
        };
        allowed && headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD) && endpoint
    }
}

/// An origin of `CORS_ALLOWED_ORIGINS` as a browser's `Origin` header would carry it; refused
/// when it could never match one (a path or trailing slash, upper case, no scheme), rather than
/// silently allowing nobody.
fn as_browsers_send_it(origin: &str) -> anyhow::Result<HeaderValue> {
    let url = reqwest::Url::parse(origin)
        .with_context(|| format!("CORS origin {origin:?} is not a URL like https://app.example"))?;
    let serialized = url.origin().ascii_serialization();
    anyhow::ensure!(
        serialized == origin,
        "CORS origin {origin:?} never matches a browser's Origin header; write it as {serialized:?}"
    );
    HeaderValue::from_str(origin).with_context(|| format!("bad CORS origin {origin:?}"))
}

/// CORS for the configured origins (`*` allows any); `None` when the list is empty.
pub(crate) fn cors_layer(origins: &[String]) -> anyhow::Result<Option<Cors>> {
    if origins.is_empty() {
        return Ok(None);
    }
    let listed = if origins.iter().any(|o| o == "*") {
        None
    } else {
        let values = origins
            .iter()
            .map(|o| as_browsers_send_it(o))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Some(values)
    };
    let allow_origin = match &listed {
        None => AllowOrigin::any(),
        Some(values) => AllowOrigin::list(values.clone()),
    };
    let name = HeaderName::from_static;
    let layer = CorsLayer::new()
        .allow_origin(allow_origin)
        .allow_methods([
            Method::GET,
            Method::HEAD,
            Method::POST,
            Method::PUT,
            Method::PATCH,
            Method::DELETE,
            Method::OPTIONS,
        ])
        .allow_headers([
            header::AUTHORIZATION,
            header::CONTENT_TYPE,
            header::IF_NONE_MATCH,
            name("idempotency-key"),
            name("x-request-id"),
            name("traceparent"),
        ])
        .expose_headers([
            header::LOCATION,
            header::ETAG,
            header::RETRY_AFTER,
            header::WWW_AUTHENTICATE,
            name("x-request-id"),
            name("idempotency-replayed"),
            name("ratelimit-limit"),
            name("ratelimit-remaining"),
            name("ratelimit-reset"),
        ])
        .max_age(Duration::from_secs(600));
    Ok(Some(Cors {
        layer,
        origins: listed,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cors_origins_are_taken_only_as_browsers_send_them() {
        for good in [
            "https://app.example",
            "http://localhost:3000",
            "https://[::1]:8443",
        ] {
            assert!(as_browsers_send_it(good).is_ok(), "{good}");
        }
        for bad in [
            "https://app.example/",
            "https://App.example",
            "https://app.example:443",
            "app.example",
            "https://app.example/path",
        ] {
            assert!(as_browsers_send_it(bad).is_err(), "{bad}");
        }
    }
}
