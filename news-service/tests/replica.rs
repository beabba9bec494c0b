//! news-service against two real PostgreSQL servers: a primary and a streaming replica of it
//! behind `NEWS_DATABASE_READ_URL`. Anonymous reads are served by the replica; with the replica
//! stopped they are served by the primary (no error, readiness stays 200, the fallback counts);
//! with the replica back they return to it within the cool-down; with the primary stopped they
//! are still served by the replica while writes and personal reads are 503 problems. A replica
//! whose queries stall (behind a proxy that holds them back) costs a read `NEWS_READ_TIMEOUT_MS`,
//! then the primary answers.
//!
//! Which node answered is proven by data, not timing: replay is paused on the replica and an
//! article is added on the primary, so only the primary knows it.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use news_service::Application;
use news_service::config::ServeConfig;
use reqwest::{Client, Response};
use serde_json::{Value, json};
use shared_auth::testing::replica::{Node, ReplicatedCluster};
use shared_auth::testing::{auth_config, token};
use sqlx::{Connection, PgConnection};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

const COOLDOWN_SECS: u64 = 2;
/// How long a change may take to show: the cool-down, one background check (2 s) and slack for
/// a busy machine.
const NOTICE_WITHIN: Duration = Duration::from_secs(COOLDOWN_SECS + 2 + 8);

const CATALOGUE: &str = r"
INSERT INTO news.organizations (id, name, url) VALUES ('org-a', 'Alpha News', 'https://alpha.example');
INSERT INTO news.journalists (id, name, organization_id) VALUES ('jrn-1', 'Zed Writer', 'org-a');
INSERT INTO news.articles (id, title, summary, body, url, published_at, organization_id, journalist_id)
  VALUES ('art-1', 'Title 1', 'Summary 1', 'Body 1', 'https://alpha.example/1', '2026-01-01T10:00:00Z', 'org-a', 'jrn-1');
";

struct Service {
    address: String,
    client: Client,
}

impl Service {
    async fn get(&self, path: &str, user: Option<&str>) -> Response {
        let mut request = self.client.get(format!("{}{path}", self.address));
        if let Some(user) = user {
            request = request.bearer_auth(token(user));
        }
        request.send().await.unwrap()
    }

    async fn like(&self, article: &str, user: &str) -> Response {
        self.client
            .post(format!("{}/v1/news/articles/{article}/like", self.address))
            .bearer_auth(token(user))
            .send()
            .await
            .unwrap()
    }

