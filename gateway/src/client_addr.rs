//! The client address of a request (docs/gateway.md, "Client address"): the peer address, unless
//! the peer is one of the `TRUSTED_PROXIES`, in which case the rightmost `X-Forwarded-For` entry
//! that is not itself a trusted proxy. That address is what rate limits, logs and the services see.

use std::net::{IpAddr, Ipv6Addr};

use axum::http::{HeaderMap, HeaderValue};
use ipnet::IpNet;

static X_FORWARDED_FOR: &str = "x-forwarded-for";

/// Who the client is, as far as the gateway can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr {
    pub ip: IpAddr,
    /// The peer is a trusted proxy: its `X-Forwarded-Proto` may be passed on.
    pub via_trusted_proxy: bool,
}

/// The trusted proxies, read once at start-up.
#[derive(Debug, Clone, Default)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    pub fn new(blocks: Vec<IpNet>) -> Self {
        Self(blocks)
    }

    fn trusts(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|block| block.contains(&ip))
    }

    /// The client address of a request that came from `peer` with `headers`.
    pub fn client_of(&self, peer: IpAddr, headers: &HeaderMap) -> ClientAddr {
        let peer = peer.to_canonical();
        if self.0.is_empty() || !self.trusts(peer) {
            return ClientAddr {
                ip: peer,
                via_trusted_proxy: false,
            };
        }
        ClientAddr {
            ip: self.rightmost_untrusted(headers).unwrap_or(peer),
            via_trusted_proxy: true,
        }
    }

    /// Walks `X-Forwarded-For` from the right (the hop nearest the gateway) and stops at the
    /// first address that is not a trusted proxy. When every entry is trusted, the leftmost one;
    /// an entry that is not an address ends the walk (nothing left of it can be believed).
    fn rightmost_untrusted(&self, headers: &HeaderMap) -> Option<IpAddr> {
        let mut nearest_trusted = None;
        let values: Vec<&HeaderValue> = headers.get_all(X_FORWARDED_FOR).iter().collect();
        for value in values.into_iter().rev() {
            // Entry by entry, not the value as a whole: a client's junk bytes on the left of the
            // list must not hide the address its proxy appended on the right.
            for entry in value.as_bytes().rsplit(|&byte| byte == b',') {
                let Some(ip) = std::str::from_utf8(entry)
                    .ok()
                    .and_then(|entry| parse_entry(entry.trim()))
                else {
                    return nearest_trusted;
                };
                if !self.trusts(ip) {
                    return Some(ip);
                }
                nearest_trusted = Some(ip);
            }
        }
        nearest_trusted
    }
}

/// An `X-Forwarded-For` entry: an address, possibly with brackets or a port as some proxies write.
fn parse_entry(entry: &str) -> Option<IpAddr> {
    if let Ok(ip) = entry.parse::<IpAddr>() {
        return Some(ip.to_canonical());
    }
    if let Ok(socket) = entry.parse::<std::net::SocketAddr>() {
        return Some(socket.ip().to_canonical());
    }
    entry
        .strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
        .and_then(|inner| inner.parse::<Ipv6Addr>().ok())
        .map(|ip| IpAddr::V6(ip).to_canonical())
}

/// The rate-limit identity of an address: an IPv4 address as is, an IPv6 address by its /64 (a
/// single host usually controls a whole /64).
pub fn limit_prefix(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & !(u128::from(u64::MAX));
            IpAddr::V6(Ipv6Addr::from(bits))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CidrList;

    fn proxies(list: &str) -> TrustedProxies {
        TrustedProxies::new(list.parse::<CidrList>().expect("cidr").0)
    }

    fn xff(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(
                X_FORWARDED_FOR,
                HeaderValue::from_str(value).expect("value"),
            );
        }
        headers
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("ip")
    }

    #[test]
    fn without_trusted_proxies_the_peer_is_the_client() {
        let none = proxies("");
        let client = none.client_of(ip("10.0.0.1"), &xff(&["1.2.3.4"]));
        assert_eq!(client.ip, ip("10.0.0.1"));
        assert!(!client.via_trusted_proxy);
        let untrusted_peer = proxies("10.0.0.0/8").client_of(ip("192.0.2.9"), &xff(&["1.2.3.4"]));
        assert_eq!(untrusted_peer.ip, ip("192.0.2.9"));
        assert!(!untrusted_peer.via_trusted_proxy);
    }

    #[test]
    fn from_a_trusted_peer_the_rightmost_untrusted_entry_wins() {
        let lb = proxies("10.0.0.0/8");
        let spoofed = xff(&["6.6.6.6, 203.0.113.7", "10.1.1.1"]);
        let client = lb.client_of(ip("10.0.0.1"), &spoofed);
        assert_eq!(client.ip, ip("203.0.113.7"));
        assert!(client.via_trusted_proxy);
        let all_trusted = lb.client_of(ip("10.0.0.1"), &xff(&["10.9.9.9, 10.1.1.1"]));
        assert_eq!(all_trusted.ip, ip("10.9.9.9"));
        let missing = lb.client_of(ip("10.0.0.1"), &HeaderMap::new());
        assert_eq!(missing.ip, ip("10.0.0.1"));
        let garbage = lb.client_of(ip("10.0.0.1"), &xff(&["1.2.3.4, nonsense, 10.1.1.1"]));
        assert_eq!(garbage.ip, ip("10.1.1.1"));
        let ported = lb.client_of(ip("10.0.0.1"), &xff(&["[2001:db8::1]:443"]));
        assert_eq!(ported.ip, ip("2001:db8::1"));
        // A client's non-UTF-8 bytes, with its address appended by the load balancer.
        let mut junk = HeaderMap::new();
        let value = HeaderValue::from_bytes(b"\xff, 203.0.113.5").expect("value");
        junk.append(X_FORWARDED_FOR, value);
        assert_eq!(lb.client_of(ip("10.0.0.1"), &junk).ip, ip("203.0.113.5"));
    }

    #[test]
    fn mapped_ipv4_peers_are_plain_ipv4() {
        let lb = proxies("10.0.0.0/8");
        let client = lb.client_of(ip("::ffff:10.0.0.1"), &xff(&["203.0.113.7"]));
        assert_eq!(client.ip, ip("203.0.113.7"));
    }

    #[test]
    fn ipv6_is_limited_by_its_64() {
        assert_eq!(
            limit_prefix(ip("2001:db8:1:2:aaaa:bbbb:cccc:dddd")),
            ip("2001:db8:1:2::")
        );
        assert_eq!(limit_prefix(ip("192.0.2.1")), ip("192.0.2.1"));
    }
}
