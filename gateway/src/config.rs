//! The gateway's configuration, read once from the environment through clap so `gateway serve --help`
//! documents every variable. Tests build it without clap through [`GatewayConfig::for_tests`].

use std::str::FromStr;
use std::time::Duration;

use reqwest::Url;
use shared_auth::AuthConfig;

/// The entries of a comma-separated variable, trimmed; empty ones are skipped, so an empty
/// variable (or a trailing comma) is no entry.
fn comma_entries(text: &str) -> impl Iterator<Item = &str> {
    text.split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
}

/// A comma-separated list of upstream base URLs (`http://127.0.0.1:8081,http://127.0.0.1:8082`).
/// Empty entries are ignored, so an empty variable means "no replica configured".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpstreamUrls(pub Vec<Url>);

impl FromStr for UpstreamUrls {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        comma_entries(text)
            .map(parse_base_url)
            .collect::<Result<Vec<_>, _>>()
            .map(UpstreamUrls)
    }
}

fn parse_base_url(text: &str) -> Result<Url, String> {
    let url = Url::parse(text).map_err(|e| format!("{text:?} is not a URL: {e}"))?;
    // The services are reached over plain HTTP/1.1 inside the cluster; TLS ends at the ingress.
    if url.scheme() != "http" || url.host_str().is_none() {
        return Err(format!("{text:?} must be an http:// base URL"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!("{text:?} must not have a query or fragment"));
    }
    Ok(url)
}

/// A comma-separated list of plain strings (CORS origins); empty entries are ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommaList(pub Vec<String>);

impl FromStr for CommaList {
    type Err = std::convert::Infallible;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Ok(CommaList(comma_entries(text).map(str::to_owned).collect()))
    }
}

/// A comma-separated list of CIDR blocks (`10.0.0.0/8, ::1/128`); a bare address is a /32 or
/// /128. Empty entries are ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CidrList(pub Vec<ipnet::IpNet>);

