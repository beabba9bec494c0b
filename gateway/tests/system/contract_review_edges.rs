//! Further meeting points of the gateway and the services: CORS on answers of every origin
//! (the service, the cache, the gateway's own problems), rate limits in front of real services,
//! freshness of stored answers, a conditional request on a miss, the merged document, and ids
//! written percent-encoded.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::contract_review::{Answer, Sys, answer, with_param};

const APP: &str = "https://app.example.com";
const ADMIN: &str = "https://admin.example.com";

fn exposes(answer: &Answer, header: &str) -> bool {
    answer
        .header("access-control-expose-headers")
        .is_some_and(|list| {
            list.split(',')
                .any(|h| h.trim().eq_ignore_ascii_case(header))
        })
}

/// A browser reads an answer only when it carries `Access-Control-Allow-Origin` for its origin:
/// answers from the service, from the cache, 304s and problems alike.
#[tokio::test]
async fn cors_headers_are_on_every_answer_for_an_allowed_origin_whoever_made_it() {
    let sys = Sys::start_with(|config| {
        config.cors_allowed_origins = format!("{APP},{ADMIN}").parse().unwrap();
    })
    .await;
    let preflight = answer(
        sys.req(Method::OPTIONS, "/v1/news/comments", None)
            .header("origin", APP)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "authorization, content-type, idempotency-key",
            ),
    )
    .await;
    assert!(preflight.status.is_success(), "{}", preflight.status);
    assert_eq!(preflight.header("access-control-allow-origin"), Some(APP));
    assert_eq!(preflight.header("access-control-max-age"), Some("600"));

    let url = "/v1/news/articles?limit=2";
    let mut wrong = Vec::new();
    let cases: Vec<(&str, reqwest::RequestBuilder)> = vec![
        ("fresh from the service", sys.req(Method::GET, url, None).header("origin", APP)),
        ("from the cache, another origin", sys.req(Method::GET, url, None).header("origin", ADMIN)),
        ("from the cache", sys.req(Method::GET, url, None).header("origin", APP)),
        ("signed in", sys.req(Method::GET, url, Some("cors")).header("origin", APP)),
        ("service problem", sys.req(Method::GET, "/v1/news/articles/none", None).header("origin", APP)),
        ("gateway 401", sys.req(Method::GET, "/v1/lingo/me/xp", None).header("origin", APP)),
        ("gateway 404", sys.req(Method::GET, "/v1/news/nowhere", None).header("origin", APP)),
        ("service 422", sys.req(Method::POST, "/v1/news/comments", Some("cors")).header("origin", APP).json(&json!({}))),
        ("created", sys.req(Method::POST, "/v1/lingo/me/study-sessions", Some("cors")).header("origin", APP)
            .json(&json!({"duration_seconds": 5, "phrases_seen": 0, "phrases_correct": 0, "language_code": "es"}))),
    ];
    for (name, request) in cases {
        let origin = if name.contains("another origin") {
            ADMIN
        } else {
            APP
        };
        let got = answer(request).await;
        if got.header("access-control-allow-origin") != Some(origin) {
            wrong.push(format!(
                "{name} ({}): Access-Control-Allow-Origin {:?}",
                got.status,
                got.header("access-control-allow-origin")
            ));
        }
        for header in [
            "x-request-id",
            "etag",
            "location",
            "www-authenticate",
            "idempotency-replayed",
        ] {
            if !exposes(&got, header) {
                wrong.push(format!("{name}: {header} not exposed"));
            }
        }
    }
    // A 304 from the cache, for a page of a browser app.
    let stored = sys.get(url, None).await;
    let not_modified = answer(
        sys.req(Method::GET, url, None)
            .header("origin", APP)
            .header("if-none-match", stored.header("etag").unwrap()),
    )
    .await;
    assert_eq!(not_modified.status, StatusCode::NOT_MODIFIED);
    if not_modified.header("access-control-allow-origin") != Some(APP) {
        wrong.push("304 from the cache: no Access-Control-Allow-Origin".into());
    }
    // An origin not listed gets no grant, even from the cache.
    let stranger = answer(
        sys.req(Method::GET, url, None)
            .header("origin", "https://evil.example"),
    )
    .await;
    assert_eq!(stranger.status, StatusCode::OK);
    if stranger.header("access-control-allow-origin").is_some() {
        wrong.push("an unlisted origin was granted".into());
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Rate limits in front of the real services: every `/v1` answer says the budget, answers
/// from the cache count, and the write over the budget never reaches the service.
#[tokio::test]
async fn rate_limits_count_cached_reads_and_stop_writes_before_the_service() {
    let sys = Sys::start_with(|config| {
        config.rate_limit_enabled = true;
        config.rate_limit_reads = 6;
        config.rate_limit_writes = 3;
        config.rate_limit_window_secs = 60;
    })
    .await;
    let session = json!({"duration_seconds": 5, "phrases_seen": 1, "phrases_correct": 1, "language_code": "es"});
    let mut last = None;
    for n in 0..4 {
        let posted = answer(
            sys.req(Method::POST, "/v1/lingo/me/study-sessions", Some("limited"))
                .header("x-request-id", format!("write-{n}"))
                .json(&session),
        )
        .await;
        assert_eq!(posted.header("ratelimit-limit"), Some("3"), "write {n}");
        last = Some(posted);
    }
    let refused = last.unwrap();
    let id = refused.assert_problem(429, "rate_limited", "the fourth write");
    assert_eq!(id, "write-3");
    let retry: u64 = refused.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry));
    assert_eq!(refused.header("ratelimit-remaining"), Some("0"));
    // The refused write never reached lingo-service: three sessions.
    let direct = answer(
        sys.direct(Method::GET, "/v1/lingo/me/study-sessions")
            .bearer_auth(shared_auth::testing::token("limited")),
    )
    .await;
    assert_eq!(direct.json()["count"], 3);

    // Anonymous reads, served from the cache after the first, all count.
    let mut remaining = Vec::new();
    for _ in 0..7 {
        let read = sys.get("/v1/lingo/languages", None).await;
        remaining.push((
            read.status.as_u16(),
            read.header("ratelimit-remaining").map(str::to_owned),
        ));
    }
    assert_eq!(remaining[6].0, 429, "{remaining:?}");
    let counted: Vec<Option<String>> = remaining[..6].iter().map(|r| r.1.clone()).collect();
    let expected: Vec<Option<String>> = (0..6).rev().map(|n: u32| Some(n.to_string())).collect();
    assert_eq!(counted, expected, "{remaining:?}");
}

