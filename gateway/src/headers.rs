//! The header rules of the proxy: which request and response headers pass the gateway, which are
//! dropped (hop-by-hop headers, the ones a `Connection` header names, client-sent forwarding
//! headers), and the forwarding headers the gateway sets itself. Done in place, without copying
//! the header map.

use std::net::IpAddr;

use axum::http::{HeaderMap, HeaderName, HeaderValue, header};

use crate::client_addr::ClientAddr;

/// Headers that describe one connection, never the message (RFC 9110 section 7.6.1).
static HOP_BY_HOP: [HeaderName; 9] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    HeaderName::from_static("proxy-connection"),
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
static X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
static X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");

/// Request headers never passed on: client-sent forwarding headers (replaced by the gateway's
/// own), and `Expect` (`100-continue` was already answered by the gateway's own server).
static NOT_FORWARDED: [HeaderName; 7] = [
    header::EXPECT,
    header::FORWARDED,
    HeaderName::from_static("x-forwarded-for"),
    HeaderName::from_static("x-forwarded-host"),
    HeaderName::from_static("x-forwarded-port"),
    HeaderName::from_static("x-forwarded-prefix"),
    HeaderName::from_static("x-real-ip"),
];

/// End-to-end headers the contract has the gateway pass on, even when a `Connection` header
/// names them: the ones the gateway judged the request by (a token it verified must reach the
/// service too), the body's type, the idempotency key, the request id the gateway answers with
/// and the trace context.
static ALWAYS_FORWARDED: [HeaderName; 6] = [
    header::AUTHORIZATION,
    header::CONTENT_TYPE,
    HeaderName::from_static("idempotency-key"),
    HeaderName::from_static("x-request-id"),
    HeaderName::from_static("traceparent"),
    HeaderName::from_static("tracestate"),
];

/// Removes the headers of `lists` from `headers`, and the ones a `Connection` header names (but
/// for [`ALWAYS_FORWARDED`]). The names are looked for in one scan first: the usual message
/// carries none of them, and every removal is a hashed lookup.
fn remove_headers(headers: &mut HeaderMap, lists: &[&[HeaderName]]) {
    let listed = |name: &HeaderName| {
        name == header::CONNECTION || lists.iter().any(|list| list.contains(name))
    };
    if !headers.keys().any(listed) {
        return;
    }
    if headers.contains_key(header::CONNECTION) {
        let named: Vec<HeaderName> = headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
            .filter(|name| !ALWAYS_FORWARDED.contains(name))
            .collect();
        for name in named {
            headers.remove(name);
        }
    }
    for name in lists.iter().copied().flatten() {
        headers.remove(name);
    }
}

/// Removes hop-by-hop headers from `headers`, including those its `Connection` header names.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    remove_headers(headers, &[&HOP_BY_HOP]);
}

/// A copy of `headers` without hop-by-hop headers.
pub fn without_hop_by_hop(headers: &HeaderMap) -> HeaderMap {
    let mut kept = headers.clone();
    strip_hop_by_hop(&mut kept);
    kept
}

/// Turns the client's headers into the ones sent upstream, in place: the client's end-to-end
/// headers (Authorization, x-request-id and traceparent included, unchanged), minus `Host` and
/// forwarding headers, plus the gateway's own `X-Forwarded-For/Proto/Host`. `X-Forwarded-Proto`
/// is kept only from a trusted proxy.
pub fn to_upstream_headers(headers: &mut HeaderMap, client: ClientAddr) {
    let host = headers.remove(header::HOST);
    let proto = headers
        .remove(&X_FORWARDED_PROTO)
        .filter(|_| client.via_trusted_proxy)
        .and_then(|value| forwarded_scheme(&value))
        .unwrap_or(HeaderValue::from_static("http"));
    remove_headers(headers, &[&HOP_BY_HOP, &NOT_FORWARDED]);
    headers.insert(X_FORWARDED_FOR.clone(), ip_header(client.ip));
    headers.insert(X_FORWARDED_PROTO.clone(), proto);
    if let Some(host) = host.filter(|host| !host.is_empty()) {
        headers.insert(X_FORWARDED_HOST.clone(), host);
    }
}

/// The scheme a trusted proxy reports, in any case; of a list (proxies that append), the first
/// entry, which is what the client used. Anything else is not believed.
fn forwarded_scheme(value: &HeaderValue) -> Option<HeaderValue> {
    let first = value.as_bytes().split(|&byte| byte == b',').next()?;
    match first.trim_ascii() {
        scheme if scheme.eq_ignore_ascii_case(b"https") => Some(HeaderValue::from_static("https")),
        scheme if scheme.eq_ignore_ascii_case(b"http") => Some(HeaderValue::from_static("http")),
        _ => None,
    }
}

/// An address as a header value, written into a stack buffer (no heap string). IPv4, the usual
/// case, is written digit by digit: through `fmt` it cost as much as verifying an HS256 token.
fn ip_header(ip: IpAddr) -> HeaderValue {
    use std::io::Write as _;
    if let IpAddr::V4(v4) = ip {
        return ipv4_header(v4.octets());
    }
    let mut buffer = [0u8; 48];
    let mut cursor = std::io::Cursor::new(&mut buffer[..]);
    let _ = write!(cursor, "{ip}");
    let len = cursor.position() as usize;
    HeaderValue::from_bytes(&buffer[..len]).unwrap_or(HeaderValue::from_static("0.0.0.0"))
}

