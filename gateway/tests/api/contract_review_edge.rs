//! An outside review of the contract (docs/conventions.md, docs/gateway.md) at the gateway's edge: the problems it makes
//! itself (404 for every spelling that names no endpoint, 405 with `Allow` and a `detail` naming
//! the methods), the 1 MiB body limit at its exact edge with and without a length, the request
//! id it keeps or replaces, the trace headers it forwards, methods an operator knows from caches
//! (`PURGE`), and CORS headers on the gateway's own refusals.

use serde_json::{Value, json};
use shared_auth::testing::token;

use crate::helpers::{Stack, problem, raw_exchange};

const MIB: usize = 1024 * 1024;

/// Checks the parts every problem the gateway makes itself has, and returns its body.
async fn own_problem(response: reqwest::Response, status: u16, code: &str, case: &str) -> Value {
    assert_eq!(response.status(), status, "{case}");
    assert_eq!(
        response.headers()["cache-control"],
        "private, no-store",
        "{case}"
    );
    let request_id = response.headers()["x-request-id"]
        .to_str()
        .expect("ascii")
        .to_owned();
    let body = problem(response).await;
    assert_eq!(body["code"], code, "{case}: {body}");
    assert_eq!(body["status"], status, "{case}: {body}");
    assert!(body["title"].is_string(), "{case}: {body}");
    assert!(body["type"].is_string(), "{case}: {body}");
    assert_eq!(body["request_id"], request_id.as_str(), "{case}: {body}");
    body
}

/// the contract (docs/conventions.md): "404 (`not_found`, also unknown routes)"; 5: "Everything else under the gateway is
/// 404 problem". The group roots, other cases of the prefix, a slash too many, and the gateway's
/// own paths spelt with more after them: 404 problems, token or not, with no rate-limit headers
/// (docs/gateway.md: a path that is no endpoint is not counted), and nothing reaches a service.
#[tokio::test]
async fn every_spelling_that_names_no_endpoint_is_a_404_problem() {
    let stack = Stack::start_with(|config| config.rate_limit_enabled = true).await;
    let bearer = token("ada");
    for path in [
        "/v1/",
        "/v1/lingo",
        "/v1/lingo/",
        "/v1/news",
        "/v1/news/",
        "/V1/lingo/languages",
        "/v1/LINGO/languages",
        "/v1/lingo/LANGUAGES",
        "/v1/lingo/languages/",
        "/v1/lingo/languages//",
        "//v1/lingo/languages",
        "/v1/lingo//languages",
        "/v1/lingo/%6Canguages",
        "/v1/news/articles/a-1/comments/extra/",
        "/healthz/",
        "/readyz/x",
        "/metrics/",
        "/openapi.json/",
        "/docs/nothing-here",
        "/favicon.ico",
    ] {
        for with_token in [false, true] {
            let mut request = stack.gateway.client.get(stack.gateway.url(path));
            if with_token {
                request = request.bearer_auth(&bearer);
            }
            let response = request.send().await.expect("answered");
            assert!(
                response.headers().get("ratelimit-limit").is_none(),
                "{path}: a 404 is not counted"
            );
            own_problem(response, 404, "not_found", path).await;
        }
        let post = stack
            .gateway
            .client
            .post(stack.gateway.url(path))
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .expect("answered");
        own_problem(post, 404, "not_found", &format!("POST {path}")).await;
    }
    // Dot segments, which HTTP clients resolve before sending, sent as they are.
    for path in [
        "/v1/lingo/./languages",
        "/v1/lingo/x/../languages",
        "/v1/lingo/%2e%2e/lingo/languages",
        "/v1/news/articles/..",
    ] {
        let answer =
            crate::helpers::raw_request(stack.gateway.addr, &format!("GET {path} HTTP/1.1\r\n"))
                .await;
        assert!(answer.starts_with("HTTP/1.1 404"), "{path}: {answer}");
        assert!(
            answer.contains("application/problem+json"),
            "{path}: {answer}"
        );
        assert!(answer.contains("\"not_found\""), "{path}: {answer}");
    }
    assert_eq!(stack.hits(), 0, "nothing was forwarded");
}