/// A stored answer is served for at most its max-age: past it, the anonymous reader sees what
/// the service says now (here, a like made meanwhile).
#[tokio::test]
async fn an_anonymous_count_lags_at_most_max_age() {
    let sys = Sys::start().await;
    let id = sys.article_ids(1).await.remove(0);
    let url = format!("/v1/news/articles/{id}");
    let before = sys.get_ok(&url, None).await["like_count"].as_u64().unwrap();
    let liked = answer(sys.req(Method::POST, &format!("{url}/like"), Some("patient"))).await;
    assert_eq!(liked.status, StatusCode::OK);
    let stale = sys.get(&url, None).await;
    assert_eq!(stale.json()["like_count"], before, "served from the cache");
    let age: u64 = stale.header("age").unwrap().parse().unwrap();
    tokio::time::sleep(Duration::from_secs(31 - age.min(30))).await;
    let fresh = sys.get(&url, None).await;
    assert_eq!(
        fresh.json()["like_count"],
        before + 1,
        "past max-age the count is current"
    );
    assert_eq!(fresh.header("age"), None, "fetched again");
}

/// `If-None-Match` on a miss: the gateway stores the whole answer and answers the condition.
#[tokio::test]
async fn a_conditional_request_on_a_miss_is_answered_and_stores_the_whole_answer() {
    let sys = Sys::start().await;
    for url in [
        "/v1/lingo/phrases/ph-fr-002",
        "/v1/news/organizations?limit=3",
    ] {
        // The tag as the service gives it, learnt past the gateway.
        let direct = answer(sys.direct(Method::GET, url)).await;
        let etag = direct.header("etag").unwrap().to_owned();
        let first = answer(
            sys.req(Method::GET, url, None)
                .header("if-none-match", &etag),
        )
        .await;
        assert_eq!(first.status, StatusCode::NOT_MODIFIED, "{url}");
        assert_eq!(first.header("etag"), Some(etag.as_str()));
        let whole = sys.get(url, None).await;
        assert_eq!(whole.status, StatusCode::OK);
        assert!(
            whole.header("age").is_some(),
            "{url}: the miss stored the answer"
        );
        assert_eq!(whole.bytes, direct.bytes, "{url}");
        let other_url = with_param(url, "x", "1");
        let miss_other = answer(
            sys.req(Method::GET, &other_url, None)
                .header("if-none-match", "\"stale\""),
        )
        .await;
        assert_eq!(
            miss_other.status,
            StatusCode::OK,
            "{url}: a tag that does not match"
        );
    }
}

