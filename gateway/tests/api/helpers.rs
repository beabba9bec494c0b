//! Small axum upstreams on port 0 and a gateway started in-process in front of them.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::StreamExt;
use gateway::Application;
use gateway::config::GatewayConfig;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Size of the large streamed response of `/.../big`.
pub const BIG_BODY_BYTES: usize = 50 * 1024 * 1024;
const CHUNK: usize = 64 * 1024;

#[derive(Clone)]
struct UpstreamState {
    name: String,
    hits: Arc<AtomicUsize>,
    probes: Arc<AtomicUsize>,
    ready: Arc<AtomicBool>,
    document: Arc<Mutex<Document>>,
    documents_served: Arc<AtomicUsize>,
}

/// What a stand-in replica answers at `/v1/<group>/openapi.json`.
#[derive(Clone)]
pub enum Document {
    /// The group's part of the committed `openapi.json`, as the real service publishes it.
    Committed,
    /// This text, as `application/json`.
    Text(String),
    /// This many bytes of JSON whitespace, streamed without a `Content-Length`.
    Endless(usize),
}

/// A stand-in for a service replica. Every request except `/readyz` and its OpenAPI document
/// (`/v1/<group>/openapi.json`, read by the gateway to learn its routes) is counted and answered
/// with a JSON echo `{replica, method, path, headers, body_len}`; `?sleep_ms=N` delays the answer
/// and a path ending in `/big` streams [`BIG_BODY_BYTES`] of zeros.
pub struct Upstream {
    pub url: String,
    pub addr: SocketAddr,
    hits: Arc<AtomicUsize>,
    probes: Arc<AtomicUsize>,
    ready: Arc<AtomicBool>,
    document: Arc<Mutex<Document>>,
    documents_served: Arc<AtomicUsize>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Upstream {
    pub async fn start(name: &str) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind upstream");
        Self::serve_on(name, listener)
    }

    /// Serves on `listener` (used to bring a replica back on the same port).
    pub fn serve_on(name: &str, listener: tokio::net::TcpListener) -> Self {
        Self::serve_document_on(name, listener, Document::Committed)
    }

    /// Serves on `listener`, publishing `document` as its OpenAPI document.
    pub fn serve_document_on(
        name: &str,
        listener: tokio::net::TcpListener,
        document: Document,
    ) -> Self {
        let addr = listener.local_addr().expect("addr");
        let state = UpstreamState {
            name: name.to_owned(),
            hits: Arc::new(AtomicUsize::new(0)),
            probes: Arc::new(AtomicUsize::new(0)),
            ready: Arc::new(AtomicBool::new(true)),
            document: Arc::new(Mutex::new(document)),
            documents_served: Arc::new(AtomicUsize::new(0)),
        };
        let app = Router::new()
            .route("/readyz", get(readyz))
            .route("/v1/{group}/openapi.json", get(openapi_document))
            .fallback(echo)
            .with_state(state.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await
                .expect("upstream serve");
        });
        Self {
            url: format!("http://{addr}"),
            addr,
            hits: state.hits,
            probes: state.probes,
            ready: state.ready,
            document: state.document,
            documents_served: state.documents_served,
            stop: Some(stop),
            task: Some(task),
        }
    }

    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    /// How many `/readyz` probes this replica has answered.
    pub fn probes(&self) -> usize {
        self.probes.load(Ordering::SeqCst)
    }

    /// Waits until the replica has answered more than `seen` probes, plus a moment for the
    /// gateway to record the answer.
    pub async fn wait_for_probe_after(&self, seen: usize) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while self.probes() <= seen {
            assert!(std::time::Instant::now() < deadline, "no probe arrived");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }

    /// From now on the replica publishes `document`.
    pub fn set_document(&self, document: Document) {
        *self.document.lock().expect("document") = document;
    }

    /// How many times its OpenAPI document was asked for.
    pub fn documents_served(&self) -> usize {
        self.documents_served.load(Ordering::SeqCst)
    }

    /// Stops the replica: no more connections are accepted and open ones are closed.
    pub async fn kill(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(5), task)
                .await
                .expect("upstream stops within 5 s")
                .expect("upstream task");
        }
    }
}