/// the contract (docs/conventions.md): "405 answers carry an `Allow` header and a `detail` that names the allowed
/// methods", answered before the token (no 401 for a wrong method), never forwarded, not
/// counted. `OPTIONS` without CORS, `TRACE` and a cache's `PURGE` are such methods.
#[tokio::test]
async fn a_method_an_endpoint_does_not_take_is_405_with_allow_and_a_detail_naming_it() {
    let stack = Stack::start_with(|config| config.rate_limit_enabled = true).await;
    let cases: [(&str, &str, &[&str]); 6] = [
        ("DELETE", "/v1/lingo/languages", &["GET", "HEAD"]),
        ("OPTIONS", "/v1/lingo/languages", &["GET", "HEAD"]),
        ("TRACE", "/v1/news/articles", &["GET", "HEAD"]),
        ("PURGE", "/v1/news/articles", &["GET", "HEAD"]),
        // A Required endpoint: still 405, not 401, without a token.
        ("POST", "/v1/news/me/feed", &["GET", "HEAD"]),
        ("GET", "/v1/news/articles/a-1/like", &["POST", "DELETE"]),
    ];
    for (method, path, allowed) in cases {
        let response = stack
            .gateway
            .client
            .request(
                reqwest::Method::from_bytes(method.as_bytes()).expect("method"),
                stack.gateway.url(path),
            )
            .send()
            .await
            .expect("answered");
        let case = format!("{method} {path}");
        let allow: Vec<String> = response.headers()["allow"]
            .to_str()
            .expect("ascii")
            .split(',')
            .map(|m| m.trim().to_owned())
            .collect();
        let mut sorted_allow = allow.clone();
        sorted_allow.sort();
        let mut expected: Vec<String> = allowed.iter().map(|m| (*m).to_owned()).collect();
        expected.sort();
        assert_eq!(sorted_allow, expected, "{case}");
        assert!(
            response.headers().get("ratelimit-limit").is_none(),
            "{case}: a 405 is not counted"
        );
        let body = own_problem(response, 405, "method_not_allowed", &case).await;
        let detail = body["detail"].as_str().expect("a detail");
        for method in allowed {
            assert!(detail.contains(method), "{case}: {detail:?} names {method}");
        }
    }
    // The gateway's own endpoints take GET only.
    let response = stack
        .gateway
        .client
        .post(stack.gateway.url("/healthz"))
        .send()
        .await
        .expect("answered");
    assert!(
        response.headers()["allow"]
            .to_str()
            .expect("ascii")
            .contains("GET")
    );
    let body = own_problem(response, 405, "method_not_allowed", "POST /healthz").await;
    assert!(
        body["detail"].as_str().expect("a detail").contains("GET"),
        "{body}"
    );
    assert_eq!(stack.hits(), 0, "nothing was forwarded");
}

