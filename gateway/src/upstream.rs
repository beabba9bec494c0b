//! Upstream groups and their replicas: round-robin selection, a cooldown for replicas that refused
//! a connection, and a background `/readyz` probe that marks replicas up or down (a replica that
//! is down is probed every `UPSTREAM_DOWN_PROBE_MS`, so one that restarts is used again within
//! that time). When every replica of a group is down they are all tried anyway (panic routing,
//! as Envoy does below its panic threshold): a refusal without trying would outlast the outage.
//! Upstream health is reported in `/metrics` and the logs, never by the gateway's own `/readyz`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::http::uri::{Authority, PathAndQuery};
use axum::http::{Method, Request, Uri};
use bytes::Bytes;
use reqwest::Url;
use tokio::sync::Notify;

use crate::client::{Endpoint, OutBody, UpstreamClient};
use crate::routes::Group;

/// How long a single `/readyz` probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

pub struct Replica {
    pub base: Url,
    /// `base`'s host as the `server.address` span attribute (OpenTelemetry's HTTP client
    /// conventions: the host alone, its port in `server.port`), shared by every attempt's span
    /// rather than copied into each.
    pub span_address: Arc<str>,
    pub span_port: Option<u16>,
    /// Where the client connects, from `host:port` parsed once.
    pub endpoint: Endpoint,
    /// The base URL's path without its trailing `/` (usually empty).
    base_path: String,
    /// Set when the replica refused a connection: skipped until then.
    cooldown_until: Mutex<Option<Instant>>,
    /// Result of the last `/readyz` probe (up until a probe says otherwise).
    probe_ok: AtomicBool,
}

impl Replica {
    fn new(base: Url) -> Self {
        let authority = match base.port_or_known_default() {
            Some(port) => format!("{}:{port}", base.host_str().unwrap_or_default()),
            None => base.host_str().unwrap_or_default().to_owned(),
        };
        let authority = Authority::try_from(authority.as_str())
            .unwrap_or_else(|_| Authority::from_static("invalid.invalid"));
        Self {
            endpoint: Endpoint::new(authority),
            base_path: base.path().trim_end_matches('/').to_owned(),
            span_address: Arc::from(base.host_str().unwrap_or_default()),
            span_port: base.port_or_known_default(),
            base,
            cooldown_until: Mutex::new(None),
            probe_ok: AtomicBool::new(true),
        }
    }

    fn cooldown_until(&self) -> Option<Instant> {
        *self
            .cooldown_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn set_cooldown(&self, until: Option<Instant>) {
        *self
            .cooldown_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = until;
    }

    /// Marks the replica down until its next probe finds it ready: a connection to it failed
    /// outside the probes (its route document could not be read). The quick probe of a replica
    /// that is down then tells its group when it is back, and the group's routes are read again:
    /// a replica that went away and came back between two probes may be a new version.
    pub fn mark_down(&self) {
        if self.probe_ok.swap(false, Ordering::Relaxed) {
            tracing::info!(upstream = %self.base, "replica unreachable; marked down until its next probe");
        }
    }

    fn is_available(&self, now: Instant) -> bool {
        self.probe_ok.load(Ordering::Relaxed) && self.cooldown_until().is_none_or(|t| t <= now)
    }

    /// The request target of `path_and_query` on this replica, in origin form: the request's
    /// own path and query, joined to the base path only when the base has one.
    pub fn uri_for(&self, path_and_query: PathAndQuery) -> Option<Uri> {
        if self.base_path.is_empty() {
            return Some(Uri::from(path_and_query));
        }
        let joined = [self.base_path.as_str(), path_and_query.as_str()].concat();
        let path_and_query = PathAndQuery::from_maybe_shared(Bytes::from(joined)).ok()?;
        Some(Uri::from(path_and_query))
    }
}

pub struct UpstreamGroup {
    pub group: Group,
    pub replicas: Vec<Arc<Replica>>,
    next: AtomicUsize,
    cooldown: Duration,
    /// How often a replica that is down is probed.
    down_probe: Duration,
    /// Told when a replica that was down is up again (the group's routes are read again then).
    pub came_back: Notify,
}

/// Why no replica can be tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoReplica {
    NoneConfigured,
    /// Every replica was marked down and none accepted a connection when tried anyway; retry
    /// after this many seconds.
    AllDown {
        retry_after_secs: u32,
    },
}