fn ipv4_header(octets: [u8; 4]) -> HeaderValue {
    let mut buffer = [0u8; 15];
    let mut len = 0;
    for (index, octet) in octets.into_iter().enumerate() {
        if index > 0 {
            buffer[len] = b'.';
            len += 1;
        }
        let digits = [octet / 100, octet / 10 % 10, octet % 10];
        let skip = if octet >= 100 {
            0
        } else if octet >= 10 {
            1
        } else {
            2
        };
        for digit in &digits[skip..] {
            buffer[len] = b'0' + digit;
            len += 1;
        }
    }
    HeaderValue::from_bytes(&buffer[..len]).unwrap_or(HeaderValue::from_static("0.0.0.0"))
}

/// For tests: the header map of `(name, value)` pairs, in order, a repeated name appended.
#[cfg(test)]
pub(crate) fn header_map(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in pairs {
        headers.append(
            HeaderName::from_bytes(name.as_bytes()).expect("name"),
            HeaderValue::from_str(value).expect("value"),
        );
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trusted_proxys_scheme_is_read_in_any_case_and_from_the_front_of_a_list() {
        for (sent, kept) in [
            ("https", Some("https")),
            ("HTTPS", Some("https")),
            (" Http ", Some("http")),
            ("https, http", Some("https")),
            ("ftp", None),
            ("", None),
        ] {
            let value = HeaderValue::from_str(sent).expect("value");
            let read = forwarded_scheme(&value);
            assert_eq!(read.as_ref().map(|v| v.to_str().unwrap()), kept, "{sent:?}");
        }
    }

    #[test]
    fn addresses_are_written_as_the_standard_text() {
        for text in [
            "0.0.0.0",
            "127.0.0.1",
            "10.20.30.40",
            "192.168.100.9",
            "255.255.255.255",
            "::1",
            "2001:db8::8a2e:370:7334",
            "::ffff:10.0.0.1",
        ] {
            let ip: IpAddr = text.parse().unwrap();
            assert_eq!(ip_header(ip), text, "{text}");
        }
        for octets in [[1, 9, 10, 99], [100, 199, 200, 255]] {
            let ip = IpAddr::from(octets);
            assert_eq!(ip_header(ip), ip.to_string().as_str());
        }
    }

    #[test]
    fn hop_by_hop_headers_and_the_ones_connection_names_are_dropped() {
        let incoming = header_map(&[
            ("connection", "keep-alive, X-Secret-Hop"),
            ("keep-alive", "timeout=5"),
            ("te", "trailers"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "websocket"),
            ("proxy-authorization", "Basic x"),
            ("x-secret-hop", "1"),
            ("authorization", "Bearer abc"),
            (
                "traceparent",
                "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            ),
        ]);
        let kept = without_hop_by_hop(&incoming);
        let names: Vec<&str> = kept.keys().map(HeaderName::as_str).collect();
        assert_eq!(names, vec!["authorization", "traceparent"]);
    }

    #[test]
    fn forwarding_headers_are_the_gateways_own() {
        let incoming = header_map(&[
            ("host", "api.example"),
            ("x-forwarded-for", "6.6.6.6"),
            ("x-forwarded-proto", "https"),
            ("forwarded", "for=6.6.6.6"),
            ("x-real-ip", "6.6.6.6"),
            ("x-request-id", "abc"),
            ("expect", "100-continue"),
        ]);
        let client = ClientAddr {
            ip: "10.1.2.3".parse().expect("ip"),
            via_trusted_proxy: false,
        };
        let mut out = incoming.clone();
        to_upstream_headers(&mut out, client);
        assert_eq!(out["x-forwarded-for"], "10.1.2.3");
        assert_eq!(out["x-forwarded-proto"], "http");
        assert_eq!(out["x-forwarded-host"], "api.example");
        assert_eq!(out["x-request-id"], "abc");
        assert!(out.get("host").is_none());
        assert!(out.get("forwarded").is_none());
        assert!(out.get("x-real-ip").is_none());
        assert!(out.get("expect").is_none());
        assert_eq!(out.get_all("x-forwarded-for").iter().count(), 1);

        let mut trusted = incoming.clone();
        let via_proxy = ClientAddr {
            via_trusted_proxy: true,
            ..client
        };
        to_upstream_headers(&mut trusted, via_proxy);
        assert_eq!(trusted["x-forwarded-proto"], "https");
        assert_eq!(trusted["x-forwarded-for"], "10.1.2.3");
    }

    #[test]
    fn ip_headers_fit_the_longest_address() {
        let long: IpAddr = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
            .parse()
            .expect("ip");
        assert_eq!(ip_header(long), "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
        assert_eq!(ip_header("10.0.0.1".parse().expect("ip")), "10.0.0.1");
    }
}