async fn post_comment(stack: &Stack, body: reqwest::Body) -> reqwest::Response {
    stack
        .gateway
        .client
        .post(stack.gateway.url("/v1/news/comments"))
        .bearer_auth(token("ada"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("answered")
}

/// A body of `len` bytes in 64 KiB pieces, sent chunked (no `Content-Length`).
fn chunked_body(len: usize) -> reqwest::Body {
    let pieces: Vec<Result<bytes::Bytes, std::io::Error>> = vec![b' '; len]
        .chunks(64 * 1024)
        .map(|piece| Ok(bytes::Bytes::copy_from_slice(piece)))
        .collect();
    reqwest::Body::wrap_stream(futures_util::stream::iter(pieces))
}

/// the contract (docs/conventions.md): "at most ... 1 MiB at the gateway (`413 payload_too_large`)": one byte over is
/// refused whether the length is declared or the body is chunked, and exactly 1 MiB sent chunked
/// passes whole.
#[tokio::test]
async fn the_body_limit_is_exactly_1_mib_with_and_without_a_length() {
    let stack = Stack::start().await;
    let over = post_comment(&stack, reqwest::Body::from(vec![b' '; MIB + 1])).await;
    own_problem(over, 413, "payload_too_large", "1 MiB + 1 with a length").await;
    assert_eq!(
        stack.hits(),
        0,
        "a declared length over the limit is never sent"
    );

    let exact = post_comment(&stack, chunked_body(MIB)).await;
    assert_eq!(exact.status(), 201, "exactly 1 MiB, chunked");
    let echo: Value = exact.json().await.expect("echo");
    assert_eq!(echo["body_len"], MIB);

    let over = post_comment(&stack, chunked_body(MIB + 1)).await;
    own_problem(over, 413, "payload_too_large", "1 MiB + 1 chunked").await;
}

/// the contract (docs/conventions.md): "Every response carries `x-request-id` (taken from the request when it has a sane
/// one, else generated); the gateway forwards it". A generated id replaces one that is too long
/// or holds bytes a log line should not; the id forwarded is the id answered.
#[tokio::test]
async fn the_request_id_is_kept_when_sane_and_the_same_id_is_forwarded_either_way() {
    let stack = Stack::start().await;
    let long_but_fine = "a".repeat(128);
    for (sent, kept) in [
        ("0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", true),
        ("trace:abc.DEF_1", true),
        (long_but_fine.as_str(), true),
        (&"a".repeat(129) as &str, false),
        ("two words", false),
        ("<script>", false),
        ("", false),
    ] {
        let response = stack
            .gateway
            .client
            .get(stack.gateway.url("/v1/news/articles"))
            .header("x-request-id", sent)
            .send()
            .await
            .expect("answered");
        assert_eq!(response.status(), 200, "{sent:?}");
        let answered = response.headers()["x-request-id"]
            .to_str()
            .expect("ascii")
            .to_owned();
        let echo: Value = response.json().await.expect("echo");
        assert_eq!(
            echo["headers"]["x-request-id"],
            json!([answered]),
            "{sent:?}: the service got the id the client was answered with"
        );
        if kept {
            assert_eq!(answered, sent);
        } else {
            assert_ne!(answered, sent);
            assert!(
                (1..=128).contains(&answered.len()) && !answered.contains(' '),
                "{answered:?}"
            );
        }
    }
    // Bytes outside ASCII (obs-text) and two ids: replaced / one id, on a problem too.
    let answer = raw_exchange(
        stack.gateway.addr,
        &format!(
            "GET /v1/nothing HTTP/1.1\r\nhost: {}\r\nx-request-id: caf\u{e9}\r\nconnection: close\r\n\r\n",
            stack.gateway.addr
        ),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    let ids: Vec<&str> = answer
        .lines()
        .filter(|line| line.to_ascii_lowercase().starts_with("x-request-id:"))
        .collect();
    assert_eq!(ids.len(), 1, "{answer}");
    assert!(!ids[0].contains("caf"), "{answer}");
}

/// the contract (docs/conventions.md): the gateway forwards W3C `traceparent` (and its `tracestate` travels with it) to the
/// services, unchanged when it records no span of its own.
#[tokio::test]
async fn traceparent_and_tracestate_reach_the_service() {
    let stack = Stack::start().await;
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let response = stack
        .gateway
        .client
        .get(stack.gateway.url("/v1/lingo/languages"))
        .header("traceparent", traceparent)
        .header("tracestate", "vendor=opaque")
        .send()
        .await
        .expect("answered");
    assert_eq!(response.status(), 200);
    let echo: Value = response.json().await.expect("echo");
    assert_eq!(echo["headers"]["traceparent"], json!([traceparent]));
    assert_eq!(echo["headers"]["tracestate"], json!(["vendor=opaque"]));
}

/// Hop-by-hop request headers (RFC 9110 7.6.1) stop at the gateway: those the standard names and
/// those the client's `Connection` names.
#[tokio::test]
async fn hop_by_hop_request_headers_stop_at_the_gateway() {
    let stack = Stack::start().await;
    let response = stack
        .gateway
        .client
        .get(stack.gateway.url("/v1/news/articles"))
        .header("connection", "keep-alive, x-private-hop, X-Other-Hop")
        .header("x-private-hop", "1")
        .header("x-other-hop", "2")
        .header("keep-alive", "timeout=5")
        .header("te", "trailers")
        .header("trailer", "x-checksum")
        .header("proxy-authorization", "Basic YWRhOnNlY3JldA==")
        .header("proxy-connection", "keep-alive")
        .header("upgrade", "websocket")
        .send()
        .await
        .expect("answered");
    assert_eq!(response.status(), 200);
    let echo: Value = response.json().await.expect("echo");
    let headers = echo["headers"].as_object().expect("headers");
    for name in [
        "x-private-hop",
        "x-other-hop",
        "keep-alive",
        "te",
        "trailer",
        "proxy-authorization",
        "proxy-connection",
        "upgrade",
    ] {
        assert!(!headers.contains_key(name), "{name} travelled: {headers:?}");
    }
}

/// A browser app reads the gateway's refusals only if they carry CORS headers: a 401 (with its
/// `WWW-Authenticate` exposed), a 404 and a 429 (with `Retry-After` and `RateLimit-*` exposed)
/// to a configured origin carry `Access-Control-Allow-Origin`.
#[tokio::test]
async fn the_gateways_own_refusals_carry_cors_headers_for_a_configured_origin() {
    let origin = "https://app.example";
    let stack = Stack::start_with(|config| {
        config.cors_allowed_origins = origin.parse().expect("origins");
        config.rate_limit_enabled = true;
        config.rate_limit_reads = 1;
    })
    .await;
    let get = |path: &'static str| {
        stack
            .gateway
            .client
            .get(stack.gateway.url(path))
            .header("origin", origin)
            .send()
    };
    let exposed = |response: &reqwest::Response| -> String {
        response
            .headers()
            .get("access-control-expose-headers")
            .map(|v| v.to_str().expect("ascii").to_ascii_lowercase())
            .unwrap_or_default()
    };
    let unknown = get("/v1/nothing").await.expect("answered");
    assert_eq!(unknown.status(), 404);
    assert_eq!(unknown.headers()["access-control-allow-origin"], origin);

    let refused = get("/v1/news/me/feed").await.expect("answered");
    assert_eq!(refused.status(), 401);
    assert_eq!(refused.headers()["access-control-allow-origin"], origin);
    assert!(
        exposed(&refused).contains("www-authenticate"),
        "{refused:?}"
    );

    let limited = get("/v1/news/articles").await.expect("answered");
    assert_eq!(limited.status(), 429);
    assert_eq!(limited.headers()["access-control-allow-origin"], origin);
    for name in ["retry-after", "ratelimit-remaining", "x-request-id"] {
        assert!(exposed(&limited).contains(name), "{name}: {limited:?}");
    }
    // An origin that is not listed gets no CORS header.
    let other = stack
        .gateway
        .client
        .get(stack.gateway.url("/v1/nothing"))
        .header("origin", "https://evil.example")
        .send()
        .await
        .expect("answered");
    assert!(other.headers().get("access-control-allow-origin").is_none());
}

/// A request target the gateway cannot proxy (`CONNECT` in authority form, `OPTIONS *`) gets an
/// answer, a problem, never a tunnel or a hang.
#[tokio::test]
async fn connect_and_asterisk_targets_are_answered_with_problems() {
    let stack = Stack::start().await;
    for head in [
        "CONNECT example.com:443 HTTP/1.1\r\nhost: example.com:443\r\nconnection: close\r\n\r\n",
        "OPTIONS * HTTP/1.1\r\nhost: gw\r\nconnection: close\r\n\r\n",
    ] {
        let answer = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            raw_exchange(stack.gateway.addr, head),
        )
        .await
        .expect("answered within 5 s");
        let status: u16 = answer
            .get(9..12)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{head:?}: {answer:?}"));
        assert!((400..500).contains(&status), "{head:?}: {answer}");
        assert!(
            answer
                .to_ascii_lowercase()
                .contains("content-type: application/problem+json"),
            "{head:?}: {answer}"
        );
    }
    assert_eq!(stack.hits(), 0);
}

/// `curl` sends `Expect: 100-continue` before a body over 1 KiB and waits for the interim answer
/// (RFC 9110 10.1.1): the gateway lets the body come for a request it forwards (the service
/// gets it whole), and answers a refusal at once without it.
#[tokio::test]
async fn expect_100_continue_is_answered_and_the_body_then_forwarded() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let stack = Stack::start().await;
    let body = vec![b' '; 4096];
    let mut stream = tokio::net::TcpStream::connect(stack.gateway.addr)
        .await
        .expect("connect");
    let head = format!(
        "POST /v1/news/comments HTTP/1.1\r\nhost: gw\r\nauthorization: Bearer {}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\nexpect: 100-continue\r\n\
         connection: close\r\n\r\n",
        token("ada"),
        body.len()
    );
    stream.write_all(head.as_bytes()).await.expect("head");
    let mut interim = [0u8; 25];
    tokio::time::timeout(
        std::time::Duration::from_secs(3),
        stream.read_exact(&mut interim),
    )
    .await
    .expect("an interim answer within 3 s (curl waits 1 s, then sends anyway)")
    .expect("read");
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    stream.write_all(&body).await.expect("body");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.expect("answer");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    assert!(answer.contains("\"body_len\":4096"), "{answer}");

    // Refused (no token): the answer comes without the body being asked for.
    let mut stream = tokio::net::TcpStream::connect(stack.gateway.addr)
        .await
        .expect("connect");
    let head = "POST /v1/news/comments HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\n\
                content-length: 4096\r\nexpect: 100-continue\r\n\r\n";
    stream.write_all(head.as_bytes()).await.expect("head");
    let mut answer = vec![0u8; 4096];
    let read = tokio::time::timeout(std::time::Duration::from_secs(3), stream.read(&mut answer))
        .await
        .expect("answered without the body")
        .expect("read");
    let answer = String::from_utf8_lossy(&answer[..read]);
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
}

