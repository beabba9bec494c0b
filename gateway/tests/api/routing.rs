//! The route table at the edge, and what the gateway sends upstream.

use reqwest::Method;
use serde_json::{Value, json};
use shared_auth::testing::token;

use crate::helpers::{Stack, problem, raw_exchange, raw_request};

/// Every Required endpoint of docs/lingo.md and docs/news.md.
const REQUIRED: &[(&str, &str)] = &[
    ("GET", "/v1/lingo/me/progress"),
    ("GET", "/v1/lingo/me/xp"),
    ("POST", "/v1/lingo/me/study-sessions"),
    ("GET", "/v1/lingo/me/study-sessions?limit=5"),
    ("GET", "/v1/lingo/me/study-sessions/0193a1b2"),
    ("GET", "/v1/lingo/me/recommendations"),
    ("GET", "/v1/lingo/analytics/progress?limit=10"),
    ("POST", "/v1/news/articles/a-1/like"),
    ("DELETE", "/v1/news/articles/a-1/like"),
    ("POST", "/v1/news/articles/a-1/bookmark"),
    ("DELETE", "/v1/news/articles/a-1/bookmark"),
    ("POST", "/v1/news/journalists/j-1/follow"),
    ("DELETE", "/v1/news/journalists/j-1/follow"),
    ("POST", "/v1/news/organizations/o-1/follow"),
    ("DELETE", "/v1/news/organizations/o-1/follow"),
    ("POST", "/v1/news/comments"),
    ("GET", "/v1/news/me/bookmarks"),
    ("GET", "/v1/news/me/following"),
    ("GET", "/v1/news/me/feed?limit=3"),
];

/// Every Optional endpoint: anonymous requests pass through.
const OPTIONAL: &[(&str, &str)] = &[
    ("GET", "/v1/lingo/languages"),
    ("GET", "/v1/lingo/phrases?language=de&limit=2"),
    ("GET", "/v1/lingo/phrases/p-1"),
    ("GET", "/v1/news/articles?limit=2"),
    ("GET", "/v1/news/articles/a-1"),
    ("GET", "/v1/news/articles/a-1/comments"),
    ("GET", "/v1/news/organizations"),
    ("GET", "/v1/news/journalists?organization_id=o-1"),
    ("GET", "/v1/news/comments/c-1"),
];

fn method(name: &str) -> Method {
    Method::from_bytes(name.as_bytes()).expect("method")
}

#[tokio::test]
async fn required_endpoints_without_a_token_never_reach_an_upstream() {
    let stack = Stack::start().await;
    for (verb, path) in REQUIRED {
        let response = stack
            .gateway
            .client
            .request(method(verb), stack.gateway.url(path))
            .header("content-type", "application/json")
            .body(if *verb == "POST" { "{}" } else { "" })
            .send()
            .await
            .expect("request");
        assert_eq!(response.status(), 401, "{verb} {path}");
        assert_eq!(
            problem(response).await["code"],
            "missing_token",
            "{verb} {path}"
        );
    }
    assert_eq!(stack.lingo.hits(), 0);
    assert_eq!(stack.news.hits(), 0);

    // With a token, the same requests go through (the analytics one needs its scope).
    let bearer = token("ada");
    for (verb, path) in REQUIRED.iter().filter(|(_, p)| !p.contains("analytics")) {
        let response = stack
            .gateway
            .client
            .request(method(verb), stack.gateway.url(path))
            .bearer_auth(&bearer)
            .send()
            .await
            .expect("request");
        assert!(
            response.status().is_success(),
            "{verb} {path}: {}",
            response.status()
        );
    }
}

#[tokio::test]
async fn optional_endpoints_pass_anonymous_requests_to_the_right_group() {
    let stack = Stack::start().await;
    for (verb, path) in OPTIONAL {
        let response = stack
            .gateway
            .client
            .request(method(verb), stack.gateway.url(path))
            .send()
            .await
            .expect("request");
        assert_eq!(response.status(), 200, "{verb} {path}");
        let echo: Value = response.json().await.expect("echo");
        assert_eq!(echo["path"], *path, "the path and query are sent unchanged");
        let expected = if path.starts_with("/v1/lingo") {
            "lingo-1"
        } else {
            "news-1"
        };
        assert_eq!(echo["replica"], expected, "{path}");
    }
    assert_eq!(stack.lingo.hits(), 3);
    assert_eq!(stack.news.hits(), 6);
}