    /// `/readyz` status and body once its pool states equal `pools` (waits for the check).
    async fn readiness_once(&self, pools: Value) -> (u16, Value) {
        let deadline = Instant::now() + NOTICE_WITHIN;
        loop {
            let response = self.get("/readyz", None).await;
            let status = response.status().as_u16();
            let body: Value = response.json().await.unwrap();
            if body["pools"] == pools || Instant::now() > deadline {
                return (status, body);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The sum of `news_db_read_fallback_total` over its reasons.
    async fn fallbacks(&self) -> f64 {
        let text = self.get("/metrics", None).await.text().await.unwrap();
        text.lines()
            .filter(|line| line.starts_with("news_db_read_fallback_total"))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    /// Waits until an anonymous read is served by the read pool (no fallback counted for it):
    /// on a busy machine the pool's first connection can miss its acquire timeout, and the
    /// fallback's cool-down then keeps reads on the primary for a while. Returns the fallbacks
    /// counted so far.
    async fn reading_from_the_replica(&self) -> f64 {
        let deadline = Instant::now() + NOTICE_WITHIN;
        loop {
            let before = self.fallbacks().await;
            assert_eq!(self.anonymous_article("art-1").await, 200);
            let after = self.fallbacks().await;
            if after == before {
                return after;
            }
            assert!(Instant::now() < deadline, "reads never reached the replica");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Status of an anonymous read of `article` (200: the node has it, 404: it does not).
    async fn anonymous_article(&self, article: &str) -> u16 {
        let path = format!("/v1/news/articles/{article}");
        self.get(&path, None).await.status().as_u16()
    }
}

async fn start_service(cluster: &ReplicatedCluster, max_lag_ms: u64) -> Service {
    let mut config = ServeConfig::new(cluster.url_for(Node::Primary, "news_app"), auth_config());
    config.database_read_url = Some(cluster.url_for(Node::Replica, "news_app"));
    config.read_routing.read_fallback_cooldown_secs = COOLDOWN_SECS;
    config.read_routing.read_acquire_timeout_ms = 500;
    config.read_routing.read_max_lag_ms = max_lag_ms;
    serve(config).await
}

async fn serve(config: ServeConfig) -> Service {
    let app = Application::build(config).await.unwrap();
    let address = format!("http://127.0.0.1:{}", app.port());
    tokio::spawn(app.run_until_stopped());
    Service {
        address,
        client: Client::new(),
    }
}

/// A primary and its replica with the news schema and `CATALOGUE`.
async fn cluster_with_catalogue() -> ReplicatedCluster {
    let cluster = ReplicatedCluster::create().await;
    news_service::migrate(&cluster.url_for(Node::Primary, "news_owner"))
        .await
        .unwrap();
    sqlx::raw_sql(CATALOGUE)
        .execute(&mut admin(&cluster, Node::Primary).await)
        .await
        .unwrap();
    cluster
}

async fn admin(cluster: &ReplicatedCluster, node: Node) -> PgConnection {
    let url = cluster.admin_url(node, cluster.database());
    PgConnection::connect(&url).await.unwrap()
}

/// Stops replay on the replica, then adds `article` on the primary: only the primary has it.
async fn add_article_only_the_primary_has(cluster: &ReplicatedCluster, article: &str) {
    cluster.wait_for_replay().await;
    let mut replica = admin(cluster, Node::Replica).await;
    sqlx::query("SELECT pg_wal_replay_pause()")
        .execute(&mut replica)
        .await
        .unwrap();
    let mut primary = admin(cluster, Node::Primary).await;
    sqlx::query(
        "INSERT INTO news.articles (id, title, summary, body, url, published_at, organization_id, journalist_id) \
         VALUES ($1, 'Fresh', 'Fresh', 'Fresh', 'https://alpha.example/fresh', now(), 'org-a', 'jrn-1')",
    )
    .bind(article)
    .execute(&mut primary)
    .await
    .unwrap();
}

async fn resume_replay(cluster: &ReplicatedCluster) {
    let mut replica = admin(cluster, Node::Replica).await;
    sqlx::query("SELECT pg_wal_replay_resume()")
        .execute(&mut replica)
        .await
        .unwrap();
}

async fn assert_unavailable(response: Response, what: &str) {
    assert_eq!(response.status(), 503, "{what}");
    assert!(response.headers().contains_key("retry-after"), "{what}");
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("application/problem+json"),
        "{what}"
    );
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["code"], "database_unavailable", "{what}: {body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_reads_survive_either_database_node_going_down() {
    let cluster = cluster_with_catalogue().await;
    let service = start_service(&cluster, 0).await;
    // The same, but no more than half a second behind the primary.
    let strict = start_service(&cluster, 500).await;

    // Both up: anonymous reads come from the replica, personal reads from the primary.
    let warm_up_fallbacks = service.reading_from_the_replica().await;
    strict.reading_from_the_replica().await;
    add_article_only_the_primary_has(&cluster, "art-fresh-1").await;
    assert_eq!(service.anonymous_article("art-fresh-1").await, 404);
    assert_eq!(service.anonymous_article("art-1").await, 200);
    let personal = service
        .get("/v1/news/articles/art-fresh-1", Some("reader"))
        .await;
    assert_eq!(personal.status(), 200, "a signed-in read uses the primary");
    let (status, body) = service
        .readiness_once(json!({"primary": "up", "read": "up"}))
        .await;
    assert_eq!((status, &body["status"]), (200, &json!("ready")), "{body}");
    assert_eq!(service.fallbacks().await, warm_up_fallbacks);

    // A replica whose replay is stalled lags: the strict service reads from the primary instead.
    let stalled = Instant::now();
    while strict.anonymous_article("art-fresh-1").await != 200 {
        assert!(stalled.elapsed() < NOTICE_WITHIN, "the lag was not noticed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(service.anonymous_article("art-fresh-1").await, 404);

    // Replica stopped: anonymous reads come from the primary, without an error.
    cluster.stop(Node::Replica).await;
    for _ in 0..5 {
        assert_eq!(service.anonymous_article("art-fresh-1").await, 200);
        let list = service.get("/v1/news/articles", None).await;
        assert_eq!(list.status(), 200);
    }
    assert!(service.like("art-1", "reader").await.status().is_success());
    let (status, body) = service
        .readiness_once(json!({"primary": "up", "read": "down"}))
        .await;
    assert_eq!(status, 200, "one node is enough to be ready: {body}");
    assert_eq!(body["pools"], json!({"primary": "up", "read": "down"}));
    assert!(
        service.fallbacks().await >= 10.0,
        "every diverted read counts"
    );

    // Replica back: anonymous reads return to it within the cool-down.
    cluster.start(Node::Replica).await;
    add_article_only_the_primary_has(&cluster, "art-fresh-2").await;
    let back = Instant::now();
    while service.anonymous_article("art-fresh-2").await != 404 {
        assert!(
            back.elapsed() < NOTICE_WITHIN,
            "anonymous reads did not return to the replica"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    resume_replay(&cluster).await;
    cluster.wait_for_replay().await;

    // Primary stopped, replica up: anonymous reads still served, the rest is 503.
    cluster.stop(Node::Primary).await;
    for _ in 0..5 {
        assert_eq!(service.anonymous_article("art-fresh-2").await, 200);
        let comments = service.get("/v1/news/articles/art-1/comments", None).await;
        assert_eq!(comments.status(), 200);
    }
    assert_unavailable(service.like("art-1", "writer").await, "a write").await;
    let personal = service.get("/v1/news/articles", Some("reader")).await;
    assert_unavailable(personal, "a personal read").await;
    let (status, body) = service
        .readiness_once(json!({"primary": "down", "read": "up"}))
        .await;
    assert_eq!(
        status, 200,
        "the replica alone keeps the service ready: {body}"
    );
    assert_eq!(body["pools"], json!({"primary": "down", "read": "up"}));

    // Both down: nothing can be served, readiness is 503.
    cluster.stop(Node::Replica).await;
    let deadline = Instant::now() + NOTICE_WITHIN;
    while service.get("/readyz", None).await.status() != 503 {
        assert!(
            Instant::now() < deadline,
            "readiness stayed 200 with no node up"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_unavailable(service.get("/readyz", None).await, "readiness").await;
    assert_unavailable(service.get("/v1/news/articles", None).await, "a read").await;

    // Primary back: writes work again without a restart of the service.
    cluster.start(Node::Primary).await;
    let deadline = Instant::now() + NOTICE_WITHIN;
    while !service.like("art-1", "writer").await.status().is_success() {
        assert!(Instant::now() < deadline, "writes did not recover");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A replica whose queries stall while it still answers the protocol (a disk that stopped
/// answering: a ping needs no page, a query does): anonymous reads on it are given up after
/// `NEWS_READ_TIMEOUT_MS` and answered by the primary, never a 503 `timeout` at the request's
/// deadline. Waiting for a connection does not catch this: pings and new connections still work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_reads_survive_a_replica_whose_queries_stall() {
    let cluster = cluster_with_catalogue().await;
    cluster.wait_for_replay().await;
    let proxy = StallingProxy::in_front_of(&cluster.url_for(Node::Replica, "news_app")).await;
    let mut config = ServeConfig::new(cluster.url_for(Node::Primary, "news_app"), auth_config());
    config.database_read_url = Some(proxy.url.clone());
    config.read_routing.read_timeout_ms = 500;
    config.request_timeout_ms = 5_000;
    let service = serve(config).await;

    assert_eq!(service.anonymous_article("art-1").await, 200);
    assert_eq!(service.fallbacks().await, 0.0, "the replica answered");

    proxy.stall_queries();
    for _ in 0..3 {
        assert_eq!(service.anonymous_article("art-1").await, 200);
        let list = service.get("/v1/news/articles", None).await;
        assert_eq!(list.status(), 200);
    }
    assert!(service.fallbacks().await >= 1.0, "the primary answered");
}

/// A proxy on a Unix socket in front of a server's socket. Once told to stall, it holds back
/// every query the client sends (PostgreSQL's `Parse` and `Query` messages) for good, closing
/// nothing; everything else (start-up, pings, answers) still passes.
struct StallingProxy {
    url: String,
    stalling: Arc<AtomicBool>,
    _dir: tempfile::TempDir,
}

impl StallingProxy {
    /// `server_url` is a `postgres://...?host=DIR&port=PORT` URL of a server on a Unix socket.
    async fn in_front_of(server_url: &str) -> Self {
        let (before, query) = server_url.split_once('?').unwrap();
        let params: HashMap<_, _> = query
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .collect();
        let socket_name = format!(".s.PGSQL.{}", params["port"]);
        let server_socket = Path::new(params["host"]).join(&socket_name);
        let dir = tempfile::tempdir().unwrap();
        let listener = UnixListener::bind(dir.path().join(&socket_name)).unwrap();
        let stalling = Arc::new(AtomicBool::new(false));
        let flag = stalling.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let flag = flag.clone();
                let server_socket = server_socket.clone();
                tokio::spawn(async move {
                    let Ok(server) = UnixStream::connect(&server_socket).await else {
                        return;
                    };
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    let is_query = |data: &[u8]| matches!(data.first(), Some(b'P' | b'Q'));
                    tokio::join!(
                        pass_on(
                            client_read,
                            server_write,
                            || flag.load(Ordering::SeqCst),
                            is_query
                        ),
                        pass_on(server_read, client_write, || false, |_| false),
                    );
                });
            }
        });
        let url = format!(
            "{before}?host={}&port={}",
            dir.path().display(),
            params["port"]
        );
        Self {
            url,
            stalling,
            _dir: dir,
        }
    }

    fn stall_queries(&self) {
        self.stalling.store(true, Ordering::SeqCst);
    }
}

/// Copies `from` to `to` until either closes; a piece for which `stalls` holds while `stalling()`
/// is never passed on, and the copy waits for good.
async fn pass_on(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    stalling: impl Fn() -> bool,
    stalls: impl Fn(&[u8]) -> bool,
) {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        if stalling() && stalls(&buffer[..read]) {
            std::future::pending::<()>().await;
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}