/// A request head the HTTP parser refuses (a header name with a space, an HTTP version that does
/// not exist, a head of 512 KiB, a target of 70 KB) is the one documented exception to problem
/// answers (docs/conventions.md): hyper answers it itself, before any of our code runs, with a
/// bare status and `Connection: close`, and it is never forwarded. hyper 1 has no hook to write
/// that answer's body; this test holds the documented statuses so a change of hyper is seen.
#[tokio::test]
async fn a_request_head_the_parser_refuses_gets_the_documented_bare_status() {
    let stack = Stack::start().await;
    let huge_header = format!(
        "GET /v1/news/articles HTTP/1.1\r\nhost: gw\r\nx-big: {}\r\nconnection: close\r\n\r\n",
        "a".repeat(512 * 1024)
    );
    let long_target = format!(
        "GET /v1/news/articles/{} HTTP/1.1\r\nhost: gw\r\nconnection: close\r\n\r\n",
        "a".repeat(70_000)
    );
    let mut wrong = Vec::new();
    for (head, status) in [
        (
            "GET /v1/news/articles HTTP/1.1\r\nhost: gw\r\nbad header: x\r\nconnection: close\r\n\r\n",
            "400",
        ),
        (
            "GET /v1/news/articles HTTP/9.9\r\nhost: gw\r\nconnection: close\r\n\r\n",
            "400",
        ),
        (huge_header.as_str(), "431"),
        (long_target.as_str(), "414"),
    ] {
        let answer = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            exchange_whatever_is_read(stack.gateway.addr, head),
        )
        .await
        .expect("answered within 5 s");
        let closes = answer.to_ascii_lowercase().contains("connection: close");
        if !answer.starts_with(&format!("HTTP/1.1 {status} ")) || !closes {
            let shown: String = head.chars().take(60).collect();
            wrong.push(format!("{shown:?}... (expected {status})\n  -> {answer:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert_eq!(stack.hits(), 0);
}

/// Sends `message` (the gateway may close before all of it is written: a refusal of a long
/// head) and returns what the gateway answered.
async fn exchange_whatever_is_read(addr: std::net::SocketAddr, message: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let _ = stream.write_all(message.as_bytes()).await;
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// RFC 9112 6.3: a request with both `Transfer-Encoding` and `Content-Length` is framed by its
/// chunks, and "an intermediary that chooses to forward the message MUST first remove the
/// received Content-Length field": the service never sees a length that disagrees with the body
/// it gets (request smuggling), or the gateway refuses the request with a 400 problem.
#[tokio::test]
async fn a_request_with_both_a_length_and_chunks_is_never_forwarded_with_both() {
    let stack = Stack::start().await;
    let head = format!(
        "POST /v1/news/comments HTTP/1.1\r\nhost: gw\r\nauthorization: Bearer {}\r\n\
         content-type: application/json\r\ncontent-length: 40\r\n\
         transfer-encoding: chunked\r\nconnection: close\r\n\r\n2\r\n{{}}\r\n0\r\n\r\n",
        token("ada")
    );
    let answer = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        raw_exchange(stack.gateway.addr, &head),
    )
    .await
    .expect("answered within 5 s");
    if answer.starts_with("HTTP/1.1 400") {
        assert!(answer.contains("application/problem+json"), "{answer}");
        assert_eq!(stack.hits(), 0);
        return;
    }
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    let echo: Value = serde_json::from_str(&answer[answer.find("\r\n\r\n").expect("a body") + 4..])
        .expect("echo");
    assert_eq!(echo["body_len"], 2, "{echo}");
    let length = &echo["headers"]["content-length"];
    assert!(
        length.is_null() || *length == json!(["2"]),
        "the service got a length that disagrees with the body: {echo}"
    );
}

/// A `HEAD` that goes to the service (with a token, or with the cache off) comes back at once
/// with the `GET`'s length and no body, and the connection serves the next request.
#[tokio::test]
async fn head_requests_are_proxied_with_the_length_and_no_body() {
    let stack = Stack::start_with(|config| config.cache_max_bytes = 0).await;
    let bearer = token("ada");
    for (path, bearer) in [
        ("/v1/news/me/feed", Some(bearer.as_str())),
        ("/v1/news/articles", None),
    ] {
        let get = |method: reqwest::Method| {
            let mut request = stack
                .gateway
                .client
                .request(method, stack.gateway.url(path));
            if let Some(bearer) = bearer {
                request = request.bearer_auth(bearer);
            }
            request.send()
        };
        let started = std::time::Instant::now();
        let head = tokio::time::timeout(
            std::time::Duration::from_secs(3),
            get(reqwest::Method::HEAD),
        )
        .await
        .expect("a HEAD is answered at once")
        .expect("answered");
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert_eq!(head.status(), 200, "{path}");
        let length = head.headers()["content-length"]
            .to_str()
            .expect("ascii")
            .to_owned();
        assert!(head.bytes().await.expect("body").is_empty());
        let full = get(reqwest::Method::GET).await.expect("answered");
        assert_eq!(full.status(), 200);
        let body: Value = full.json().await.expect("echo");
        assert_eq!(body["method"], "GET");
        // The service's echo of a HEAD is that of its GET with "HEAD" for "GET": one byte more.
        let get_length = serde_json::to_vec(&body).expect("json").len();
        assert_eq!(
            length.parse::<usize>().expect("length"),
            get_length + 1,
            "{path}"
        );
    }
}

/// A body declared over 1 MiB with `Expect: 100-continue` is refused at once with 413: the
/// client is not asked for the body it would then send for nothing.
#[tokio::test]
async fn a_body_declared_over_the_limit_with_expect_is_413_at_once() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let stack = Stack::start().await;
    let mut stream = tokio::net::TcpStream::connect(stack.gateway.addr)
        .await
        .expect("connect");
    let head = format!(
        "POST /v1/news/comments HTTP/1.1\r\nhost: gw\r\nauthorization: Bearer {}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\nexpect: 100-continue\r\n\r\n",
        token("ada"),
        2 * MIB
    );
    stream.write_all(head.as_bytes()).await.expect("head");
    let mut answer = vec![0u8; 4096];
    let read = tokio::time::timeout(std::time::Duration::from_secs(2), stream.read(&mut answer))
        .await
        .expect("answered without the body")
        .expect("read");
    let answer = String::from_utf8_lossy(&answer[..read]);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("payload_too_large"), "{answer}");
    assert_eq!(stack.hits(), 0);
}

/// the contract (docs/conventions.md): "A connection whose request head has not fully arrived within 10 s is closed". A
/// keep-alive connection that was served once and then sends nothing (its next head never
/// arrives) is closed at the header read timeout too: idle connections cannot be held open at
/// no cost (here 500 ms; allowed 3 s).
#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_at_the_header_read_timeout() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let stack = Stack::start_with(|config| config.header_read_timeout_ms = 500).await;
    let mut stream = tokio::net::TcpStream::connect(stack.gateway.addr)
        .await
        .expect("connect");
    stream
        .write_all(b"GET /v1/lingo/languages HTTP/1.1\r\nhost: gw\r\n\r\n")
        .await
        .expect("write");
    // Read the answer (its head, then its body of `content-length` bytes).
    let mut answer = Vec::new();
    let mut piece = [0u8; 4096];
    let started = std::time::Instant::now();
    loop {
        let read = stream.read(&mut piece).await.expect("read");
        assert!(read > 0, "closed before the answer");
        answer.extend_from_slice(&piece[..read]);
        let text = String::from_utf8_lossy(&answer).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let length: usize = text
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().expect("length"))
                })
                .expect("a length");
            if answer.len() >= end + 4 + length {
                break;
            }
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(3));
    }
    assert!(answer.starts_with(b"HTTP/1.1 200"));
    let idle = std::time::Instant::now();
    let closed = tokio::time::timeout(std::time::Duration::from_secs(3), stream.read(&mut piece))
        .await
        .expect("the idle connection was still open after 3 s");
    assert_eq!(closed.unwrap_or(0), 0, "nothing more was answered");
    assert!(
        idle.elapsed() >= std::time::Duration::from_millis(400),
        "{:?}",
        idle.elapsed()
    );
}