/// The merged document at `/openapi.json` has exactly the paths and operations the two
/// services publish themselves, read through the gateway.
#[tokio::test]
async fn the_merged_document_is_the_union_of_the_services_own_documents() {
    let sys = Sys::start().await;
    let merged = sys.get_ok("/openapi.json", None).await;
    let operations = |document: &Value| -> Vec<String> {
        let mut found = Vec::new();
        for (path, item) in document["paths"].as_object().unwrap() {
            for method in item.as_object().unwrap().keys() {
                found.push(format!("{method} {path}"));
            }
        }
        found.sort();
        found
    };
    let mut union = Vec::new();
    for group in ["lingo", "news"] {
        let own = sys.get_ok(&format!("/v1/{group}/openapi.json"), None).await;
        union.extend(operations(&own));
    }
    union.sort();
    assert_eq!(operations(&merged), union);
}

/// Ids percent-encoded in the path name the same resource through the gateway, and an id
/// that names nothing is that resource's 404, whatever its spelling.
#[tokio::test]
async fn percent_encoded_ids_reach_the_service_decoded() {
    let sys = Sys::start().await;
    let id = sys.article_ids(1).await.remove(0);
    let encoded: String = id.bytes().map(|b| format!("%{b:02X}")).collect();
    let plain = sys.get_ok(&format!("/v1/news/articles/{id}"), None).await;
    let via_encoding = sys
        .get_ok(&format!("/v1/news/articles/{encoded}"), None)
        .await;
    assert_eq!(plain, via_encoding);
    let phrase = sys.get_ok("/v1/lingo/phrases/ph%2Des%2D001", None).await;
    assert_eq!(phrase["id"], "ph-es-001");
    for (path, code) in [
        ("/v1/news/articles/%00", "article_not_found"),
        ("/v1/news/articles/%FF%FE", "article_not_found"),
        ("/v1/news/articles/a%2Fb", "article_not_found"),
        ("/v1/lingo/phrases/%E2%82", "phrase_not_found"),
        (
            "/v1/news/comments/0193A1B2-C3D4-7E5F-8A9B-0C1D2E3F4A5B",
            "comment_not_found",
        ),
        ("/v1/news/comments/not-a-uuid", "comment_not_found"),
    ] {
        sys.get(path, None).await.assert_problem(404, code, path);
    }
}

/// `If-None-Match` split over two header lines (RFC 9110 5.3: one list), on a miss and on a
/// hit: the gateway answers 304 when any tag matches, and what it stores is the whole answer.
#[tokio::test]
async fn if_none_match_over_two_lines_is_one_list_at_the_cache() {
    let sys = Sys::start().await;
    for url in [
        "/v1/lingo/phrases/ph-de-003",
        "/v1/news/journalists?limit=4",
    ] {
        let direct = answer(sys.direct(Method::GET, url)).await;
        let etag = direct.header("etag").unwrap().to_owned();
        for lines in [["\"nope\"", etag.as_str()], [etag.as_str(), "\"nope\""]] {
            let two = answer(
                sys.req(Method::GET, url, None)
                    .header("if-none-match", lines[0])
                    .header("if-none-match", lines[1]),
            )
            .await;
            assert_eq!(two.status, StatusCode::NOT_MODIFIED, "{url} {lines:?}");
            let whole = sys.get(url, None).await;
            assert_eq!(whole.status, StatusCode::OK, "{url}");
            assert_eq!(
                whole.bytes, direct.bytes,
                "{url}: the stored answer is whole"
            );
        }
        let neither = answer(
            sys.req(Method::GET, url, None)
                .header("if-none-match", "\"a\"")
                .header("if-none-match", "\"b\""),
        )
        .await;
        assert_eq!(neither.status, StatusCode::OK);
        assert_eq!(neither.bytes, direct.bytes);
    }
}

