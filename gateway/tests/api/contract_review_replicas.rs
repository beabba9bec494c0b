//! An outside review of the contract (docs/gateway.md) on replicas: panic routing when the last replica that
//! looked up refuses, and route documents a replica fails to give (an error status, a stall past
//! the 5 s read limit), which must change nothing while requests go on being served.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use serde_json::{Value, json};

use crate::helpers::{TestGateway, Upstream, config, problem};

/// the contract (docs/gateway.md): "When every replica of a group is marked down, the gateway still tries them", and
/// "Only requests that never reached an upstream are retried on another replica (any method)".
/// Replica B is marked down (its `/readyz` fails) but serves; replica A looked up and has just
/// died. A request that finds A refusing never reached an upstream, and now every replica is
/// marked down: it is tried on B, not answered 502 as if every replica had refused.
#[tokio::test]
async fn a_request_refused_by_the_last_available_replica_tries_the_ones_marked_down() {
    let lingo = Upstream::start("lingo-1").await;
    let mut a = Upstream::start("news-a").await;
    let b = Upstream::start("news-b").await;
    b.set_ready(false);
    let mut config = config(&[&lingo], &[&a, &b]);
    // A is not probed again during the test: only the request meets its refusal.
    config.upstream_probe_interval_secs = 3600;
    let gateway = TestGateway::start(config).await;
    b.wait_for_probe_after(0).await;
    a.wait_for_probe_after(0).await;
    let metrics = gateway.metrics().await;
    assert!(
        metrics.contains("gateway_upstream_ready_replicas{group=\"news\"} 1"),
        "{metrics}"
    );
    a.kill().await;

    let response = gateway.get("/v1/news/articles").await;
    let status = response.status();
    let body = response.text().await.expect("body");
    assert_eq!(status, 200, "{body}");
    let echo: Value = serde_json::from_str(&body).expect("echo");
    assert_eq!(echo["replica"], "news-b");
}

/// What a hand-made news replica answers at its document's path.
#[derive(Clone)]
enum Doc {
    Good(String),
    Status(u16),
    /// The good document, after this long.
    Slow(String, Duration),
}

/// A news replica whose route document the test controls; `/readyz` is 200 and every other
/// path answers `{"ok": true}`.
async fn doc_replica(doc: Arc<Mutex<Doc>>) -> String {
    let app = Router::new()
        .route("/readyz", get(|| async { StatusCode::OK }))
        .route(
            "/v1/news/openapi.json",
            get(move || {
                let doc = doc.lock().expect("doc").clone();
                async move {
                    let text = match doc {
                        Doc::Good(text) => text,
                        Doc::Status(status) => {
                            return StatusCode::from_u16(status)
                                .expect("status")
                                .into_response();
                        }
                        Doc::Slow(text, delay) => {
                            tokio::time::sleep(delay).await;
                            text
                        }
                    };
                    ([("content-type", "application/json")], text).into_response()
                }
            }),
        )
        .fallback(|| async { axum::Json(json!({"ok": true})) });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

fn news_document(path: &str) -> String {
    json!({"openapi": "3.1.0", "paths": {path: {"get": {}}}}).to_string()
}

async fn count(gateway: &TestGateway, outcome: &str) -> u64 {
    let line = format!("gateway_route_documents_total{{group=\"news\",outcome=\"{outcome}\"}} ");
    let text = gateway.metrics().await;
    text.lines()
        .find_map(|l| l.strip_prefix(line.as_str()))
        .map_or(0, |v| v.parse::<f64>().expect("number") as u64)
}

/// docs/gateway.md: "A replica that does not answer (it is down, or its document is not 200, or
/// not read whole within 5 s) changes nothing". A 500, a 404 and a document that takes 5.5 s leave
/// the learned routes as they were, and the requests in the meantime are served at once.
#[tokio::test]
async fn a_document_not_given_changes_nothing_and_holds_up_no_request() {
    let lingo = Upstream::start("lingo-1").await;
    let doc = Arc::new(Mutex::new(Doc::Good(news_document("/v1/news/learned"))));
    let news = doc_replica(doc.clone()).await;
    let mut config = config(&[&lingo], &[]);
    config.news_upstreams = news.parse().expect("url");
    config.routes_refresh_secs = 1;
    let gateway = TestGateway::start(config).await;
    let started = Instant::now();
    while gateway.get("/v1/news/learned").await.status() != 200 {
        assert!(started.elapsed() < Duration::from_secs(5), "not learned");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let gone = news_document("/v1/news/other");
    for (replaced, outcome) in [
        (Doc::Status(500), "unavailable"),
        (Doc::Status(404), "unavailable"),
        (Doc::Slow(gone, Duration::from_millis(5500)), "unavailable"),
    ] {
        let before = count(&gateway, outcome).await;
        *doc.lock().expect("doc") = replaced;
        let started = Instant::now();
        while count(&gateway, outcome).await == before {
            assert!(
                started.elapsed() < Duration::from_secs(8),
                "no {outcome} read"
            );
            let asked = Instant::now();
            let response = gateway.get("/v1/news/learned").await;
            assert_eq!(response.status(), 200, "the last good routes stay");
            assert!(
                asked.elapsed() < Duration::from_millis(500),
                "a request waited for the document: {:?}",
                asked.elapsed()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let response = gateway.get("/v1/news/other").await;
        assert_eq!(response.status(), 404);
        assert_eq!(problem(response).await["code"], "not_found");
    }
}

/// docs/gateway.md: every replica marked down and refusing again is 503 `upstream_unavailable`
/// "with `Retry-After` (the quick probe interval rounded up to whole seconds, at least 1)".
#[tokio::test]
async fn the_503_of_a_group_down_says_when_to_retry() {
    let lingo = Upstream::start("lingo-1").await;
    let mut news = Upstream::start("news-1").await;
    let mut config = config(&[&lingo], &[&news]);
    config.upstream_down_probe_ms = 2500;
    let gateway = TestGateway::start(config).await;
    news.kill().await;
    // The first request finds the replica refusing (502), then it is marked down.
    let first = gateway.get("/v1/news/articles").await;
    assert!(matches!(first.status().as_u16(), 502 | 503));
    let response = gateway.get("/v1/news/articles").await;
    assert_eq!(response.status(), 503);
    assert_eq!(response.headers()["retry-after"], "3");
    assert_eq!(problem(response).await["code"], "upstream_unavailable");
    assert_eq!(
        gateway.get("/v1/lingo/languages").await.status(),
        200,
        "the other group is served"
    );
}