fn lower_list(response: &reqwest::Response, name: &str) -> Vec<String> {
    response
        .headers()
        .get_all(name)
        .iter()
        .flat_map(|v| v.to_str().expect("ascii").split(','))
        .map(|item| item.trim().to_ascii_lowercase())
        .filter(|item| !item.is_empty())
        .collect()
}

/// docs/gateway.md's CORS table: a preflight from a listed origin allows the listed methods and
/// request headers for 600 s; an answer exposes the listed headers to scripts and, since it
/// names one origin of several, says `Vary: Origin` (a cache in front must not hand one origin's
/// answer to another). With `*`, any origin is allowed.
#[tokio::test]
async fn cors_answers_carry_the_tables_methods_headers_and_max_age() {
    let origin = "https://app.example";
    let stack = Stack::start_with(|config| {
        config.cors_allowed_origins = format!("{origin},https://admin.example")
            .parse()
            .expect("origins");
    })
    .await;
    let preflight = stack
        .gateway
        .client
        .request(reqwest::Method::OPTIONS, stack.gateway.url("/v1/news/comments"))
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization, content-type, idempotency-key, if-none-match, x-request-id, traceparent",
        )
        .send()
        .await
        .expect("answered");
    assert!(preflight.status().is_success(), "{}", preflight.status());
    assert_eq!(preflight.headers()["access-control-allow-origin"], origin);
    assert_eq!(preflight.headers()["access-control-max-age"], "600");
    let methods = lower_list(&preflight, "access-control-allow-methods");
    for method in ["get", "head", "post", "put", "patch", "delete", "options"] {
        assert!(
            methods.contains(&method.to_owned()),
            "{method}: {methods:?}"
        );
    }
    let headers = lower_list(&preflight, "access-control-allow-headers");
    for header in [
        "authorization",
        "content-type",
        "if-none-match",
        "idempotency-key",
        "x-request-id",
        "traceparent",
    ] {
        assert!(
            headers.contains(&header.to_owned()),
            "{header}: {headers:?}"
        );
    }

    let simple = stack
        .gateway
        .client
        .get(stack.gateway.url("/v1/news/articles"))
        .header("origin", origin)
        .send()
        .await
        .expect("answered");
    assert_eq!(simple.status(), 200);
    let exposed = lower_list(&simple, "access-control-expose-headers");
    for header in [
        "location",
        "etag",
        "retry-after",
        "www-authenticate",
        "x-request-id",
        "idempotency-replayed",
        "ratelimit-limit",
        "ratelimit-remaining",
        "ratelimit-reset",
    ] {
        assert!(
            exposed.contains(&header.to_owned()),
            "{header}: {exposed:?}"
        );
    }
    assert!(
        lower_list(&simple, "vary").contains(&"origin".to_owned()),
        "{:?}",
        simple.headers()
    );

    let any =
        Stack::start_with(|config| config.cors_allowed_origins = "*".parse().expect("*")).await;
    let response = any
        .gateway
        .client
        .get(any.gateway.url("/v1/news/articles"))
        .header("origin", "https://whoever.example")
        .send()
        .await
        .expect("answered");
    assert_eq!(response.headers()["access-control-allow-origin"], "*");
}