async fn readyz(State(state): State<UpstreamState>) -> StatusCode {
    state.probes.fetch_add(1, Ordering::SeqCst);
    if state.ready.load(Ordering::SeqCst) {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    }
}

/// The group's paths of the committed `openapi.json` (both groups merged), as one service's own
/// document.
pub fn committed_document(group: &str) -> Value {
    let mut document: Value =
        serde_json::from_str(include_str!("../../../openapi.json")).expect("committed document");
    let prefix = format!("/v1/{group}/");
    document["paths"]
        .as_object_mut()
        .expect("paths")
        .retain(|path, _| path.starts_with(&prefix));
    document
}

async fn openapi_document(
    State(state): State<UpstreamState>,
    Path(group): Path<String>,
) -> Response {
    state.documents_served.fetch_add(1, Ordering::SeqCst);
    let document = state.document.lock().expect("document").clone();
    match document {
        Document::Committed => axum::Json(committed_document(&group)).into_response(),
        Document::Text(text) => ([("content-type", "application/json")], text).into_response(),
        Document::Endless(bytes) => {
            let chunks = futures_util::stream::iter(0..bytes.div_ceil(CHUNK))
                .map(|_| Ok::<_, std::io::Error>(bytes::Bytes::from(vec![b' '; CHUNK])));
            (
                [("content-type", "application/json")],
                Body::from_stream(chunks),
            )
                .into_response()
        }
    }
}