impl FromStr for CidrList {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        comma_entries(text)
            .map(|entry| {
                entry
                    .parse::<ipnet::IpNet>()
                    .or_else(|_| entry.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                    .map(|net| net.trunc())
                    .map_err(|_| format!("{entry:?} is not a CIDR block or an IP address"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(CidrList)
    }
}

/// 64 MiB: some thousands of pages of articles, a small part of a gateway's memory.
pub const DEFAULT_CACHE_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// Everything `gateway serve` reads. No `Debug`: it holds the key configuration (see
/// `AuthConfig`).
#[derive(clap::Args, Clone)]
pub struct GatewayConfig {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, env = "GATEWAY_LISTEN_ADDR", default_value = "127.0.0.1:8080")]
    pub listen_addr: String,
    /// Base URLs of the lingo-service replicas, comma-separated.
    #[arg(long, env = "LINGO_UPSTREAMS", default_value = "")]
    pub lingo_upstreams: UpstreamUrls,
    /// Base URLs of the news-service replicas, comma-separated.
    #[arg(long, env = "NEWS_UPSTREAMS", default_value = "")]
    pub news_upstreams: UpstreamUrls,
    /// Time allowed to open a TCP connection to a replica. Longer than the kernel's first SYN
    /// retransmission (1 s): a connect whose first SYN was dropped still gets through, instead
    /// of timing out just as its retry goes out (and cooling the replica down).
    #[arg(long, env = "UPSTREAM_CONNECT_TIMEOUT_MS", default_value_t = 2000)]
    pub upstream_connect_timeout_ms: u64,
    /// Time allowed from the start of a request until an upstream's response headers (504 after).
    #[arg(long, env = "UPSTREAM_TIMEOUT_MS", default_value_t = 10_000)]
    pub upstream_timeout_ms: u64,
    /// A replica that refused a connection is skipped for this long.
    #[arg(long, env = "UPSTREAM_COOLDOWN_SECS", default_value_t = 10)]
    pub upstream_cooldown_secs: u64,
    /// Interval of the background `/readyz` probe of every replica.
    #[arg(long, env = "UPSTREAM_PROBE_INTERVAL_SECS", default_value_t = 5)]
    pub upstream_probe_interval_secs: u64,
    /// Interval of the `/readyz` probe of a replica that is down (failed its probe or refused a
    /// connection), so a restarted replica is used again this soon after it is ready.
    #[arg(long, env = "UPSTREAM_DOWN_PROBE_MS", default_value_t = 500)]
    pub upstream_down_probe_ms: u64,
    /// How often each group's routes are read again from its replicas' OpenAPI documents (also
    /// at start and whenever a replica comes back up).
    #[arg(long, env = "ROUTES_REFRESH_SECS", default_value_t = 30)]
    pub routes_refresh_secs: u64,
    /// Per-caller rate limits on or off.
    #[arg(long, env = "RATE_LIMIT_ENABLED", default_value_t = true, action = clap::ArgAction::Set)]
    pub rate_limit_enabled: bool,
    /// Length of a rate-limit window.
    #[arg(long, env = "RATE_LIMIT_WINDOW_SECS", default_value_t = 10)]
    pub rate_limit_window_secs: u64,
    /// Reads (GET, HEAD, OPTIONS) a caller may make per window.
    #[arg(long, env = "RATE_LIMIT_READS", default_value_t = 300)]
    pub rate_limit_reads: u32,
    /// Writes (every other method) a caller may make per window.
    #[arg(long, env = "RATE_LIMIT_WRITES", default_value_t = 20)]
    pub rate_limit_writes: u32,
    /// Origins allowed by CORS, comma-separated; empty turns CORS off.
    #[arg(long, env = "CORS_ALLOWED_ORIGINS", default_value = "")]
    pub cors_allowed_origins: CommaList,
    /// Load balancers in front of the gateway (CIDR list): only from these peers are
    /// `X-Forwarded-For` and `X-Forwarded-Proto` believed.
    #[arg(long, env = "TRUSTED_PROXIES", default_value = "")]
    pub trusted_proxies: CidrList,
    /// A connection whose request head has not fully arrived within this time is closed.
    #[arg(long, env = "HEADER_READ_TIMEOUT_MS", default_value_t = 10_000)]
    pub header_read_timeout_ms: u64,
    /// A connection whose client accepts no byte of an answer for this long (it stopped reading)
    /// is closed, so it holds no memory or upstream connection longer.
    #[arg(long, env = "CLIENT_SEND_TIMEOUT_MS", default_value_t = 60_000)]
    pub client_send_timeout_ms: u64,
    /// How many distinct callers the rate limiter tracks at most; past it the idlest are dropped.
    #[arg(long, env = "RATE_LIMIT_MAX_KEYS", default_value_t = 200_000)]
    pub rate_limit_max_keys: usize,
    /// How many verified tokens are remembered (0 turns the cache off).
    #[arg(long, env = "TOKEN_CACHE_CAPACITY", default_value_t = 10_000)]
    pub token_cache_capacity: usize,
    /// Memory of the cache of public answers (anonymous GETs answered `Cache-Control: public,
    /// max-age=N`), in bytes; 0 turns the cache off.
    #[arg(long, env = "GATEWAY_CACHE_MAX_BYTES", default_value_t = DEFAULT_CACHE_MAX_BYTES)]
    pub cache_max_bytes: u64,
    /// Worker threads serving connections, each with its own event loop and upstream
    /// connections; 0 means one per CPU the process may use.
    #[arg(long, env = "GATEWAY_WORKERS", default_value_t = 0)]
    pub workers: usize,
    #[command(flatten)]
    pub auth: AuthConfig,
}

impl GatewayConfig {
    /// The defaults of the flags, on port 0 of 127.0.0.1, with the test HS256 secret of
    /// `shared_auth::testing` and the given upstream base URLs. Panics on a bad URL (tests only).
    pub fn for_tests(lingo_upstreams: &[String], news_upstreams: &[String]) -> Self {
        let urls = |list: &[String]| {
            list.join(",")
                .parse::<UpstreamUrls>()
                .unwrap_or_else(|e| panic!("bad upstream URL in a test: {e}"))
        };
        Self {
            listen_addr: "127.0.0.1:0".into(),
            lingo_upstreams: urls(lingo_upstreams),
            news_upstreams: urls(news_upstreams),
            upstream_connect_timeout_ms: 2000,
            upstream_timeout_ms: 10_000,
            upstream_cooldown_secs: 10,
            upstream_probe_interval_secs: 5,
            upstream_down_probe_ms: 500,
            routes_refresh_secs: 30,
            rate_limit_enabled: true,
            rate_limit_window_secs: 10,
            rate_limit_reads: 300,
            rate_limit_writes: 20,
            cors_allowed_origins: CommaList::default(),
            token_cache_capacity: 10_000,
            trusted_proxies: CidrList::default(),
            header_read_timeout_ms: 10_000,
            client_send_timeout_ms: 60_000,
            rate_limit_max_keys: 200_000,
            cache_max_bytes: DEFAULT_CACHE_MAX_BYTES,
            workers: 0,
            // Same secret as shared_auth::testing::TEST_SECRET, so its `token(sub)` works.
            auth: AuthConfig::hs256("test-secret-that-is-long-enough-for-hs256"),
        }
    }

    pub fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.upstream_connect_timeout_ms.max(1))
    }