/// The replicas to try for one request, in order.
pub struct Candidates {
    pub replicas: Vec<Arc<Replica>>,
    /// Every replica was marked down when the request came (panic routing).
    pub all_down: bool,
}

impl UpstreamGroup {
    pub fn new(group: Group, bases: &[Url], cooldown: Duration, down_probe: Duration) -> Self {
        if bases.is_empty() {
            // Allowed (a gateway for one service only), but a typo in a manifest looks the same.
            tracing::warn!(
                group = group.label(),
                "no upstream configured for this group: its requests get 503"
            );
        }
        Self {
            group,
            replicas: bases
                .iter()
                .cloned()
                .map(Replica::new)
                .map(Arc::new)
                .collect(),
            next: AtomicUsize::new(0),
            cooldown,
            down_probe,
            came_back: Notify::new(),
        }
    }

    /// The replicas in the order to try them: the available ones (round-robin start, then the
    /// others), then those marked down. A replica marked down may be back already (the probe has
    /// not seen it yet), and trying it costs a refused connection where refusing without trying
    /// would cost the whole outage: so they are tried when none is available (panic routing),
    /// and after the available ones, when every one of those refuses the request.
    pub fn candidates(&self, now: Instant) -> Result<Candidates, NoReplica> {
        let count = self.replicas.len();
        if count == 0 {
            return Err(NoReplica::NoneConfigured);
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed) % count;
        let (mut replicas, down): (Vec<Arc<Replica>>, Vec<Arc<Replica>>) = (0..count)
            .map(|i| self.replicas[(start + i) % count].clone())
            .partition(|replica| replica.is_available(now));
        let all_down = replicas.is_empty();
        replicas.extend(down);
        Ok(Candidates { replicas, all_down })
    }

    /// Every replica was down and refused when tried anyway: retry once the next probe of a
    /// down replica may have found one back (at least a second).
    pub fn all_down(&self) -> NoReplica {
        let secs = self.down_probe.as_secs_f64().ceil() as u64;
        NoReplica::AllDown {
            retry_after_secs: u32::try_from(secs).unwrap_or(u32::MAX).max(1),
        }
    }

    /// A replica refused a connection: skip it for the cooldown.
    pub fn mark_refused(&self, replica: &Replica, now: Instant) {
        if !self.cooldown.is_zero() {
            tracing::warn!(upstream = %replica.base, cooldown_secs = self.cooldown.as_secs(), "replica refused a connection; cooling down");
            replica.set_cooldown(Some(now + self.cooldown));
        }
    }

    /// Replicas that would be tried now: their last probe succeeded and they are not cooling
    /// down after a refused connection.
    pub fn ready_replicas(&self) -> usize {
        let now = Instant::now();
        self.replicas.iter().filter(|r| r.is_available(now)).count()
    }

    /// Probes `replica` forever: every `interval` (the first probe right away), and every
    /// `down_interval` in between while it is down (its last probe failed, or it is cooling
    /// down). Each replica has its own loop, so a replica whose probes hang until
    /// [`PROBE_TIMEOUT`] delays no other replica's probes, of its group or of the other.
    async fn watch(
        &self,
        index: usize,
        client: &UpstreamClient,
        interval: Duration,
        down_interval: Duration,
    ) {
        let replica = &self.replicas[index];
        let mut ticker = tokio::time::interval(down_interval.min(interval));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut next_full = tokio::time::Instant::now();
        loop {
            let now = ticker.tick().await;
            let full = now >= next_full;
            if full {
                next_full = now + interval;
            } else if replica.is_available(Instant::now()) {
                continue;
            }
            if self.probe(client, replica).await {
                self.came_back.notify_one();
            }
            // Said once per group and full round, by its first replica's loop.
            if full && index == 0 && self.ready_replicas() == 0 {
                tracing::warn!(
                    group = self.group.label(),
                    replicas = self.replicas.len(),
                    "no ready replica in the group"
                );
            }
        }
    }

    /// Probes `replica` once; whether it was down and is up now (usable at once).
    async fn probe(&self, client: &UpstreamClient, replica: &Replica) -> bool {
        let was_available = replica.is_available(Instant::now());
        let ok = probe_replica(client, replica).await;
        let was_ok = replica.probe_ok.swap(ok, Ordering::Relaxed);
        if ok {
            // A replica that answers again is usable at once, cooldown or not.
            replica.set_cooldown(None);
        }
        if ok != was_ok {
            tracing::info!(group = self.group.label(), upstream = %replica.base, ready = ok, "replica readiness changed");
        }
        ok && !was_available
    }
}

