//! The `Host` rule the gateway and the services share (RFC 9112 section 3.2, RFC 9110 section
//! 7.2): an HTTP/1.1 request carries exactly one `Host`, and a `Host` is a host and an optional
//! port. A request that breaks it is answered 400 `bad_request`.
//!
//! Checked by hand rather than with `http::uri::Authority`, whose parser copies the value (an
//! allocation on every request) and lets through text after an IPv6 literal.

use std::net::Ipv6Addr;

use axum::http::{HeaderMap, Version, header};

use crate::SharedCode;
use crate::http::problem::Problem;

/// Whether a request with this version and these headers names its host properly: HTTP/1.1
/// exactly one `Host`, HTTP/1.0 at most one (it need not send one), and a `Host` that is sent is
/// a host and optional port (not a list such as `a, b`, a user name, a path or a bad port). An
/// empty `Host` is allowed: RFC 9112 asks for one when the target has no authority.
pub fn has_one_host(version: Version, headers: &HeaderMap) -> bool {
    let mut hosts = headers.get_all(header::HOST).iter();
    match (hosts.next(), hosts.next()) {
        (None, _) => version != Version::HTTP_11,
        (Some(host), None) => is_host_and_port(host.as_bytes()),
        (Some(_), Some(_)) => false,
    }
}

/// The problem for a request [`has_one_host`] refuses.
pub fn not_one_host() -> Problem {
    Problem::from_code(SharedCode::BadRequest).with_detail(
        "a request needs one Host header (HTTP/1.0 may send none): a host and optional port",
    )
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
    fn http11_needs_exactly_one_host_and_http10_none() {
        assert!(!has_one_host(Version::HTTP_11, &with_hosts(&[])));
        assert!(!has_one_host(Version::HTTP_11, &with_hosts(&["a", "b"])));
        assert!(!has_one_host(Version::HTTP_10, &with_hosts(&["a", "b"])));
        assert!(has_one_host(Version::HTTP_10, &with_hosts(&[])));
    }
}
