//! HTTP caching of reads, the same in every service: anonymous answers are public for 30 s with a
//! strong ETag (a hash of the body) and a 304 for a matching `If-None-Match`; personalised
//! answers are never stored ([`json_read`]), and whole route groups that are always personal
//! (a service's `/me/*`) are marked so by [`no_store`].

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use sha2::{Digest, Sha256};
use utoipa::IntoParams;

/// `If-None-Match` of the cacheable reads.
#[derive(IntoParams)]
#[into_params(parameter_in = Header)]
pub struct IfNoneMatch {
    /// ETags of a stored answer (or `*`): an anonymous request whose tag matches gets 304.
    #[param(rename = "If-None-Match", value_type = String, required = false)]
    pub if_none_match: Option<String>,
}

pub const PUBLIC: &str = "public, max-age=30";
pub const PRIVATE: &str = "private, no-store";

/// The strong ETag of a body: a quoted hex SHA-256 prefix.
pub fn etag_of(body: &[u8]) -> String {
    let digest = Sha256::digest(body);
    let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

/// `If-None-Match` uses the weak comparison (RFC 9110 13.1.2): `W/` is ignored, `*` matches.
/// `etag` is a quoted opaque tag without `W/`. The list is read tag by tag, not split on commas:
/// a comma inside the quotes belongs to the tag (RFC 9110 8.8.3), as in an upstream's `"v1,2"`.
/// Reading stops at the first element that is not a tag (an unquoted word matches nothing).
pub fn none_match(if_none_match: &str, etag: &str) -> bool {
    let mut rest = if_none_match;
    loop {
        rest = rest.trim_start_matches([' ', '\t', ',']);
        if rest.starts_with('*') {
            return true;
        }
        let tag = rest.strip_prefix("W/").unwrap_or(rest);
        let Some(end) = tag.strip_prefix('"').and_then(|inner| inner.find('"')) else {
            return false;
        };
        // The tag with both quotes: `"` + end bytes + `"`.
        let (candidate, after) = tag.split_at(end + 2);
        if candidate == etag {
            return true;
        }
        rest = after;
    }
}

/// Renders a JSON read with the caching headers for an anonymous or a signed-in reader.
pub fn json_read<T: Serialize>(
    request_headers: &HeaderMap,
    signed_in: bool,
    value: &T,
) -> Response {
    let body = match serde_json::to_vec(value) {
        Ok(body) => body,
        Err(error) => {
            tracing::error!(%error, "cannot serialise a response");
            return crate::http::problem::Problem::internal().into_response();
        }
    };
    let json = HeaderValue::from_static("application/json");
    // The answer depends on the credential, so a shared cache must key on it.
    let vary = HeaderValue::from_static("authorization");
    if signed_in {
        let headers = [
            (header::CONTENT_TYPE, json),
            (header::CACHE_CONTROL, HeaderValue::from_static(PRIVATE)),
            (header::VARY, vary),
        ];
        return (headers, body).into_response();
    }
    let etag = etag_of(&body);
    let etag_value =
        HeaderValue::from_str(&etag).unwrap_or_else(|_| HeaderValue::from_static("\"\""));
    let cache = HeaderValue::from_static(PUBLIC);
    // Every `If-None-Match` line counts: a list may be split over several (RFC 9110 5.3).
    let matches = request_headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| none_match(v, &etag));
    if matches {
        let headers = [
            (header::ETAG, etag_value),
            (header::CACHE_CONTROL, cache),
            (header::VARY, vary),
        ];
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    let headers = [
        (header::CONTENT_TYPE, json),
        (header::ETAG, etag_value),
        (header::CACHE_CONTROL, cache),
        (header::VARY, vary),
    ];
    (headers, body).into_response()
}

/// Middleware for routes whose every answer is personal, errors included: `Cache-Control:
/// private, no-store` unless the handler set its own.
pub async fn no_store(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    response
        .headers_mut()
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static(PRIVATE));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etag_is_strong_and_depends_on_the_body() {
        let a = etag_of(b"{\"a\":1}");
        assert!(a.starts_with('"') && a.ends_with('"') && !a.starts_with("W/"));
        assert_eq!(a, etag_of(b"{\"a\":1}"));
        assert_ne!(a, etag_of(b"{\"a\":2}"));
    }

    #[test]
    fn if_none_match_comparison() {
        let tag = "\"abc\"";
        let table = [
            ("\"abc\"", true),
            ("W/\"abc\"", true),
            ("\"x\", \"abc\"", true),
            ("\"x\",W/\"abc\"", true),
            (" ,\"x\" ,, \"abc\" ", true),
            ("\"a,\"abc\"", false),
            ("\"x\", abc, \"abc\"", false),
            ("\"abc", false),
            ("*", true),
            ("\"abd\"", false),
            ("abc", false),
            ("", false),
        ];
        for (header, expected) in table {
            assert_eq!(none_match(header, tag), expected, "{header:?}");
        }
    }

    #[test]
    fn a_comma_inside_a_tag_belongs_to_the_tag() {
        let tag = "\"v1,2\"";
        assert!(none_match("\"v1,2\"", tag));
        assert!(none_match("\"x\", W/\"v1,2\"", tag));
        assert!(!none_match("\"v1\", \"2\"", tag));
        assert!(!none_match("\"v1,2\"", "\"2\""));
    }

    #[test]
    fn a_tag_on_any_if_none_match_line_gives_304() {
        let body = serde_json::json!({"a": 1});
        let etag = etag_of(&serde_json::to_vec(&body).expect("json"));
        let mut headers = HeaderMap::new();
        headers.append(header::IF_NONE_MATCH, HeaderValue::from_static("\"x\""));
        headers.append(
            header::IF_NONE_MATCH,
            HeaderValue::from_str(&etag).expect("a tag"),
        );
        assert_eq!(
            json_read(&headers, false, &body).status(),
            StatusCode::NOT_MODIFIED
        );
        headers.remove(header::IF_NONE_MATCH);
        headers.append(header::IF_NONE_MATCH, HeaderValue::from_static("\"x\""));
        assert_eq!(json_read(&headers, false, &body).status(), StatusCode::OK);
    }
}
