//! Routes learned from the services' own OpenAPI documents, and a group whose replicas all went
//! down and came back (panic routing, fast re-probing). Real HTTP: stand-in replicas on port 0
//! publishing documents the gateway binary has never seen.

use std::future::Future;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use shared_auth::testing::{token, token_with_scope};

use crate::helpers::{Document, TestGateway, Upstream, committed_document, config, problem};

/// The committed news document with one more endpoint, `GET /v1/news/articles/{id}/related`
/// (needs a token), and `POST /v1/news/reindex` (needs the scope `news:admin`).
fn news_with_related() -> String {
    let mut document = committed_document("news");
    let paths = document["paths"].as_object_mut().expect("paths");
    paths.insert(
        "/v1/news/articles/{article_id}/related".into(),
        json!({"get": {"operationId": "related", "security": [{"bearer": []}],
                       "parameters": [{"name": "article_id", "in": "path", "required": true}],
                       "responses": {"200": {"description": "related articles"}}}}),
    );
    paths.insert(
        "/v1/news/reindex".into(),
        json!({"post": {"security": [{"bearer": ["news:admin"]}],
                        "responses": {"202": {"description": "started"}}}}),
    );
    document.to_string()
}

const RELATED: &str = "/v1/news/articles/a-1/related";

/// Polls `check` every 50 ms until it holds, failing after `within`; returns the time it took.
pub(crate) async fn eventually<F, Fut>(within: Duration, what: &str, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let started = Instant::now();
    loop {
        if check().await {
            return started.elapsed();
        }
        assert!(started.elapsed() < within, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub(crate) async fn status_with_token(gateway: &TestGateway, path: &str) -> u16 {
    let response = gateway
        .client
        .get(gateway.url(path))
        .bearer_auth(token("ada"))
        .send()
        .await
        .expect("answered");
    response.status().as_u16()
}

/// Waits until `replica` has served its document `reads` more times than now: the gateway has
/// read whatever it publishes now at least once, completely, before the last of those.
async fn wait_for_document_reads(replica: &Upstream, reads: usize) {
    let seen = replica.documents_served();
    eventually(Duration::from_secs(10), "document reads", || async {
        replica.documents_served() >= seen + reads
    })
    .await;
    // The last read may still be judged.
    tokio::time::sleep(Duration::from_millis(100)).await;
}

async fn metric(gateway: &TestGateway, line: &str) -> u64 {
    let text = gateway.metrics().await;
    text.lines()
        .find_map(|l| l.strip_prefix(line)?.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn an_endpoint_the_gateway_never_saw_is_routed_once_documented_and_404_once_removed() {
    let lingo = Upstream::start("lingo-1").await;
    let news = Upstream::start("news-1").await;
    let mut config = config(&[&lingo], &[&news]);
    config.routes_refresh_secs = 1;
    let gateway = TestGateway::start(config).await;

    // Neither in the compiled-in document nor in the replica's: no route, token or not.
    assert_eq!(status_with_token(&gateway, RELATED).await, 404);
    assert_eq!(news.hits(), 0);

    news.set_document(Document::Text(news_with_related()));
    let took = eventually(Duration::from_secs(5), "the new endpoint", || async {
        status_with_token(&gateway, RELATED).await == 200
    })
    .await;
    println!("a newly documented endpoint was routed {took:?} after it was published");
    let hits = news.hits();

    // The document says bearer: refused at the edge without a token.
    let anonymous = gateway.get(RELATED).await;
    assert_eq!(anonymous.status(), 401);
    assert_eq!(problem(anonymous).await["code"], "missing_token");
    // A method the document lacks: 405 with the document's methods, before any token check.
    let post = gateway
        .client
        .post(gateway.url(RELATED))
        .send()
        .await
        .expect("answered");
    assert_eq!(post.status(), 405);
    assert_eq!(post.headers()["allow"], "GET,HEAD");
    let body = problem(post).await;
    assert_eq!(body["code"], "method_not_allowed");
    assert_eq!(body["detail"], "this resource allows only GET, HEAD");
    // A scope from the document is required at the edge.
    let reindex = |token: String| {
        gateway
            .client
            .post(gateway.url("/v1/news/reindex"))
            .bearer_auth(token)
            .send()
    };
    let unscoped = reindex(token("ada")).await.expect("answered");
    assert_eq!(unscoped.status(), 403);
    assert_eq!(problem(unscoped).await["code"], "insufficient_scope");
    let scoped = reindex(token_with_scope("ada", "news:admin"))
        .await
        .expect("answered");
    assert_eq!(
        scoped.status(),
        201,
        "the echo replica answers POST with 201"
    );
    assert_eq!(
        news.hits(),
        hits + 1,
        "only the scoped call reached the replica"
    );

    // The replica stops documenting it: no route again.
    news.set_document(Document::Committed);
    eventually(Duration::from_secs(5), "the endpoint removed", || async {
        status_with_token(&gateway, RELATED).await == 404
    })
    .await;
    assert_eq!(gateway.get("/v1/news/articles").await.status(), 200);
}

/// A trailing slash is part of an endpoint's spelling, as at the service: a document with
/// `/v1/news/tags/` is usable (it once made the whole document, new endpoints and all, be
/// ignored), that spelling is routed and `/v1/news/tags` stays 404.
#[tokio::test]
async fn an_endpoint_with_a_trailing_slash_is_routed_as_spelled() {
    let lingo = Upstream::start("lingo-1").await;
    let news = Upstream::start("news-1").await;
    let mut config = config(&[&lingo], &[&news]);
    config.routes_refresh_secs = 1;
    let gateway = TestGateway::start(config).await;

    let mut document: Value = serde_json::from_str(&news_with_related()).expect("json");
    document["paths"]["/v1/news/tags/"] = json!({"get": {"security": [{}]}});
    news.set_document(Document::Text(document.to_string()));
    eventually(Duration::from_secs(5), "the new endpoints", || async {
        status_with_token(&gateway, RELATED).await == 200
    })
    .await;
    let hits = news.hits();
    let tags = gateway.get("/v1/news/tags/").await;
    assert_eq!(tags.status(), 200);
    let echo: Value = tags.json().await.expect("echo");
    assert_eq!(echo["path"], "/v1/news/tags/");
    assert_eq!(news.hits(), hits + 1);
    for other in ["/v1/news/tags", "/v1/news/tags//"] {
        let response = gateway.get(other).await;
        assert_eq!(response.status(), 404, "{other}");
        assert_eq!(problem(response).await["code"], "not_found", "{other}");
    }
    assert_eq!(news.hits(), hits + 1, "404s are answered at the gateway");
}

/// Two replicas in the middle of a rolling update publish different documents: every endpoint
/// either documents is routed, with the strictest access either gives it.
#[tokio::test]
async fn replicas_that_disagree_give_every_endpoint_with_the_strictest_access() {
    let lingo = Upstream::start("lingo-1").await;
    let old = Upstream::start("news-old").await;
    let new = Upstream::start("news-new").await;
    let mut relaxed = committed_document("news");
    relaxed["paths"]["/v1/news/articles/{id}/related"] =
        json!({"get": {"security": [{}, {"bearer": []}]}});
    relaxed["paths"]["/v1/news/only-old"] = json!({"get": {"security": [{}]}});
    old.set_document(Document::Text(relaxed.to_string()));
    new.set_document(Document::Text(news_with_related()));
    let mut config = config(&[&lingo], &[&old, &new]);
    config.routes_refresh_secs = 1;
    let gateway = TestGateway::start(config).await;

    eventually(Duration::from_secs(5), "both documents", || async {
        status_with_token(&gateway, RELATED).await == 200
            && gateway.get("/v1/news/only-old").await.status() == 200
    })
    .await;
    // One replica says optional, the other a token: a token it is.
    let anonymous = gateway.get(RELATED).await;
    assert_eq!(anonymous.status(), 401);
    assert_eq!(problem(anonymous).await["code"], "missing_token");
    // Endpoints only one replica documents are in the table (`only-old` answered 200 above;
    // `reindex`, only in the new document, takes POST alone).
    assert_eq!(status_with_token(&gateway, "/v1/news/reindex").await, 405);
}

#[tokio::test]
async fn a_group_down_at_start_is_routed_by_the_compiled_document_and_learns_when_it_comes_up() {
    let lingo = Upstream::start("lingo-1").await;
    let reserved = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let news_addr = reserved.local_addr().expect("addr");
    drop(reserved);
    let mut config = config(&[&lingo], &[]);
    config.news_upstreams = format!("http://{news_addr}").parse().expect("url");
    // Only a replica coming back can make the gateway read the document in this test's time.
    config.routes_refresh_secs = 3600;
    let gateway = TestGateway::start(config).await;

    // The other group is served; the down group is routed by the compiled-in document.
    assert_eq!(gateway.get("/v1/lingo/languages").await.status(), 200);
    let down = gateway.get("/v1/news/articles").await;
    assert!(matches!(down.status().as_u16(), 502 | 503), "{down:?}");
    assert_eq!(problem(down).await["code"], "upstream_unavailable");
    assert_eq!(gateway.get("/v1/news/me/feed").await.status(), 401);
    assert_eq!(status_with_token(&gateway, RELATED).await, 404);
    // Let the probe mark it down.
    tokio::time::sleep(Duration::from_millis(700)).await;

    let listener = tokio::net::TcpListener::bind(news_addr)
        .await
        .expect("the port is free again");
    let news = Upstream::serve_document_on("news-1", listener, Document::Text(news_with_related()));
    let took = eventually(Duration::from_secs(5), "the live document", || async {
        status_with_token(&gateway, RELATED).await == 200
    })
    .await;
    println!("the live document was used {took:?} after the replica came up");
    assert!(news.documents_served() >= 1);
}

/// A replica whose document the gateway could not read for want of a connection is read again
/// as soon as it answers, although no readiness probe saw it down (it went away and came back
/// between two probes; or it came up between the gateway's first read and its first probe): the
/// failed read marks it down, and its quick probe finds it back. Regression: its document
/// waited for the next refresh, so a service restarted with a new endpoint between two probes
/// was routed by its old document for up to `ROUTES_REFRESH_SECS`.
#[tokio::test]
async fn a_replica_whose_document_found_no_connection_is_read_again_when_it_answers() {
    let lingo = Upstream::start("lingo-1").await;
    let steady = Upstream::start("news-1").await;
    let mut restarted = Upstream::start("news-2").await;
    let addr = restarted.addr;
    let mut config = config(&[&lingo], &[&steady, &restarted]);
    config.routes_refresh_secs = 6;
    // No full readiness probe in this test's time: nothing but the document read can find
    // that the replica went away.
    config.upstream_probe_interval_secs = 3600;
    let gateway = TestGateway::start(config).await;
    eventually(Duration::from_secs(5), "the first read", || async {
        restarted.documents_served() >= 1
    })
    .await;

    // Its first readiness probe is done: the next is an hour away.
    restarted.wait_for_probe_after(0).await;

    restarted.kill().await;
    // The next refresh reads the steady replica and finds no connection to the other.
    wait_for_document_reads(&steady, 1).await;
    assert_eq!(status_with_token(&gateway, RELATED).await, 404);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .expect("the port is free again");
    let _restarted =
        Upstream::serve_document_on("news-2", listener, Document::Text(news_with_related()));
    let took = eventually(
        Duration::from_secs(3),
        "the restarted replica's document",
        || async { status_with_token(&gateway, RELATED).await == 200 },
    )
    .await;
    println!("the restarted replica's document was used {took:?} after it came up");
}

#[tokio::test]
async fn a_wrong_document_never_replaces_a_good_table() {
    let lingo = Upstream::start("lingo-1").await;
    let news = Upstream::start("news-1").await;
    news.set_document(Document::Text(news_with_related()));
    let mut config = config(&[&lingo], &[&news]);
    config.routes_refresh_secs = 1;
    let gateway = TestGateway::start(config).await;
    eventually(Duration::from_secs(5), "the good document", || async {
        status_with_token(&gateway, RELATED).await == 200
    })
    .await;

    let lingo_document = committed_document("lingo").to_string();
    let wrong = [
        (Document::Text("this is not JSON".into()), "invalid"),
        (Document::Text(r#"{"paths": []}"#.into()), "invalid"),
        (Document::Text(lingo_document), "wrong_prefix"),
        (Document::Endless(10 * 1024 * 1024), "too_large"),
        // Declared too large by its `Content-Length`.
        (
            Document::Text(" ".repeat(5 * 1024 * 1024) + "{}"),
            "too_large",
        ),
    ];
    for (document, outcome) in wrong {
        let line = format!("gateway_route_documents_total{{group=\"news\",outcome=\"{outcome}\"}}");
        let before = metric(&gateway, &line).await;
        news.set_document(document);
        wait_for_document_reads(&news, 2).await;
        assert!(metric(&gateway, &line).await > before, "{outcome}");
        assert_eq!(
            status_with_token(&gateway, RELATED).await,
            200,
            "after a {outcome} document"
        );
        assert_eq!(gateway.get("/v1/news/articles").await.status(), 200);
    }
    let ok = "gateway_route_documents_total{group=\"news\",outcome=\"ok\"}";
    assert!(metric(&gateway, ok).await >= 1);
}

/// The only replica of a group is killed and started again on the same port: the gateway tries
/// it although it is marked down, so it is served as soon as it accepts connections.
#[tokio::test]
async fn the_only_replica_restarted_is_served_as_soon_as_it_is_ready() {
    let lingo = Upstream::start("lingo-1").await;
    let mut news = Upstream::start("news-1").await;
    let addr = news.addr;
    let gateway = TestGateway::start(config(&[&lingo], &[&news])).await;
    assert_eq!(gateway.get("/v1/news/articles").await.status(), 200);

    news.kill().await;
    let refused = gateway.get("/v1/news/articles").await;
    assert!(matches!(refused.status().as_u16(), 502 | 503));
    // Marked down now: still tried, still refused, 503 with a short Retry-After.
    let down = gateway.get("/v1/news/articles").await;
    assert_eq!(down.status(), 503);
    assert_eq!(down.headers()["retry-after"], "1");
    let body = problem(down).await;
    assert_eq!(body["code"], "upstream_unavailable");
    tokio::time::sleep(Duration::from_millis(600)).await;

    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .expect("the port is free again");
    let _news = Upstream::serve_on("news-1", listener);
    let took = eventually(Duration::from_secs(3), "served again", || async {
        gateway.get("/v1/news/articles").await.status() == 200
    })
    .await;
    println!("the only replica restarted was served {took:?} after it was ready");
}

/// With another replica up, a restarted one gets traffic again once the quick probe of down
/// replicas has seen it (`UPSTREAM_DOWN_PROBE_MS`), long before the full probe interval.
#[tokio::test]
async fn a_restarted_replica_beside_a_healthy_one_is_used_again_within_a_second() {
    let lingo = Upstream::start("lingo-1").await;
    let healthy = Upstream::start("news-healthy").await;
    let mut restarted = Upstream::start("news-restarted").await;
    let addr = restarted.addr;
    let mut config = config(&[&lingo], &[&healthy, &restarted]);
    config.upstream_probe_interval_secs = 60;
    let gateway = TestGateway::start(config).await;

    restarted.kill().await;
    // Round robin meets the dead replica: refused, retried on the healthy one, cooled down.
    for _ in 0..4 {
        assert_eq!(gateway.get("/v1/news/articles").await.status(), 200);
    }
    tokio::time::sleep(Duration::from_millis(600)).await;

    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .expect("the port is free again");
    let back = Upstream::serve_on("news-restarted", listener);
    let took = eventually(Duration::from_secs(3), "traffic again", || async {
        let response = gateway.get("/v1/news/articles").await;
        let echo: Value = response.json().await.expect("echo");
        echo["replica"] == "news-restarted"
    })
    .await;
    println!("a restarted replica beside a healthy one got traffic {took:?} after it was ready");
    assert!(back.hits() >= 1);
}

/// A replica that accepts connections and never answers (stuck) makes each of its probes last the
/// probe timeout (2 s). It delays no other replica's probe: a restarted news replica is still
/// seen by the quick probe within a second, though the lingo replica is stuck (the probes of all
/// replicas once waited for one another, every round).
#[tokio::test]
async fn a_stuck_replica_of_one_group_does_not_slow_the_probes_of_the_other() {
    let stuck = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let healthy = Upstream::start("news-healthy").await;
    let mut restarted = Upstream::start("news-restarted").await;
    let addr = restarted.addr;
    let mut config = config(&[], &[&healthy, &restarted]);
    config.lingo_upstreams = format!("http://{}", stuck.local_addr().expect("addr"))
        .parse()
        .expect("url");
    config.upstream_probe_interval_secs = 60;
    let gateway = TestGateway::start(config).await;

    restarted.kill().await;
    for _ in 0..4 {
        assert_eq!(gateway.get("/v1/news/articles").await.status(), 200);
    }
    // The stuck replica's first probe has timed out: it is down, probed with the down ones.
    tokio::time::sleep(Duration::from_millis(2500)).await;

    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .expect("the port is free again");
    let back = Upstream::serve_on("news-restarted", listener);
    let took = eventually(Duration::from_millis(1500), "traffic again", || async {
        let response = gateway.get("/v1/news/articles").await;
        let echo: Value = response.json().await.expect("echo");
        echo["replica"] == "news-restarted"
    })
    .await;
    println!(
        "with a stuck replica in the other group, a restarted one got traffic {took:?} after it was ready"
    );
    assert!(back.hits() >= 1);
    drop(stuck);
}