/// docs/gateway.md: "Every answer under `/v1/lingo` and `/v1/news` carries `RateLimit-Limit`,
/// `RateLimit-Remaining` and `RateLimit-Reset`" but the 404, the 405 and a preflight: the
/// gateway's own 401, 403 and 413 and an upstream failure (503) carry them too.
#[tokio::test]
async fn refusals_and_failures_carry_the_rate_limit_headers() {
    let stack = Stack::start_with(|config| {
        config.rate_limit_enabled = true;
        config.news_upstreams = "".parse().expect("no news replica");
    })
    .await;
    let gateway = &stack.gateway;
    let check = |response: &reqwest::Response, case: &str| {
        for name in ["ratelimit-limit", "ratelimit-remaining", "ratelimit-reset"] {
            assert!(response.headers().contains_key(name), "{case}: no {name}");
        }
    };
    let unauthorized = gateway.get("/v1/lingo/me/xp").await;
    assert_eq!(unauthorized.status(), 401);
    check(&unauthorized, "401");
    let forbidden = gateway
        .client
        .get(gateway.url("/v1/lingo/analytics/progress"))
        .bearer_auth(token("ada"))
        .send()
        .await
        .expect("answered");
    assert_eq!(forbidden.status(), 403);
    check(&forbidden, "403");
    let too_large = gateway
        .client
        .post(gateway.url("/v1/lingo/me/study-sessions"))
        .bearer_auth(token("ada"))
        .header("content-type", "application/json")
        .body(vec![b' '; MIB + 1])
        .send()
        .await
        .expect("answered");
    assert_eq!(too_large.status(), 413);
    check(&too_large, "413");
    let unavailable = gateway.get("/v1/news/articles").await;
    assert_eq!(unavailable.status(), 503);
    check(&unavailable, "503");
}

