//! The layers every service's router gets, in the one order that works: the problem fallback
//! for unknown routes, `/metrics` and the request counter, the body limit, panics turned into
//! 500s, and the request context outermost (so every answer, a panic's included, gets a request
//! id and becomes a problem).

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{HeaderMap, Version, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tower_http::catch_panic::CatchPanicLayer;

use crate::SharedCode;
use crate::http::metrics::{HttpMetrics, instrument};
use crate::http::problem::Problem;
use crate::http::request_id::{not_found, request_context};

/// The services' request-body limit (docs: conventions): 128 KiB, so the longest legal comment
/// fits in any script and any JSON encoding of it (10,000 emoji as `\ud83d\ude00` escapes).
pub const MAX_BODY_BYTES: usize = 128 * 1024;

/// Wraps a service's routes (resources and health checks) in the shared layers. The body limit is
/// [`MAX_BODY_BYTES`] for every service: the `Json` and `NoBody` extractors refuse by it too.
pub fn service_stack<S>(routes: Router<S>, metrics: Arc<HttpMetrics>) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    instrument(routes.fallback(not_found), metrics)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(CatchPanicLayer::new())
        .layer(axum::middleware::from_fn(one_host))
        .layer(axum::middleware::from_fn(request_context))
}

/// RFC 9112 section 3.2: an HTTP/1.1 request without a `Host` header, with more than one, or with
/// one that is not a host and optional port (a list such as `a, b`, a user name, a path) is
/// answered 400. HTTP/1.0 need not send one, but one it sends must be valid too. An empty `Host`
/// is allowed (RFC 9112 asks for it when the target has no authority). The gateway and the
/// services judge alike.
pub fn has_one_host(version: Version, headers: &HeaderMap) -> bool {
    let mut hosts = headers.get_all(header::HOST).iter();
    match (hosts.next(), hosts.next()) {
        (None, _) => version != Version::HTTP_11,
        (Some(host), None) => is_host_and_port(host.as_bytes()),
        (Some(_), Some(_)) => false,
    }
}

/// `host[:port]` as RFC 9110 section 7.2 allows it: a URI authority without user information
/// (the `http` crate's parser refuses whitespace, a path and a query) whose port, if any, is a
/// number below 65536.
fn is_host_and_port(value: &[u8]) -> bool {
    if value.is_empty() {
        return true;
    }
    if value.contains(&b'@') || value.contains(&b',') {
        return false;
    }
    let Ok(authority) = axum::http::uri::Authority::try_from(value) else {
        return false;
    };
    // An IPv6 literal has colons of its own: the port can only follow its closing bracket.
    let after_ip_literal = authority
        .as_str()
        .rsplit_once(']')
        .map_or(authority.as_str(), |(_, rest)| rest);
    match after_ip_literal.rsplit_once(':') {
        None | Some((_, "")) => true,
        Some((_, port)) => port.bytes().all(|b| b.is_ascii_digit()) && port.parse::<u16>().is_ok(),
    }
}

/// The problem for a request [`has_one_host`] refuses.
pub fn not_one_host() -> Problem {
    Problem::from_code(SharedCode::BadRequest).with_detail(
        "an HTTP/1.1 request carries exactly one Host header, a host and optional port",
    )
}

async fn one_host(request: Request, next: Next) -> Response {
    if has_one_host(request.version(), request.headers()) {
        next.run(request).await
    } else {
        not_one_host().into_response()
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn with_hosts(hosts: &[&'static str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for host in hosts {
            headers.append(header::HOST, HeaderValue::from_static(host));
        }
        headers
    }

    #[test]
    fn a_host_is_a_host_and_an_optional_port() {
        for good in [
            "a",
            "api.example.com",
            "a:8080",
            "127.0.0.1:80",
            "[::1]:8080",
            "",
        ] {
            assert!(
                has_one_host(Version::HTTP_11, &with_hosts(&[good])),
                "{good:?}"
            );
        }
        for bad in [
            "a, b", "a,b", "user@a", "a b", "a/path", "a?q", "a:port", "a:99999", "a:+1", "[::1]:x",
        ] {
            assert!(
                !has_one_host(Version::HTTP_11, &with_hosts(&[bad])),
                "{bad:?}"
            );
            assert!(
                !has_one_host(Version::HTTP_10, &with_hosts(&[bad])),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn http11_needs_exactly_one_host_and_http10_none() {
        assert!(!has_one_host(Version::HTTP_11, &with_hosts(&[])));
        assert!(!has_one_host(Version::HTTP_11, &with_hosts(&["a", "b"])));
        assert!(has_one_host(Version::HTTP_10, &with_hosts(&[])));
    }
}