/// A client that sends `Expect: 100-continue` (curl does for larger bodies) gets its answer
/// through the gateway: the 100 and then the 201, or a final refusal at once.
#[tokio::test]
async fn a_body_behind_expect_100_continue_gets_through() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let sys = Sys::start().await;
    let body = json!({"duration_seconds": 60, "phrases_seen": 1, "phrases_correct": 1,
        "language_code": "es"})
    .to_string();
    let address = sys
        .stack
        .gateway_url
        .trim_start_matches("http://")
        .to_owned();
    for (length, expected) in [
        (body.len(), "201"),
        (300 * 1024, "413"),
        (2 * 1024 * 1024, "413"),
    ] {
        let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
        let head = format!(
            "POST /v1/lingo/me/study-sessions HTTP/1.1\r\nhost: {address}\r\n\
             authorization: Bearer {}\r\ncontent-type: application/json\r\n\
             content-length: {length}\r\nexpect: 100-continue\r\nconnection: close\r\n\r\n",
            shared_auth::testing::token("expecting")
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut first = vec![0u8; 4096];
        let read = tokio::time::timeout(Duration::from_secs(3), stream.read(&mut first)).await;
        let interim = match read {
            Ok(Ok(n)) => String::from_utf8_lossy(&first[..n]).into_owned(),
            Ok(Err(error)) => panic!("{length}: {error}"),
            // No interim answer within 3 s: send the body anyway, as curl does after 1 s.
            Err(_) => String::new(),
        };
        let answer_text = if interim.is_empty() || interim.starts_with("HTTP/1.1 100") {
            let mut padded = body.clone().into_bytes();
            padded.resize(length, b' ');
            let _ = stream.write_all(&padded).await;
            let mut rest = Vec::new();
            let _ =
                tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut rest)).await;
            let text = String::from_utf8_lossy(&rest).into_owned();
            let after_interim = interim
                .split("\r\n\r\n")
                .nth(1)
                .unwrap_or_default()
                .to_owned();
            after_interim + &text
        } else {
            interim
        };
        assert!(
            answer_text.starts_with(&format!("HTTP/1.1 {expected}")),
            "{length}: {:?}",
            answer_text.chars().take(300).collect::<String>()
        );
    }
}

/// Exactly 128 KiB is within the services' limit and one byte more is not, through the
/// gateway.
#[tokio::test]
async fn the_services_limit_is_128_kib_exactly_through_the_gateway() {
    let sys = Sys::start().await;
    let article = sys.article_ids(1).await.remove(0);
    let body = json!({"article_id": article, "text": "edge"}).to_string();
    for (length, status) in [
        (128 * 1024, StatusCode::CREATED),
        (128 * 1024 + 1, StatusCode::PAYLOAD_TOO_LARGE),
    ] {
        let mut padded = body.clone().into_bytes();
        padded.resize(length, b' ');
        for chunked in [false, true] {
            let payload = if chunked {
                let pieces: Vec<Result<Vec<u8>, std::io::Error>> =
                    padded.chunks(10_000).map(|c| Ok(c.to_vec())).collect();
                reqwest::Body::wrap_stream(futures_util::stream::iter(pieces))
            } else {
                reqwest::Body::from(padded.clone())
            };
            let posted = answer(
                sys.req(Method::POST, "/v1/news/comments", Some("edge"))
                    .header("content-type", "application/json")
                    .body(payload),
            )
            .await;
            assert_eq!(
                posted.status,
                status,
                "{length} chunked={chunked}: {}",
                posted.json()
            );
        }
    }
}

/// Sends raw bytes to the gateway and reads until it closes the connection.
async fn raw_exchange(sys: &Sys, request: String) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = sys.stack.gateway_url.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .expect("the gateway did not close the connection")
        .unwrap();
    answer
}

/// The JSON body after the head of a close-delimited or `Content-Length` HTTP answer.
fn body_of(answer: &[u8]) -> Value {
    let text = String::from_utf8_lossy(answer);
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(
        !head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "chunked to an HTTP/1.0 client: {head}"
    );
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {head}"))
}

/// An HTTP/1.0 client gets whole answers, fresh and from the cache, large ones included (no
/// chunked coding, which HTTP/1.0 does not know).
#[tokio::test]
async fn an_http_1_0_client_gets_whole_answers_fresh_and_from_the_cache() {
    let sys = Sys::start().await;
    for path in [
        "/v1/news/articles?limit=100",
        "/v1/lingo/phrases?limit=100",
        "/v1/lingo/languages",
    ] {
        let expected = sys.get_ok(path, None).await;
        for round in 0..2 {
            let answer = raw_exchange(&sys, format!("GET {path} HTTP/1.0\r\n\r\n")).await;
            // hyper answers an HTTP/1.0 request in HTTP/1.0; either version is readable.
            assert!(
                answer.starts_with(b"HTTP/1.1 200") || answer.starts_with(b"HTTP/1.0 200"),
                "{path} {round}: {}",
                String::from_utf8_lossy(&answer[..answer.len().min(600)])
            );
            assert_eq!(body_of(&answer), expected, "{path} {round}");
        }
    }
}