async fn echo(State(state): State<UpstreamState>, request: Request) -> Response {
    state.hits.fetch_add(1, Ordering::SeqCst);
    let (parts, body) = request.into_parts();
    let sleep_ms = parts
        .uri
        .query()
        .unwrap_or_default()
        .split('&')
        .find_map(|pair| pair.strip_prefix("sleep_ms="))
        .and_then(|ms| ms.parse::<u64>().ok());
    if let Some(ms) = sleep_ms {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    if parts.uri.path().ends_with("/big") {
        let chunks = futures_util::stream::iter(0..BIG_BODY_BYTES / CHUNK)
            .map(|_| Ok::<_, std::io::Error>(bytes::Bytes::from(vec![0u8; CHUNK])));
        return Response::builder()
            .header("content-type", "application/octet-stream")
            .body(Body::from_stream(chunks))
            .expect("big response");
    }
    // Count the body without keeping it.
    let mut body_len = 0usize;
    let mut body = body.into_data_stream();
    while let Some(chunk) = body.next().await {
        match chunk {
            Ok(chunk) => body_len += chunk.len(),
            Err(_) => return StatusCode::BAD_REQUEST.into_response(),
        }
    }
    let mut headers: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in &parts.headers {
        headers
            .entry(name.as_str().to_owned())
            .or_default()
            .push(String::from_utf8_lossy(value.as_bytes()).into_owned());
    }
    let status = if parts.method == axum::http::Method::POST {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let echo = json!({
        "replica": state.name,
        "method": parts.method.as_str(),
        "path": parts.uri.path_and_query().map(|p| p.as_str()).unwrap_or_default(),
        "headers": headers,
        "body_len": body_len,
    });
    (
        status,
        [
            ("x-upstream-only", "yes"),
            ("connection", "x-upstream-only"),
        ],
        axum::Json(echo),
    )
        .into_response()
}

/// A gateway running in this process.
pub struct TestGateway {
    pub addr: SocketAddr,
    pub client: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl TestGateway {
    pub async fn start(config: GatewayConfig) -> Self {
        let app = Application::build(config).await.expect("build gateway");
        let addr = SocketAddr::from(([127, 0, 0, 1], app.port()));
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(app.run_until(async {
            let _ = stopped.await;
        }));
        Self {
            addr,
            client: client(),
            stop: Some(stop),
            task: Some(task),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.client.get(self.url(path)).send().await.expect("GET")
    }

    /// The text of the gateway's `/metrics` now.
    pub async fn metrics(&self) -> String {
        self.get("/metrics").await.text().await.expect("metrics")
    }

    /// Triggers the graceful shutdown and returns the serve task.
    pub fn shutdown(&mut self) -> JoinHandle<std::io::Result<()>> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.task.take().expect("gateway still running")
    }
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client")
}

/// A gateway configuration in front of these upstreams, with rate limits off (tests that need
/// them turn them on).
pub fn config(lingo: &[&Upstream], news: &[&Upstream]) -> GatewayConfig {
    let urls = |list: &[&Upstream]| list.iter().map(|u| u.url.clone()).collect::<Vec<_>>();
    let mut config = GatewayConfig::for_tests(&urls(lingo), &urls(news));
    config.rate_limit_enabled = false;
    config
}

/// A gateway whose only news replica is `news` (no lingo replica), without rate limits.
pub async fn gateway_in_front_of(news: &str) -> TestGateway {
    gateway_in_front_of_with(news, |_| {}).await
}

/// [`gateway_in_front_of`], its configuration changed by `tweak` first.
pub async fn gateway_in_front_of_with(
    news: &str,
    tweak: impl FnOnce(&mut GatewayConfig),
) -> TestGateway {
    let mut config = GatewayConfig::for_tests(&[], &[news.to_owned()]);
    config.rate_limit_enabled = false;
    tweak(&mut config);
    TestGateway::start(config).await
}

/// Serves `app` on a free local port, for as long as the test runs; its URL.
pub async fn serve_origin(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

/// The requests a test's origin got per target (path and query as it saw them).
#[derive(Clone, Default)]
pub struct TargetCounts(Arc<Mutex<HashMap<String, usize>>>);

impl TargetCounts {
    /// Counts a request for `target`; its number among the target's requests (1 for the first).
    pub fn count(&self, target: &str) -> usize {
        let mut by_target = self.0.lock().unwrap();
        let n = by_target.entry(target.to_owned()).or_default();
        *n += 1;
        *n
    }

    /// How many requests `target` has had.
    pub fn of(&self, target: &str) -> usize {
        self.0.lock().unwrap().get(target).copied().unwrap_or(0)
    }
}

/// A request's query, each `name=value` pair as sent but for `%20`, read as a space (how the
/// tests write a space in a header value they ask an origin for).
pub fn query_map(request: &Request) -> HashMap<String, String> {
    request
        .uri()
        .query()
        .unwrap_or_default()
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(name, value)| (name.to_owned(), value.replace("%20", " ")))
        .collect()
}

/// One lingo and one news upstream with a gateway in front.
pub struct Stack {
    pub lingo: Upstream,
    pub news: Upstream,
    pub gateway: TestGateway,
}

impl Stack {
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    pub async fn start_with(tweak: impl FnOnce(&mut GatewayConfig)) -> Self {
        let lingo = Upstream::start("lingo-1").await;
        let news = Upstream::start("news-1").await;
        let mut config = config(&[&lingo], &[&news]);
        tweak(&mut config);
        let gateway = TestGateway::start(config).await;
        Self {
            lingo,
            news,
            gateway,
        }
    }

    pub fn hits(&self) -> usize {
        self.lingo.hits() + self.news.hits()
    }
}

/// The body of a problem answer, checking its content type.
pub async fn problem(response: reqwest::Response) -> Value {
    assert_eq!(
        response
            .headers()
            .get("content-type")
            .map(|v| v.to_str().expect("ascii")),
        Some("application/problem+json"),
        "status {}",
        response.status()
    );
    response.json().await.expect("problem JSON")
}

/// Sends one raw HTTP/1.1 request (`request_line` ends in CRLF) and returns the whole answer.
pub async fn raw_request(addr: SocketAddr, request_line: &str) -> String {
    raw_exchange(
        addr,
        &format!("{request_line}host: {addr}\r\nconnection: close\r\n\r\n"),
    )
    .await
}

/// Sends `message` as it is (head and body; it should ask to close the connection) and returns
/// everything the gateway answers until it closes.
pub async fn raw_exchange(addr: SocketAddr, message: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream.write_all(message.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.expect("read");
    String::from_utf8_lossy(&answer).into_owned()
}

/// Whether a raw request head asks for a group's OpenAPI document: the gateway reads it from
/// every replica to learn the group's routes, so a hand-written replica answers it aside.
pub fn is_document_request(head: &[u8]) -> bool {
    let line = head.split(|b| *b == b'\r').next().unwrap_or_default();
    line.starts_with(b"GET /v1/") && line.ends_with(b"/openapi.json HTTP/1.1")
}