    pub fn upstream_timeout(&self) -> Duration {
        Duration::from_millis(self.upstream_timeout_ms.max(1))
    }

    pub fn cooldown(&self) -> Duration {
        Duration::from_secs(self.upstream_cooldown_secs)
    }

    /// The listener's deadlines for a client: its request head, and each write of an answer.
    pub fn client_timeouts(&self) -> ClientTimeouts {
        ClientTimeouts {
            header_read: Duration::from_millis(self.header_read_timeout_ms.max(1)),
            send: Duration::from_millis(self.client_send_timeout_ms.max(1)),
        }
    }

    pub fn probe_interval(&self) -> Duration {
        Duration::from_secs(self.upstream_probe_interval_secs.max(1))
    }

    pub fn down_probe_interval(&self) -> Duration {
        Duration::from_millis(self.upstream_down_probe_ms.max(10))
    }

    pub fn routes_refresh_interval(&self) -> Duration {
        Duration::from_secs(self.routes_refresh_secs.max(1))
    }

    /// The number of worker threads: as configured, else one per CPU the process may use.
    pub fn worker_count(&self) -> usize {
        if self.workers > 0 {
            return self.workers;
        }
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_lists_skip_blanks_and_reject_non_http() {
        assert_eq!("".parse::<UpstreamUrls>(), Ok(UpstreamUrls(vec![])));
        let two: UpstreamUrls = "http://a:1, http://b:2/,".parse().expect("two URLs");
        assert_eq!(two.0.len(), 2);
        assert!("ftp://a".parse::<UpstreamUrls>().is_err());
        assert!("not a url".parse::<UpstreamUrls>().is_err());
        assert!("http://a:1/?x=1".parse::<UpstreamUrls>().is_err());
        assert!("https://a:1".parse::<UpstreamUrls>().is_err());
    }

    #[test]
    fn trusted_proxies_take_blocks_and_bare_addresses() {
        let list: CidrList = "10.1.2.3/8, ::1 ,,192.168.0.7".parse().expect("valid");
        let text: Vec<String> = list.0.iter().map(ToString::to_string).collect();
        assert_eq!(text, vec!["10.0.0.0/8", "::1/128", "192.168.0.7/32"]);
        assert!("10.0.0.0/33".parse::<CidrList>().is_err());
        assert!("proxy.local".parse::<CidrList>().is_err());
        assert_eq!("".parse::<CidrList>(), Ok(CidrList::default()));
    }

    #[test]
    fn origins_are_trimmed() {
        let list: CommaList = " https://a.example ,,https://b.example"
            .parse()
            .expect("infallible");
        assert_eq!(list.0, vec!["https://a.example", "https://b.example"]);
    }
}

/// How long the listener waits on a client (`HEADER_READ_TIMEOUT_MS`, `CLIENT_SEND_TIMEOUT_MS`).
#[derive(Clone, Copy, Debug)]
pub struct ClientTimeouts {
    /// For a request head to arrive whole.
    pub header_read: Duration,
    /// For the client to accept any byte of an answer written to it.
    pub send: Duration,
}