#[tokio::test]
async fn unknown_paths_are_404_problems() {
    let stack = Stack::start().await;
    for path in [
        "/",
        "/v1",
        "/v1/other",
        "/v1/lingox/languages",
        "/v2/news/articles",
    ] {
        let response = stack.gateway.get(path).await;
        assert_eq!(response.status(), 404, "{path}");
        assert_eq!(problem(response).await["code"], "not_found", "{path}");
    }
    assert_eq!(stack.hits(), 0);
}

#[tokio::test]
async fn forwarding_headers_are_set_by_the_gateway_and_hop_by_hop_headers_dropped() {
    let stack = Stack::start().await;
    let traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let response = stack
        .gateway
        .client
        .get(stack.gateway.url("/v1/news/articles"))
        .header("x-forwarded-for", "6.6.6.6")
        .header("x-forwarded-proto", "https")
        .header("x-forwarded-host", "evil.example")
        .header("forwarded", "for=6.6.6.6;proto=https")
        .header("x-real-ip", "6.6.6.6")
        .header("x-request-id", "client-chosen-id-1")
        .header("traceparent", traceparent)
        .header("connection", "x-hop-secret")
        .header("x-hop-secret", "must not travel")
        .header("x-end-to-end", "kept")
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-request-id"], "client-chosen-id-1");
    assert!(
        response.headers().get("x-upstream-only").is_none(),
        "a header the upstream's Connection names is dropped on the way back"
    );
    let echo: Value = response.json().await.expect("echo");
    let headers = &echo["headers"];
    assert_eq!(headers["x-forwarded-for"], json!(["127.0.0.1"]));
    assert_eq!(headers["x-forwarded-proto"], json!(["http"]));
    assert_eq!(
        headers["x-forwarded-host"],
        json!([stack.gateway.addr.to_string()])
    );
    assert!(headers.get("forwarded").is_none(), "{headers}");
    assert!(headers.get("x-real-ip").is_none(), "{headers}");
    assert!(headers.get("x-hop-secret").is_none(), "{headers}");
    assert_eq!(headers["x-request-id"], json!(["client-chosen-id-1"]));
    assert_eq!(headers["traceparent"], json!([traceparent]));
    assert_eq!(headers["x-end-to-end"], json!(["kept"]));
    assert_eq!(headers["host"], json!([stack.news.addr.to_string()]));
}

/// Headers the gateway judged the request by travel on even when `Connection` names them: a
/// token it verified reaches the service, and so do the body's type and the idempotency key.
#[tokio::test]
async fn a_connection_header_cannot_strip_what_the_gateway_judged_the_request_by() {
    let stack = Stack::start().await;
    let response = stack
        .gateway
        .client
        .post(stack.gateway.url("/v1/news/comments"))
        .bearer_auth(token("ada"))
        .header("content-type", "application/json")
        .header("idempotency-key", "k-1")
        .header(
            "connection",
            "authorization, content-type, idempotency-key, x-hop",
        )
        .header("x-hop", "dropped")
        .body("{}")
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 201);
    let headers = response.json::<Value>().await.expect("echo")["headers"].clone();
    assert!(headers.get("authorization").is_some(), "{headers}");
    assert_eq!(headers["content-type"], json!(["application/json"]));
    assert_eq!(headers["idempotency-key"], json!(["k-1"]));
    assert!(headers.get("x-hop").is_none(), "{headers}");
}

