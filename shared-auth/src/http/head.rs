//! The rules a request head must meet before anything else looks at it, the same at the gateway
//! and the services (a request that breaks one is 400 `bad_request`):
//!
//! - RFC 9112 section 3.2 and RFC 9110 section 7.2: an HTTP/1.1 request carries exactly one
//!   `Host`, and a `Host` is a host and an optional port; a target in absolute form
//!   (`http://host/path`) has an http(s) scheme and such an authority;
//! - RFC 9112 section 6.1: the only transfer coding is `chunked`, applied once. hyper takes the
//!   chunks off a body sent as `gzip, chunked` (or `chunked, chunked`) and would hand on the
//!   still-coded bytes as plain ones.
//!
//! The host is checked by hand rather than with `http::uri::Authority`, whose parser copies the
//! value (an allocation on every request) and lets through text after an IPv6 literal.

use std::net::Ipv6Addr;

use axum::http::{HeaderMap, Uri, Version, header};

use crate::SharedCode;
use crate::http::problem::Problem;

/// Checks a request's head against the rules above.
pub fn check(version: Version, uri: &Uri, headers: &HeaderMap) -> Result<(), Problem> {
    if !has_one_host(version, headers) {
        return Err(bad_request(
            "a request needs one Host header (HTTP/1.0 may send none): a host and optional port",
        ));
    }
    if !is_origin_or_http_target(uri) {
        return Err(bad_request(
            "a request target in absolute form needs an http or https scheme and a host and optional port",
        ));
    }
    if !has_only_chunked_coding(headers) {
        return Err(bad_request(
            "the only transfer coding accepted is chunked (send a body as it is, or in chunks)",
        ));
    }
    Ok(())
}

fn bad_request(detail: &'static str) -> Problem {
    Problem::from_code(SharedCode::BadRequest).with_detail(detail)
}

/// A target with a scheme (absolute form) names an http(s) URI whose authority is a host and
/// optional port. The usual target (origin form, `/path`) has neither.
fn is_origin_or_http_target(uri: &Uri) -> bool {
    let Some(scheme) = uri.scheme_str() else {
        return true;
    };
    let http = scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https");
    http && uri
        .authority()
        .is_some_and(|authority| is_host_and_port(authority.as_str().as_bytes()))
}

/// `Transfer-Encoding`, if sent, is `chunked` once and nothing else, over all its lines. A body
/// chunked twice (`chunked, chunked`, which RFC 9112 6.1 forbids a sender to write) would lose
/// one layer of chunks to hyper and reach the handler with the other as its bytes.
fn has_only_chunked_coding(headers: &HeaderMap) -> bool {
    let mut codings = headers
        .get_all(header::TRANSFER_ENCODING)
        .iter()
        .flat_map(|value| value.as_bytes().split(|&b| b == b','));
    match (codings.next(), codings.next()) {
        (None, _) => true,
        (Some(coding), None) => coding.trim_ascii().eq_ignore_ascii_case(b"chunked"),
        (Some(_), Some(_)) => false,
    }
}

/// Whether a request with this version and these headers names its host properly: HTTP/1.1
/// exactly one `Host`, HTTP/1.0 at most one (it need not send one), and a `Host` that is sent is
/// a host and optional port (not a list such as `a, b`, a user name, a path or a bad port). An
/// empty `Host` is allowed: RFC 9112 asks for one when the target has no authority.
fn has_one_host(version: Version, headers: &HeaderMap) -> bool {
    let mut hosts = headers.get_all(header::HOST).iter();
    match (hosts.next(), hosts.next()) {
        (None, _) => version != Version::HTTP_11,
        (Some(host), None) => is_host_and_port(host.as_bytes()),
        (Some(_), Some(_)) => false,
    }
}

/// `uri-host [ ":" port ]`: an IPv6 literal in brackets or a name (which covers IPv4
/// addresses), then a port of at most 65535 if a colon follows.
fn is_host_and_port(value: &[u8]) -> bool {
    if value.is_empty() {
        return true;
    }
    let (host, port) = match value.strip_prefix(b"[") {
        Some(bracketed) => match bracketed.iter().position(|&b| b == b']') {
            Some(end) if is_ipv6_literal(&bracketed[..end]) => (None, &bracketed[end + 1..]),
            _ => return false,
        },
        None => match value.iter().rposition(|&b| b == b':') {
            Some(colon) => (Some(&value[..colon]), &value[colon..]),
            None => (Some(value), &value[value.len()..]),
        },
    };
    host.is_none_or(is_reg_name) && is_port_part(port)
}

