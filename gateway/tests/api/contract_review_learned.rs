//! An outside review of the contract (docs/gateway.md), "Routes are learned": a stand-in news replica publishes
//! documents the gateway has never seen, with every form of `security` a service could write, path
//! templates with parameters mid-path beside fixed segments, and changes to an endpoint's methods
//! and access, which an unchanged, running gateway must follow within `ROUTES_REFRESH_SECS`.

use std::future::Future;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use shared_auth::testing::{token, token_with_scope};

use crate::helpers::{Document, TestGateway, Upstream, config, problem, raw_request};

/// Polls `check` every 50 ms until it holds, failing after `within`.
async fn eventually<F, Fut>(within: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        assert!(started.elapsed() < within, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn document(paths: Value) -> Document {
    Document::Text(
        json!({"openapi": "3.1.0", "info": {"title": "news", "version": "1"},
                          "paths": paths})
        .to_string(),
    )
}

async fn status(gateway: &TestGateway, method: &str, path: &str, bearer: Option<&str>) -> u16 {
    let mut request = gateway.client.request(
        reqwest::Method::from_bytes(method.as_bytes()).expect("method"),
        gateway.url(path),
    );
    if let Some(bearer) = bearer {
        request = request.bearer_auth(bearer);
    }
    request.send().await.expect("answered").status().as_u16()
}

struct Learned {
    _lingo: Upstream,
    news: Upstream,
    gateway: TestGateway,
}

/// A gateway (routes read every second) in front of a news replica publishing `paths`, once it
/// routes `probe` (a path only that document has) anonymously.
async fn learned(paths: Value, probe: &str) -> Learned {
    let lingo = Upstream::start("lingo-1").await;
    let news = Upstream::start("news-1").await;
    news.set_document(document(paths));
    let mut config = config(&[&lingo], &[&news]);
    config.routes_refresh_secs = 1;
    let gateway = TestGateway::start(config).await;
    eventually(
        Duration::from_secs(5),
        "the document is learned",
        || async { status(&gateway, "GET", probe, None).await != 404 },
    )
    .await;
    Learned {
        _lingo: lingo,
        news,
        gateway,
    }
}

/// Every `security` form of OpenAPI 3.1 a service could write, end to end: the empty
/// alternative, a bearer token, scopes all needed, alternatives with different scopes, a scheme
/// of another name, the document's default and an operation's `[]` that lifts it.
#[tokio::test]
async fn every_security_form_gives_its_access_end_to_end() {
    let paths = json!({
        "/v1/news/open": {"get": {"security": [{}, {"bearer": []}]}},
        "/v1/news/token": {"get": {"security": [{"bearer": []}]}},
        "/v1/news/both": {"get": {"security": [{"bearer": ["a", "b"]}]}},
        "/v1/news/either": {"get": {"security": [{"bearer": ["a"]}, {"bearer": ["b"]}]}},
        "/v1/news/key": {"get": {"security": [{"api_key": []}]}},
        "/v1/news/admin": {"get": {"security": [{"jwt": ["news:admin"]}]}},
        "/v1/news/none": {"get": {}},
        "/v1/news/lifted": {"get": {"security": []}},
    });
    let setup = learned(paths, "/v1/news/open").await;
    let gateway = &setup.gateway;
    let plain = token("ada");
    let a = token_with_scope("ada", "a");
    let ab = token_with_scope("ada", "b a");
    let admin_upper = token_with_scope("ada", "NEWS:ADMIN");
    let admin = token_with_scope("ada", "news:admin");
    let cases: [(&str, Option<&str>, u16); 17] = [
        ("/v1/news/open", None, 200),
        ("/v1/news/open", Some("not-a-token"), 401),
        ("/v1/news/token", None, 401),
        ("/v1/news/token", Some(&plain), 200),
        ("/v1/news/both", Some(&a), 403),
        ("/v1/news/both", Some(&ab), 200),
        ("/v1/news/either", None, 401),
        ("/v1/news/either", Some(&plain), 200),
        ("/v1/news/key", None, 401),
        ("/v1/news/key", Some(&plain), 200),
        ("/v1/news/admin", Some(&plain), 403),
        ("/v1/news/admin", Some(&admin_upper), 403),
        ("/v1/news/admin", Some(&admin), 200),
        ("/v1/news/none", None, 200),
        ("/v1/news/lifted", None, 200),
        ("/v1/news/lifted", Some(&plain), 200),
        ("/v1/news/open", Some(&plain), 200),
    ];
    for (path, bearer, expected) in cases {
        assert_eq!(
            status(gateway, "GET", path, bearer).await,
            expected,
            "{path} with {bearer:?}"
        );
    }
    // The 403 for two scopes names both (RFC 6750: a space-separated list).
    let response = gateway
        .client
        .get(gateway.url("/v1/news/both"))
        .bearer_auth(&a)
        .send()
        .await
        .expect("answered");
    assert_eq!(
        response.headers()["www-authenticate"],
        "Bearer realm=\"lingo-news\", error=\"insufficient_scope\", scope=\"a b\""
    );

    // The document's default `security`: an operation without its own needs a token; one with
    // `security: []` lifts it.
    setup.news.set_document(Document::Text(
        json!({"openapi": "3.0.3", "security": [{"bearer": []}], "paths": {
            "/v1/news/default": {"get": {}},
            "/v1/news/lifted": {"get": {"security": []}},
        }})
        .to_string(),
    ));
    eventually(Duration::from_secs(5), "the second document", || async {
        status(gateway, "GET", "/v1/news/default", None).await != 404
    })
    .await;
    assert_eq!(status(gateway, "GET", "/v1/news/default", None).await, 401);
    assert_eq!(
        status(gateway, "GET", "/v1/news/default", Some(&plain)).await,
        200
    );
    assert_eq!(status(gateway, "GET", "/v1/news/lifted", None).await, 200);
    assert_eq!(
        status(gateway, "GET", "/v1/news/open", None).await,
        404,
        "gone from the document"
    );
}

/// Path templates as a service's router matches them: a parameter mid-path beside a fixed
/// segment at the same place, a percent-encoded slash inside a parameter (one segment), a very
/// long parameter; and what is no endpoint: an empty parameter, a dot segment, a trailing slash.
#[tokio::test]
async fn parameters_mid_path_match_one_non_empty_segment() {
    let paths = json!({
        "/v1/news/shelves/{shelf_id}/books": {"get": {}},
        "/v1/news/shelves/featured/books": {"get": {"security": [{"bearer": []}]}},
        "/v1/news/shelves/{shelf_id}/books/{book_id}": {"delete": {"security": [{"bearer": []}]}},
    });
    let setup = learned(paths, "/v1/news/shelves/s-1/books").await;
    let gateway = &setup.gateway;
    let long_id = "x".repeat(4000);
    let long_path = format!("/v1/news/shelves/{long_id}/books");
    for path in [
        "/v1/news/shelves/s-1/books",
        "/v1/news/shelves/a%2Fb/books",
        "/v1/news/shelves/caf%C3%A9/books",
        long_path.as_str(),
    ] {
        let response = gateway.get(path).await;
        assert_eq!(response.status(), 200, "{path}");
        let echo: Value = response.json().await.expect("echo");
        assert_eq!(echo["path"], path, "forwarded as sent");
    }
    // An escaped dot segment is an id like any other (HTTP clients would resolve it: sent raw).
    let answer = raw_request(
        setup.gateway.addr,
        "GET /v1/news/shelves/%2E%2E/books HTTP/1.1\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.contains("\"path\":\"/v1/news/shelves/%2E%2E/books\""),
        "{answer}"
    );
    assert_eq!(
        status(gateway, "GET", "/v1/news/shelves/featured/books", None).await,
        401,
        "the fixed segment is its own endpoint"
    );
    for path in [
        "/v1/news/shelves//books",
        "/v1/news/shelves/s-1/books/",
        "/v1/news/shelves/s-1",
        "/v1/news/shelves/s-1/books/b-1/x",
    ] {
        let response = gateway.get(path).await;
        assert_eq!(response.status(), 404, "{path}");
        assert_eq!(problem(response).await["code"], "not_found");
    }
    for path in ["/v1/news/shelves/./books", "/v1/news/shelves/../books"] {
        let answer = raw_request(gateway.addr, &format!("GET {path} HTTP/1.1\r\n")).await;
        assert!(answer.starts_with("HTTP/1.1 404"), "{path}: {answer}");
    }
    // The two-parameter endpoint takes DELETE only.
    let response = gateway
        .client
        .get(gateway.url("/v1/news/shelves/s-1/books/b-1"))
        .send()
        .await
        .expect("answered");
    assert_eq!(response.status(), 405);
    assert_eq!(response.headers()["allow"], "DELETE");
    assert_eq!(
        status(
            gateway,
            "DELETE",
            "/v1/news/shelves/s-1/books/b-1",
            Some(&token("ada"))
        )
        .await,
        200
    );
}

/// A method added to an endpoint, its access tightened, then the endpoint removed: an unchanged,
/// running gateway follows each within `ROUTES_REFRESH_SECS` (here 1 s; allowed 3 s), and the
/// 405's `Allow` follows the document's methods.
#[tokio::test]
async fn methods_and_access_follow_the_document_within_the_refresh() {
    let setup = learned(json!({"/v1/news/x": {"get": {}}}), "/v1/news/x").await;
    let gateway = &setup.gateway;
    let bearer = token("ada");
    let response = gateway
        .client
        .post(gateway.url("/v1/news/x"))
        .bearer_auth(&bearer)
        .send()
        .await
        .expect("answered");
    assert_eq!(response.status(), 405);
    assert_eq!(response.headers()["allow"], "GET,HEAD");

    setup.news.set_document(document(json!({"/v1/news/x": {
        "get": {"security": [{"bearer": []}]},
        "post": {"security": [{"bearer": []}]},
    }})));
    eventually(Duration::from_secs(3), "POST added", || async {
        status(gateway, "POST", "/v1/news/x", Some(&bearer)).await == 201
    })
    .await;
    assert_eq!(
        status(gateway, "GET", "/v1/news/x", None).await,
        401,
        "the access was tightened in the same document"
    );
    let response = gateway
        .client
        .put(gateway.url("/v1/news/x"))
        .send()
        .await
        .expect("answered");
    assert_eq!(response.status(), 405);
    let allow = response.headers()["allow"]
        .to_str()
        .expect("ascii")
        .to_owned();
    let mut allow: Vec<&str> = allow.split(',').collect();
    allow.sort_unstable();
    assert_eq!(allow, ["GET", "HEAD", "POST"]);

    // A scope added to the endpoint's GET.
    setup.news.set_document(document(json!({"/v1/news/x": {
        "get": {"security": [{"bearer": ["news:admin"]}]},
        "post": {"security": [{"bearer": []}]},
    }})));
    eventually(Duration::from_secs(3), "the scope added", || async {
        status(gateway, "GET", "/v1/news/x", Some(&bearer)).await == 403
    })
    .await;
    let admin = token_with_scope("ada", "news:admin");
    assert_eq!(
        status(gateway, "GET", "/v1/news/x", Some(&admin)).await,
        200
    );

    setup
        .news
        .set_document(document(json!({"/v1/news/y": {"get": {}}})));
    eventually(Duration::from_secs(3), "x removed", || async {
        status(gateway, "GET", "/v1/news/x", Some(&bearer)).await == 404
    })
    .await;
    assert_eq!(status(gateway, "GET", "/v1/news/y", None).await, 200);
}

/// OpenAPI 3.1 (4.8.8): the Paths Object "MAY be extended with Specification Extensions"
/// (`x-...` members), as path items and operations may. A valid document with one is still the
/// group's document: its endpoints are learned, and the extension is no path.
#[tokio::test]
async fn a_document_with_specification_extensions_is_learned() {
    let lingo = Upstream::start("lingo-1").await;
    let news = Upstream::start("news-1").await;
    let mut config = config(&[&lingo], &[&news]);
    config.routes_refresh_secs = 1;
    news.set_document(Document::Text(
        json!({"openapi": "3.1.0", "x-owner": "news-team",
        "paths": {
            "x-generated-by": {"tool": "utoipa"},
            "/v1/news/extended": {
                "x-rate-class": "cheap",
                "get": {"x-internal": true},
            },
        }})
        .to_string(),
    ));
    let gateway = TestGateway::start(config).await;
    eventually(Duration::from_secs(5), "the extended document", || async {
        status(&gateway, "GET", "/v1/news/extended", None).await == 200
    })
    .await;
    assert_eq!(
        status(&gateway, "GET", "/v1/news/x-generated-by", None).await,
        404
    );
}

/// Two replicas of a rolling update: one documents `GET`, the other `POST` at the same path
/// with another parameter name. Both methods are routed (the union), with the strictest access
/// of either where both document one method.
#[tokio::test]
async fn replicas_that_disagree_on_methods_give_the_union() {
    let lingo = Upstream::start("lingo-1").await;
    let old = Upstream::start("news-old").await;
    let new = Upstream::start("news-new").await;
    old.set_document(document(json!({
        "/v1/news/items/{id}": {"get": {}},
    })));
    new.set_document(document(json!({
        "/v1/news/items/{item_id}": {
            "get": {"security": [{"bearer": []}]},
            "post": {"security": [{}]},
        },
    })));
    let mut config = config(&[&lingo], &[&old, &new]);
    config.routes_refresh_secs = 1;
    let gateway = TestGateway::start(config).await;
    eventually(Duration::from_secs(5), "both documents", || async {
        status(&gateway, "POST", "/v1/news/items/i-1", None).await == 201
    })
    .await;
    assert_eq!(
        status(&gateway, "GET", "/v1/news/items/i-1", None).await,
        401,
        "the strictest access of the two"
    );
    assert_eq!(
        status(&gateway, "GET", "/v1/news/items/i-1", Some(&token("ada"))).await,
        200
    );
}

/// The route table is read before the cache: a public answer stored while an endpoint was
/// Optional is not served to anonymous readers once the service's document makes it Required
/// (401), nor once the endpoint is gone (404).
#[tokio::test]
async fn a_stored_answer_is_not_served_past_a_change_of_access_or_a_removal() {
    use axum::response::IntoResponse;
    let lingo = Upstream::start("lingo-1").await;
    let doc = std::sync::Arc::new(std::sync::Mutex::new(
        json!({"openapi": "3.1.0", "paths": {"/v1/news/page": {"get": {}}}}).to_string(),
    ));
    let served = doc.clone();
    let app = axum::Router::new()
        .route("/readyz", axum::routing::get(|| async { "ok" }))
        .route(
            "/v1/news/openapi.json",
            axum::routing::get(move || {
                let text = served.lock().expect("doc").clone();
                async move { ([("content-type", "application/json")], text).into_response() }
            }),
        )
        .fallback(|| async {
            (
                [("cache-control", "public, max-age=60")],
                axum::Json(json!({"public": true})),
            )
        });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    let mut config = config(&[&lingo], &[]);
    config.news_upstreams = url.parse().expect("url");
    config.routes_refresh_secs = 1;
    let gateway = TestGateway::start(config).await;
    eventually(Duration::from_secs(5), "learned", || async {
        status(&gateway, "GET", "/v1/news/page", None).await == 200
    })
    .await;
    let stored = gateway.get("/v1/news/page").await;
    assert!(
        stored.headers().contains_key("age"),
        "served from the cache"
    );

    *doc.lock().expect("doc") = json!({"openapi": "3.1.0", "paths": {
        "/v1/news/page": {"get": {"security": [{"bearer": []}]}},
    }})
    .to_string();
    eventually(Duration::from_secs(3), "now Required", || async {
        status(&gateway, "GET", "/v1/news/page", None).await == 401
    })
    .await;
    *doc.lock().expect("doc") =
        json!({"openapi": "3.1.0", "paths": {"/v1/news/other": {"get": {}}}}).to_string();
    eventually(Duration::from_secs(3), "removed", || async {
        status(&gateway, "GET", "/v1/news/page", None).await == 404
    })
    .await;
}

/// A new version deployed on the only replica (stopped, started again with another document):
/// the gateway reads the document "when a replica comes back", not only at its next refresh
/// (here an hour away): the new endpoint is routed and the dropped one is 404 within 2 s.
#[tokio::test]
async fn a_replica_back_with_a_new_version_is_routed_by_its_new_document() {
    let lingo = Upstream::start("lingo-1").await;
    let mut news = Upstream::start("news-1").await;
    news.set_document(document(json!({"/v1/news/v1-only": {"get": {}}})));
    let addr = news.addr;
    let mut config = config(&[&lingo], &[&news]);
    config.routes_refresh_secs = 3600;
    let gateway = TestGateway::start(config).await;
    eventually(Duration::from_secs(5), "version 1 learned", || async {
        status(&gateway, "GET", "/v1/news/v1-only", None).await == 200
    })
    .await;

    news.kill().await;
    let down = status(&gateway, "GET", "/v1/news/v1-only", None).await;
    assert!(matches!(down, 502 | 503), "{down}");
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .expect("the port is free again");
    let _news = Upstream::serve_document_on(
        "news-1",
        listener,
        document(json!({"/v1/news/v2-only": {"get": {}}})),
    );
    eventually(Duration::from_secs(2), "version 2 learned", || async {
        status(&gateway, "GET", "/v1/news/v2-only", None).await == 200
    })
    .await;
    assert_eq!(status(&gateway, "GET", "/v1/news/v1-only", None).await, 404);
}