/// Two requests pipelined on one connection get their two answers in order, one of them from
/// the cache.
#[tokio::test]
async fn pipelined_requests_get_their_answers_in_order() {
    let sys = Sys::start().await;
    sys.get_ok("/v1/lingo/languages", None).await;
    let address = sys
        .stack
        .gateway_url
        .trim_start_matches("http://")
        .to_owned();
    let answer = raw_exchange(
        &sys,
        format!(
            "GET /v1/lingo/languages HTTP/1.1\r\nhost: {address}\r\nx-request-id: pipe-1\r\n\r\n\
             GET /v1/news/articles/none HTTP/1.1\r\nhost: {address}\r\nx-request-id: pipe-2\r\n\r\n\
             GET /v1/news/organizations?limit=1 HTTP/1.1\r\nhost: {address}\r\nx-request-id: pipe-3\r\nconnection: close\r\n\r\n"
        ),
    )
    .await;
    let text = String::from_utf8_lossy(&answer);
    let first = text.find("x-request-id: pipe-1").expect(&text);
    let second = text.find("x-request-id: pipe-2").expect(&text);
    let third = text.find("x-request-id: pipe-3").expect(&text);
    assert!(first < second && second < third, "{text}");
    assert_eq!(text.matches("HTTP/1.1 200").count(), 2, "{text}");
    assert_eq!(text.matches("HTTP/1.1 404").count(), 1, "{text}");
    assert!(text.contains("\"request_id\":\"pipe-2\""), "{text}");
}

/// The services' own operational endpoints (`/metrics`, `/readyz`, `/healthz`) are not reachable
/// through the gateway under any spelling: everything under the gateway outside its own
/// endpoints and the documented `/v1` routes is a 404 problem.
#[tokio::test]
async fn the_services_operational_endpoints_are_not_reachable_through_the_gateway() {
    let sys = Sys::start().await;
    let address = sys
        .stack
        .gateway_url
        .trim_start_matches("http://")
        .to_owned();
    for target in [
        "/v1/lingo/metrics",
        "/v1/news/readyz",
        "/v1/lingo/healthz",
        "/v1/lingo/../metrics",
        "/v1/news/../../metrics",
        "/v1/lingo/%2e%2e/metrics",
        "/v1/news/%2E%2E/%2E%2E/readyz",
        "/v1/lingo/..%2fmetrics",
    ] {
        let answer = raw_exchange(
            &sys,
            format!("GET {target} HTTP/1.1\r\nhost: {address}\r\nconnection: close\r\n\r\n"),
        )
        .await;
        let text = String::from_utf8_lossy(&answer);
        assert!(text.starts_with("HTTP/1.1 404"), "{target}: {text}");
        assert!(text.contains("\"code\":\"not_found\""), "{target}: {text}");
        assert!(!text.contains("# TYPE"), "{target}: metrics leaked");
    }
}

/// "Rate limits per caller (`sub`, else client IP)": two readers with tokens from one address
/// have a budget each, and anonymous requests (and those with an invalid token) count against
/// the address.
#[tokio::test]
async fn rate_limit_budgets_are_per_subject_else_per_address() {
    let sys = Sys::start_with(|config| {
        config.rate_limit_enabled = true;
        config.rate_limit_reads = 3;
        config.rate_limit_window_secs = 60;
    })
    .await;
    let statuses = |who: Option<&'static str>, bearer: Option<&'static str>| {
        let sys = &sys;
        async move {
            let mut statuses = Vec::new();
            for _ in 0..4 {
                let mut request = sys.req(Method::GET, "/v1/news/articles?limit=1", who);
                if let Some(bearer) = bearer {
                    request = request.header("authorization", bearer);
                }
                statuses.push(answer(request).await.status.as_u16());
            }
            statuses
        }
    };
    assert_eq!(statuses(Some("reader-a"), None).await, [200, 200, 200, 429]);
    assert_eq!(statuses(Some("reader-b"), None).await, [200, 200, 200, 429]);
    // The address's budget: an invalid token's 401s count against it too.
    let mut by_address = Vec::new();
    for bearer in [Some("Bearer broken"), None, None, None] {
        let mut request = sys.req(Method::GET, "/v1/news/articles?limit=1", None);
        if let Some(bearer) = bearer {
            request = request.header("authorization", bearer);
        }
        by_address.push(answer(request).await.status.as_u16());
    }
    assert_eq!(by_address, [401, 200, 200, 429]);
}