async fn probe_replica(client: &UpstreamClient, replica: &Replica) -> bool {
    let Some(uri) = replica.uri_for(PathAndQuery::from_static("/readyz")) else {
        return false;
    };
    let Ok(request) = Request::builder()
        .method(Method::GET)
        .uri(uri)
        .body(OutBody::Empty)
    else {
        return false;
    };
    let answered =
        tokio::time::timeout(PROBE_TIMEOUT, client.send(&replica.endpoint, request)).await;
    matches!(answered, Ok(Ok(response)) if response.status().is_success())
}

/// Probes every replica of every group forever, every `interval` (the first probe right away),
/// and the replicas that are down every `down_interval` in between, each replica on its own (see
/// [`UpstreamGroup::watch`]); `/metrics` and `/readyz` read the results when asked.
pub async fn probe_forever(
    groups: Vec<Arc<UpstreamGroup>>,
    client: UpstreamClient,
    interval: Duration,
    down_interval: Duration,
) {
    let client = &client;
    let watches = groups.iter().flat_map(|group| {
        (0..group.replicas.len())
            .map(move |index| group.watch(index, client, interval, down_interval))
    });
    futures_util::future::join_all(watches).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(n: usize) -> UpstreamGroup {
        let bases: Vec<Url> = (0..n)
            .map(|i| Url::parse(&format!("http://127.0.0.1:{}", 9000 + i)).expect("url"))
            .collect();
        UpstreamGroup::new(
            Group::News,
            &bases,
            Duration::from_secs(10),
            Duration::from_millis(500),
        )
    }

    #[test]
    fn round_robin_rotates_the_first_choice() {
        let g = group(3);
        let now = Instant::now();
        let firsts: Vec<u16> = (0..6)
            .map(|_| {
                g.candidates(now).expect("available").replicas[0]
                    .base
                    .port()
                    .expect("port")
            })
            .collect();
        assert_eq!(firsts, vec![9000, 9001, 9002, 9000, 9001, 9002]);
        assert_eq!(g.candidates(now).expect("available").replicas.len(), 3);
    }

    #[test]
    fn refused_replicas_cool_down_and_all_are_tried_when_all_are_down() {
        let g = group(2);
        let now = Instant::now();
        g.mark_refused(&g.replicas[0], now);
        let left = g.candidates(now).expect("one left");
        assert!(!left.all_down);
        let ports = |c: &Candidates| c.replicas.iter().map(|r| r.base.port()).collect::<Vec<_>>();
        assert_eq!(
            ports(&left),
            [Some(9001), Some(9000)],
            "the available replica first, the one marked down after it"
        );
        g.mark_refused(&g.replicas[1], now + Duration::from_secs(3));
        let panic = g.candidates(now + Duration::from_secs(4)).expect("all");
        assert!(panic.all_down);
        assert_eq!(panic.replicas.len(), 2, "every replica is tried anyway");
        assert_eq!(
            g.all_down(),
            NoReplica::AllDown {
                retry_after_secs: 1
            }
        );
        let back = g.candidates(now + Duration::from_secs(10)).expect("back");
        assert!(!back.all_down);
        assert_eq!(ports(&back)[0], Some(9000), "the replica back comes first");
    }

    #[test]
    fn no_replicas_configured() {
        let g = group(0);
        assert_eq!(
            g.candidates(Instant::now()).err(),
            Some(NoReplica::NoneConfigured)
        );
    }

    #[test]
    fn urls_keep_the_base_path() {
        let path = || PathAndQuery::from_static("/v1/news/articles?limit=2");
        let replica = Replica::new(Url::parse("http://h:1/prefix/").expect("url"));
        let uri = replica.uri_for(path()).expect("uri");
        assert_eq!(uri.to_string(), "/prefix/v1/news/articles?limit=2");
        let plain = Replica::new(Url::parse("http://h").expect("url"));
        assert_eq!(
            plain.uri_for(path()).expect("uri").to_string(),
            "/v1/news/articles?limit=2"
        );
        assert_eq!(plain.endpoint.authority().as_str(), "h:80");
    }
}