/// Two requests written at once on one connection (HTTP/1.1 pipelining) get their two answers,
/// in order; the second may be a refusal the gateway makes itself.
#[tokio::test]
async fn pipelined_requests_are_answered_in_order() {
    let stack = Stack::start().await;
    let answer = raw_exchange(
        stack.gateway.addr,
        "GET /v1/lingo/languages HTTP/1.1\r\nhost: gw\r\nx-request-id: first\r\n\r\n\
         GET /v1/news/me/feed HTTP/1.1\r\nhost: gw\r\nx-request-id: second\r\n\
         connection: close\r\n\r\n",
    )
    .await;
    let first = answer.find("HTTP/1.1 200").expect("the first answer");
    let second = answer.find("HTTP/1.1 401").expect("the second answer");
    assert!(first < second, "{answer}");
    let first_id = answer.find("x-request-id: first").expect("first id");
    let second_id = answer.find("x-request-id: second").expect("second id");
    assert!(first_id < second && second < second_id, "{answer}");
}

/// A `POST` with an empty body (`Content-Length: 0`) reaches the service as one: a length of 0
/// and no body.
#[tokio::test]
async fn an_empty_post_reaches_the_service_with_a_length_of_zero() {
    let stack = Stack::start().await;
    let response = stack
        .gateway
        .client
        .post(stack.gateway.url("/v1/news/articles/a-1/like"))
        .bearer_auth(token("ada"))
        .header("content-length", "0")
        .send()
        .await
        .expect("answered");
    assert_eq!(response.status(), 201);
    let echo: Value = response.json().await.expect("echo");
    assert_eq!(echo["body_len"], 0);
    assert!(
        echo["headers"].get("transfer-encoding").is_none(),
        "an empty body is not sent chunked: {echo}"
    );
}