/// What may follow the host: nothing, or `:` and a port (RFC 3986 allows an empty one).
fn is_port_part(rest: &[u8]) -> bool {
    match rest.split_first() {
        None => true,
        Some((b':', digits)) => {
            digits.len() <= 5
                && digits.iter().all(u8::is_ascii_digit)
                && digits
                    .iter()
                    .fold(0u32, |n, &d| n * 10 + u32::from(d - b'0'))
                    <= 65535
        }
        Some(_) => false,
    }
}

/// A name: letters, digits, `-._~`, the sub-delimiters but the comma (which would make a list of
/// hosts), and `%XX` escapes. Not empty.
fn is_reg_name(name: &[u8]) -> bool {
    let mut rest = name;
    while let Some((&byte, after)) = rest.split_first() {
        rest = match byte {
            b'%' => match after {
                [high, low, tail @ ..] if high.is_ascii_hexdigit() && low.is_ascii_hexdigit() => {
                    tail
                }
                _ => return false,
            },
            b if b.is_ascii_alphanumeric() || b"-._~!$&'()*+;=".contains(&b) => after,
            _ => return false,
        };
    }
    !name.is_empty()
}

/// The inside of `[...]`: an IPv6 address, with an optional zone (`%25` and a name, RFC 6874).
fn is_ipv6_literal(inside: &[u8]) -> bool {
    let (address, zone) = match inside.windows(3).position(|w| w == b"%25") {
        Some(at) => (&inside[..at], Some(&inside[at + 3..])),
        None => (inside, None),
    };
    let is_address = std::str::from_utf8(address).is_ok_and(|a| a.parse::<Ipv6Addr>().is_ok());
    is_address && zone.is_none_or(is_reg_name)
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
        let good = [
            "a",
            "api.example.com",
            "API.Example.COM.",
            "under_score:8080",
            "a:8080",
            "a:",
            "a:0",
            "a:65535",
            "127.0.0.1:80",
            "ex%61mple.com",
            "[::1]",
            "[::1]:8080",
            "[fe80::1%25eth0]:80",
            "",
        ];
        for host in good {
            let headers = with_hosts(&[host]);
            assert!(has_one_host(Version::HTTP_11, &headers), "{host:?}");
            assert!(has_one_host(Version::HTTP_10, &headers), "{host:?}");
        }
        let bad = [
            "a, b",
            "a,b",
            "user@a",
            "a b",
            " a",
            "a/path",
            "a?q",
            "a#f",
            "a:port",
            "a:65536",
            "a:99999",
            "a:+1",
            "a:1:2",
            ":80",
            "%zz",
            "[::1]:x",
            "[::1]junk",
            "x[::1]:80",
            "[foo]",
            "[::1",
            "[]",
        ];
        for host in bad {
            let headers = with_hosts(&[host]);
            assert!(!has_one_host(Version::HTTP_11, &headers), "{host:?}");
            assert!(!has_one_host(Version::HTTP_10, &headers), "{host:?}");
        }
    }

    #[test]
    fn an_absolute_target_is_http_with_a_host_and_port() {
        for good in [
            "/v1/x",
            "http://a/v1/x",
            "HTTPS://a:443/v1/x",
            "http://[::1]:80/v1/x",
            "*",
        ] {
            let uri: Uri = good.parse().expect("uri");
            assert!(is_origin_or_http_target(&uri), "{good:?}");
        }
        for bad in ["ftp://a/v1/x", "http://u:p@a/v1/x", "http://a:99999/v1/x"] {
            let uri: Uri = bad.parse().expect("uri");
            assert!(!is_origin_or_http_target(&uri), "{bad:?}");
        }
    }

    #[test]
    fn chunked_is_the_only_transfer_coding() {
        let coded = |values: &[&'static str]| {
            let mut headers = HeaderMap::new();
            for value in values {
                headers.append(header::TRANSFER_ENCODING, HeaderValue::from_static(value));
            }
            has_only_chunked_coding(&headers)
        };
        assert!(coded(&[]));
        assert!(coded(&["chunked"]));
        assert!(coded(&["Chunked"]));
        assert!(!coded(&["gzip, chunked"]));
        assert!(!coded(&["gzip", "chunked"]));
        assert!(!coded(&["chunked, identity"]));
        assert!(!coded(&["chunked, chunked"]));
        assert!(!coded(&["chunked", "chunked"]));
        assert!(!coded(&[""]));
    }

    #[test]
    fn http11_needs_exactly_one_host_and_http10_none() {
        assert!(!has_one_host(Version::HTTP_11, &with_hosts(&[])));
        assert!(!has_one_host(Version::HTTP_11, &with_hosts(&["a", "b"])));
        assert!(!has_one_host(Version::HTTP_10, &with_hosts(&["a", "b"])));
        assert!(has_one_host(Version::HTTP_10, &with_hosts(&[])));
    }
}
