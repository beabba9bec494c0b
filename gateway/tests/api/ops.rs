//! The gateway's own endpoints (`/healthz`, `/readyz`, `/metrics`) and CORS.

use serde_json::Value;
use shared_auth::testing::token;

use crate::helpers::{Stack, TestGateway, Upstream, config, problem};

#[tokio::test]
async fn readyz_reflects_the_gateway_only_and_upstream_health_is_in_metrics() {
    let stack = Stack::start().await;
    let health = stack.gateway.get("/healthz").await;
    assert_eq!(health.status(), 200);

    let ready = stack.gateway.get("/readyz").await;
    assert_eq!(ready.status(), 200);
    let body: Value = ready.json().await.expect("json");
    assert_eq!(body["status"], "ready");

    // A failing upstream shows in /metrics and the next readiness answers, never as a 503.
    let probes = stack.news.probes();
    stack.news.set_ready(false);
    stack.news.wait_for_probe_after(probes).await;
    let probes_before = stack.news.probes() + stack.lingo.probes();
    for _ in 0..20 {
        let ready = stack.gateway.get("/readyz").await;
        assert_eq!(ready.status(), 200);
        let body: Value = ready.json().await.expect("json");
        assert_eq!(body["upstreams"]["news"]["ready_replicas"], 0, "{body}");
        assert_eq!(body["upstreams"]["lingo"]["ready_replicas"], 1, "{body}");
    }
    assert!(
        stack.news.probes() + stack.lingo.probes() <= probes_before + 2,
        "/readyz calls no upstream (only the background probe may have run)"
    );
    let metrics = stack.gateway.metrics().await;
    assert!(
        metrics.contains("gateway_upstream_ready_replicas{group=\"news\"} 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains("gateway_upstream_ready_replicas{group=\"lingo\"} 1"),
        "{metrics}"
    );
    assert_eq!(stack.gateway.get("/healthz").await.status(), 200);
    assert_eq!(stack.hits(), 0, "probes are not proxied requests");
}

#[tokio::test]
async fn readyz_is_200_without_any_replica_of_a_group() {
    let lingo = Upstream::start("lingo-1").await;
    let gateway = TestGateway::start(config(&[&lingo], &[])).await;
    let response = gateway.get("/readyz").await;
    assert_eq!(response.status(), 200);
    let ops_method = gateway
        .client
        .post(gateway.url("/healthz"))
        .send()
        .await
        .expect("request");
    assert_eq!(ops_method.status(), 405);
    assert_eq!(ops_method.headers()["allow"], "GET,HEAD");
    let body = problem(ops_method).await;
    assert_eq!(body["code"], "method_not_allowed");
    assert_eq!(body["detail"], "this resource allows only GET, HEAD");
}

#[tokio::test]
async fn metrics_count_requests_latency_upstream_errors_in_flight_and_token_cache() {
    let stack = Stack::start().await;
    let gateway = &stack.gateway;
    let ada = token("ada");
    for _ in 0..3 {
        let response = gateway
            .client
            .get(gateway.url("/v1/news/me/feed"))
            .bearer_auth(&ada)
            .send()
            .await
            .expect("request");
        assert_eq!(response.status(), 200);
    }
    assert_eq!(gateway.get("/v1/lingo/me/xp").await.status(), 401);
    assert_eq!(gateway.get("/nope").await.status(), 404);

    let response = gateway.get("/metrics").await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.expect("text");
    for expected in [
        r#"gateway_http_requests_total{group="news",method="GET",status="200"} 3"#,
        r#"gateway_http_requests_total{group="lingo",method="GET",status="401"} 1"#,
        r#"gateway_http_requests_total{group="gateway",method="GET",status="404"} 1"#,
        r#"gateway_http_request_duration_seconds_count{group="news"} 3"#,
        r#"gateway_token_cache_total{result="miss"} 1"#,
        r#"gateway_token_cache_total{result="hit"} 2"#,
        "gateway_in_flight_requests 1",
        // The HS256 secret is the one key.
        "gateway_token_keys_loaded 1",
        "# TYPE gateway_upstream_errors counter",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
}

#[tokio::test]
async fn cors_preflight_is_answered_at_the_gateway_for_configured_origins() {
    let stack = Stack::start_with(|config| {
        config.cors_allowed_origins = "https://app.example".parse().expect("origins");
    })
    .await;
    let gateway = &stack.gateway;
    let preflight = gateway
        .client
        .request(reqwest::Method::OPTIONS, gateway.url("/v1/news/me/feed"))
        .header("origin", "https://app.example")
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization, content-type",
        )
        .send()
        .await
        .expect("request");
    assert!(preflight.status().is_success(), "{}", preflight.status());
    assert_eq!(
        preflight.headers()["access-control-allow-origin"],
        "https://app.example"
    );
    let allowed_headers = preflight.headers()["access-control-allow-headers"]
        .to_str()
        .expect("ascii")
        .to_ascii_lowercase();
    assert!(
        allowed_headers.contains("authorization"),
        "{allowed_headers}"
    );
    assert_eq!(stack.hits(), 0, "the preflight never reaches an upstream");

    let stranger = gateway
        .client
        .request(reqwest::Method::OPTIONS, gateway.url("/v1/news/articles"))
        .header("origin", "https://evil.example")
        .header("access-control-request-method", "GET")
        .send()
        .await
        .expect("request");
    assert!(
        stranger
            .headers()
            .get("access-control-allow-origin")
            .is_none()
    );
    // Not accepted as a preflight, it is judged like any OPTIONS request: 405.
    assert_eq!(stranger.status(), 405);

    // Only a preflight the CORS layer accepts is answered by it; any other OPTIONS request
    // gets what it gets with CORS off, and none reaches an upstream.
    for (path, origin, method, status) in [
        ("/v1/news/articles", Some("https://app.example"), None, 405),
        ("/v1/news/articles", None, Some("GET"), 405),
        (
            "/v1/news/no/such/thing",
            Some("https://app.example"),
            Some("GET"),
            404,
        ),
        ("/metrics", None, None, 405),
        ("/nope", None, None, 404),
        // A preflight to a path that is no endpoint, outside `/v1` too, is a 404 like any
        // request there (regression: outside `/v1` the CORS layer answered it 200).
        ("/nope", Some("https://app.example"), Some("GET"), 404),
        ("/healthz/", Some("https://app.example"), Some("GET"), 404),
        (
            "/docs/nope.js",
            Some("https://app.example"),
            Some("GET"),
            404,
        ),
    ] {
        let mut request = gateway
            .client
            .request(reqwest::Method::OPTIONS, gateway.url(path));
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        if let Some(method) = method {
            request = request.header("access-control-request-method", method);
        }
        let response = request.send().await.expect("request");
        assert_eq!(response.status(), status, "{path} {origin:?} {method:?}");
    }
    assert_eq!(stack.hits(), 0, "no OPTIONS request reached an upstream");

    // The gateway's own endpoints are endpoints too: a browser may preflight them.
    for path in [
        "/healthz",
        "/readyz",
        "/metrics",
        "/openapi.json",
        "/docs",
        "/docs/swagger-ui-bundle.js",
        "/docs/swagger-ui.css",
    ] {
        let preflight = gateway
            .client
            .request(reqwest::Method::OPTIONS, gateway.url(path))
            .header("origin", "https://app.example")
            .header("access-control-request-method", "GET")
            .send()
            .await
            .expect("request");
        assert!(
            preflight.status().is_success(),
            "{path} {}",
            preflight.status()
        );
        assert_eq!(
            preflight.headers()["access-control-allow-origin"],
            "https://app.example",
            "{path}"
        );
    }

    let simple = gateway
        .client
        .get(gateway.url("/v1/news/articles"))
        .header("origin", "https://app.example")
        .send()
        .await
        .expect("request");
    assert_eq!(simple.status(), 200);
    assert_eq!(
        simple.headers()["access-control-allow-origin"],
        "https://app.example"
    );
    let exposed = simple.headers()["access-control-expose-headers"]
        .to_str()
        .expect("ascii")
        .to_ascii_lowercase();
    assert!(exposed.contains("x-request-id"), "{exposed}");
}

#[tokio::test]
async fn without_configured_origins_cors_is_off() {
    let stack = Stack::start().await;
    let response = stack
        .gateway
        .client
        .get(stack.gateway.url("/v1/news/articles"))
        .header("origin", "https://app.example")
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 200);
    assert!(
        response
            .headers()
            .get("access-control-allow-origin")
            .is_none()
    );
}
