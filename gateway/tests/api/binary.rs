//! The real `gateway` binary, where a process boundary matters: its memory while a 50 MiB
//! response streams through, SIGTERM, and `mint-token`.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use shared_auth::testing::TEST_SECRET;

use crate::helpers::{BIG_BODY_BYTES, Upstream, client};

const BIN: &str = env!("CARGO_BIN_EXE_gateway");

/// A `gateway serve` child process, killed when dropped.
struct GatewayProcess {
    child: Child,
    addr: SocketAddr,
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

fn base_command(subcommand: &str) -> Command {
    let mut command = Command::new(BIN);
    command
        .arg(subcommand)
        .env("AUTH_ALGORITHMS", "HS256")
        .env("AUTH_HS256_SECRET", TEST_SECRET)
        .env_remove("AUTH_JWKS_URL")
        .env_remove("AUTH_JWKS_FILE")
        .env_remove("AUTH_ISSUER")
        .env_remove("AUTH_AUDIENCE")
        .env("LOG_FORMAT", "json")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null());
    command
}

impl GatewayProcess {
    async fn start(lingo: &Upstream, news: &Upstream) -> Self {
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let child = base_command("serve")
            .env("GATEWAY_LISTEN_ADDR", addr.to_string())
            .env("LINGO_UPSTREAMS", &lingo.url)
            .env("NEWS_UPSTREAMS", &news.url)
            .env("RATE_LIMIT_ENABLED", "false")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the gateway binary");
        let process = Self { child, addr };
        process.wait_until_healthy().await;
        process
    }

    async fn wait_until_healthy(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        let client = client();
        loop {
            let health = client.get(self.url("/healthz")).send().await;
            if health.is_ok_and(|r| r.status() == 200) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the gateway binary did not come up"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Peak resident memory of the process so far, in KiB.
    fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("read /proc status");
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM line")
    }

    fn send_sigterm(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn a_50_mib_response_streams_through_without_the_gateway_holding_it() {
    let lingo = Upstream::start("lingo-1").await;
    let news = Upstream::start("news-1").await;
    let gateway = GatewayProcess::start(&lingo, &news).await;
    let client = client();
    for _ in 0..3 {
        let warm = client
            .get(gateway.url("/v1/news/articles"))
            .send()
            .await
            .expect("warm-up");
        assert_eq!(warm.status(), 200);
        warm.bytes().await.expect("body");
    }
    let before = gateway.peak_rss_kib();

    let response = client
        .get(gateway.url("/v1/news/articles/big"))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 200);
    // The test client streams too: it counts the bytes and keeps none.
    let mut received = 0usize;
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        received += chunk.expect("chunk").len();
    }
    assert_eq!(received, BIG_BODY_BYTES);

    let after = gateway.peak_rss_kib();
    eprintln!("gateway peak RSS: {before} KiB before, {after} KiB after the 50 MiB response");
    let growth_kib = after.saturating_sub(before);
    assert!(
        growth_kib < 16 * 1024,
        "the gateway's peak memory grew by {growth_kib} KiB ({before} -> {after}) for a 50 MiB body"
    );
}

#[tokio::test]
async fn on_sigterm_in_flight_requests_complete_and_new_connections_are_refused() {
    let lingo = Upstream::start("lingo-1").await;
    let news = Upstream::start("news-1").await;
    let mut gateway = GatewayProcess::start(&lingo, &news).await;
    let in_flight = tokio::spawn(
        client()
            .get(gateway.url("/v1/news/articles?sleep_ms=1500"))
            .send(),
    );
    // Wait until the slow request has reached the upstream.
    let deadline = Instant::now() + Duration::from_secs(5);
    while news.hits() == 0 {
        assert!(Instant::now() < deadline, "the slow request never arrived");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    gateway.send_sigterm();

    assert!(
        refuses_connections(gateway.addr).await,
        "new connections are refused after SIGTERM"
    );
    let response = in_flight.await.expect("task").expect("in-flight request");
    assert_eq!(response.status(), 200);
    let echo: serde_json::Value = response.json().await.expect("echo");
    assert_eq!(echo["replica"], "news-1");

    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = gateway.child.try_wait().expect("try_wait") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the gateway did not exit after draining"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "exit status {status:?}");
}

/// Whether connecting to `addr` fails within a second (the listener is closed).
pub async fn refuses_connections(addr: SocketAddr) -> bool {
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline {
        if tokio::net::TcpStream::connect(addr).await.is_err() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test]
async fn mint_token_signs_a_token_the_gateway_accepts_and_traces_continue() {
    let output = base_command("mint-token")
        .args(["--sub", "dev-reader"])
        .output()
        .expect("run mint-token");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let token = String::from_utf8(output.stdout)
        .expect("utf-8")
        .trim()
        .to_owned();

    let lingo = Upstream::start("lingo-1").await;
    let news = Upstream::start("news-1").await;
    let gateway = GatewayProcess::start(&lingo, &news).await;
    let response = client()
        .get(gateway.url("/v1/news/me/feed"))
        .bearer_auth(&token)
        .header("traceparent", CLIENT_TRACEPARENT)
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 200);

    // Without an OTLP endpoint the binary builds no span: the upstream gets the client's trace
    // context exactly as sent, so the trace continues past the gateway.
    let echo: serde_json::Value = response.json().await.expect("echo");
    let forwarded = echo["headers"]["traceparent"][0]
        .as_str()
        .expect("traceparent");
    assert_eq!(forwarded, CLIENT_TRACEPARENT);
}

const CLIENT_TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

#[test]
fn serve_help_lists_every_variable() {
    let output = Command::new(BIN)
        .args(["serve", "--help"])
        .output()
        .expect("run --help");
    let help = String::from_utf8_lossy(&output.stdout);
    for variable in [
        "GATEWAY_LISTEN_ADDR",
        "LINGO_UPSTREAMS",
        "NEWS_UPSTREAMS",
        "UPSTREAM_CONNECT_TIMEOUT_MS",
        "UPSTREAM_TIMEOUT_MS",
        "UPSTREAM_COOLDOWN_SECS",
        "UPSTREAM_PROBE_INTERVAL_SECS",
        "RATE_LIMIT_ENABLED",
        "RATE_LIMIT_WINDOW_SECS",
        "RATE_LIMIT_READS",
        "RATE_LIMIT_WRITES",
        "CORS_ALLOWED_ORIGINS",
        "TOKEN_CACHE_CAPACITY",
        "LOG_FORMAT",
        "AUTH_ISSUER",
        "AUTH_HS256_SECRET",
        "AUTH_JWKS_URL",
    ] {
        assert!(
            help.contains(variable),
            "{variable} missing from --help:\n{help}"
        );
    }
}