/// A target in absolute form names the host (its `Host` is ignored) and must be an http URI with
/// a host and optional port; a transfer coding other than chunked is refused, never dropped; an
/// empty `Host` is not passed on as an empty `X-Forwarded-Host`.
#[tokio::test]
async fn request_heads_are_judged_before_anything_is_forwarded() {
    let stack = Stack::start().await;
    let echo_of = |response: String| -> Value {
        let body = response.split("\r\n\r\n").nth(1).expect("a body");
        serde_json::from_str(body).expect("echo")
    };
    let answer = raw_request(
        stack.gateway.addr,
        "GET http://api.example:8443/v1/news/articles HTTP/1.1\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(
        echo_of(answer)["headers"]["x-forwarded-host"],
        json!(["api.example:8443"])
    );

    let hits = stack.hits();
    for request_line in [
        "GET ftp://api.example/v1/news/articles HTTP/1.1\r\n",
        "GET http://user:pw@api.example/v1/news/articles HTTP/1.1\r\n",
        "GET http://api.example:99999/v1/news/articles HTTP/1.1\r\n",
    ] {
        let answer = raw_request(stack.gateway.addr, request_line).await;
        assert!(
            answer.starts_with("HTTP/1.1 400"),
            "{request_line:?}: {answer}"
        );
        assert!(answer.contains("bad_request"), "{answer}");
    }
    let send = |message| raw_exchange(stack.gateway.addr, message);
    // A body chunked twice (RFC 9112 6.1 forbids it) is refused like any other coding: the
    // gateway would take one layer of chunks off and pass the other on as the body (regression:
    // `chunked, chunked`, on one line or two, was forwarded so).
    for codings in [
        "transfer-encoding: gzip, chunked\r\n",
        "transfer-encoding: chunked, chunked\r\n",
        "transfer-encoding: chunked\r\ntransfer-encoding: chunked\r\n",
    ] {
        let message = format!(
            "POST /v1/news/comments HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
             {codings}connection: close\r\n\r\n2\r\n{{}}\r\n0\r\n\r\n"
        );
        let answer = raw_exchange(stack.gateway.addr, &message).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{codings:?}: {answer}");
        assert!(answer.contains("bad_request"), "{codings:?}: {answer}");
    }
    assert_eq!(stack.hits(), hits, "nothing refused was forwarded");

    let answer = send("GET /v1/news/articles HTTP/1.1\r\nhost:\r\nconnection: close\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(echo_of(answer)["headers"].get("x-forwarded-host").is_none());
}

#[tokio::test]
async fn a_generated_request_id_is_forwarded_and_returned() {
    let stack = Stack::start().await;
    let response = stack.gateway.get("/v1/lingo/languages").await;
    let id = response.headers()["x-request-id"]
        .to_str()
        .expect("ascii")
        .to_owned();
    let echo: Value = response.json().await.expect("echo");
    assert_eq!(echo["headers"]["x-request-id"], json!([id]));
}

#[tokio::test]
async fn request_bodies_reach_the_upstream_whole() {
    let stack = Stack::start().await;
    let body = vec![b'x'; 300 * 1024];
    let response = stack
        .gateway
        .client
        .post(stack.gateway.url("/v1/news/comments"))
        .bearer_auth(token("ada"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 201);
    let echo: Value = response.json().await.expect("echo");
    assert_eq!(echo["body_len"], 300 * 1024);
    assert_eq!(echo["headers"]["content-length"], json!(["307200"]));

    // A streamed body of unknown length streams on.
    let chunks = futures_util::stream::iter(
        (0..10).map(|_| Ok::<_, std::io::Error>(bytes::Bytes::from(vec![b'y'; 10_000]))),
    );
    let response = stack
        .gateway
        .client
        .post(stack.gateway.url("/v1/lingo/me/study-sessions"))
        .bearer_auth(token("ada"))
        .body(reqwest::Body::wrap_stream(chunks))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 201);
    let echo: Value = response.json().await.expect("echo");
    assert_eq!(echo["body_len"], 100_000);
}

/// A path is matched as sent, as the services match it: an odd spelling of an endpoint (dot
/// segments, an escape in a fixed segment, an empty segment, a trailing slash) names no endpoint
/// at the gateway either. 404 with or without a token, and nothing reaches a service.
#[tokio::test]
async fn odd_spellings_of_an_endpoint_are_404_and_never_forwarded() {
    // reqwest would resolve the dot segments itself, so these go over a raw socket.
    let stack = Stack::start().await;
    let bearer = format!("authorization: Bearer {}\r\n", token("ada"));
    for path in [
        "/v1/news/x/../me/feed",
        "/v1/news/x/%2e%2e/me/feed",
        "/v1/news/articles/../../lingo/me/xp",
        "/v1/news/./me/bookmarks",
        "/v1/lingo/me/./xp",
        "/v1/news//me/feed",
        "/v1/news/m%65/feed",
        "/v1/lingo/me/xp/",
        "/v1/news/../../healthz",
        "/%761/news/me/feed",
        "//v1/news/me/feed",
    ] {
        for authorization in ["", bearer.as_str()] {
            let request = format!("GET {path} HTTP/1.1\r\n{authorization}");
            let response = raw_request(stack.gateway.addr, &request).await;
            assert!(response.starts_with("HTTP/1.1 404"), "{path}: {response}");
            assert!(response.contains("not_found"), "{path}: {response}");
        }
    }
    assert_eq!(stack.hits(), 0);
}

/// An escape inside a parameter is forwarded as sent: the service decodes it.
#[tokio::test]
async fn an_escaped_parameter_is_forwarded_as_sent() {
    let stack = Stack::start().await;
    let response = stack
        .gateway
        .get("/v1/news/articles/a%2D1/comments?x=%20")
        .await;
    assert_eq!(response.status(), 200);
    let echoed: Value = response.json().await.expect("echo");
    assert_eq!(
        echoed["path"], "/v1/news/articles/a%2D1/comments?x=%20",
        "{echoed}"
    );
}

/// A body declared over the limit is judged last, as at the services: a path that is no endpoint
/// is still 404 and a method the endpoint does not take 405, not 413.
#[tokio::test]
async fn route_and_method_are_judged_before_a_body_over_the_limit() {
    let stack = Stack::start().await;
    let client = reqwest::Client::new();
    let body = vec![b' '; 1024 * 1024 + 1];
    for (method, path, status, code) in [
        (
            Method::PUT,
            "/v1/lingo/languages",
            405,
            "method_not_allowed",
        ),
        (Method::POST, "/v1/news/nothing/here", 404, "not_found"),
        (Method::POST, "/v1/news/comments", 413, "payload_too_large"),
    ] {
        let response = client
            .request(method.clone(), stack.gateway.url(path))
            .bearer_auth(token("ada"))
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await
            .expect("answered");
        assert_eq!(response.status(), status, "{method} {path}");
        assert_eq!(problem(response).await["code"], code, "{method} {path}");
    }
    assert_eq!(stack.hits(), 0, "nothing reached a service");
}

/// A client that sends its request and then closes its sending side (as HTTP/1.0 tools and
/// `nc -N` do) still gets the answer, through the gateway and from the service behind it.
#[tokio::test]
async fn a_request_followed_by_a_half_close_is_answered() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let stack = Stack::start().await;
    for _ in 0..5 {
        let mut stream = tokio::net::TcpStream::connect(stack.gateway.addr)
            .await
            .expect("connect");
        let request = "GET /v1/news/articles HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
        stream.write_all(request.as_bytes()).await.expect("write");
        stream.shutdown().await.expect("half-close");
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.expect("read");
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
    assert_eq!(stack.news.hits(), 5);
}

/// RFC 9112: an HTTP/1.1 request needs exactly one `Host`, not a list; HTTP/1.0 may go without.
#[tokio::test]
async fn an_http11_request_without_one_host_header_is_400() {
    let stack = Stack::start().await;
    let send = |head| raw_exchange(stack.gateway.addr, head);
    for head in [
        "GET /v1/news/articles HTTP/1.1\r\nconnection: close\r\n\r\n",
        "GET /v1/news/articles HTTP/1.1\r\nhost: a\r\nhost: b\r\nconnection: close\r\n\r\n",
        "GET /v1/news/articles HTTP/1.1\r\nhost: a, b\r\nconnection: close\r\n\r\n",
    ] {
        let answer = send(head).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{head:?}: {answer}");
        assert!(answer.contains("\"code\":\"bad_request\""), "{answer}");
    }
    let answer = send("GET /v1/news/articles HTTP/1.0\r\n\r\n").await;
    assert!(
        answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200"),
        "{answer}"
    );
    assert_eq!(stack.news.hits(), 1);
}
