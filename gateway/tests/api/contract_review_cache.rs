//! An outside review of the contract (docs/gateway.md), "Cached public answers", against an origin that counts
//! the requests it gets per target and answers with the `Cache-Control` (`cc`), `status` and
//! `vary` its query asks for, an `ETag` per answer (`"v<n>"`, the n-th request for the target),
//! and `Date`. What a shared cache (RFC 9111) must and must not do, as an operator who knows
//! Varnish and nginx would try it.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};
use shared_auth::testing::{default_claims, token, token_with_claims};

use crate::helpers::{
    TargetCounts, committed_document, gateway_in_front_of_with, query_map, serve_origin,
};

struct Origin {
    url: String,
    counts: TargetCounts,
}

impl Origin {
    async fn start() -> Self {
        let counts = TargetCounts::default();
        let url = serve_origin(Router::new().fallback(answer).with_state(counts.clone())).await;
        Self { url, counts }
    }

    fn hits(&self, target: &str) -> usize {
        self.counts.of(target)
    }
}

async fn answer(State(counts): State<TargetCounts>, request: Request) -> Response {
    if request.uri().path() == "/v1/news/openapi.json" {
        return Response::builder()
            .header("content-type", "application/json")
            .body(Body::from(committed_document("news").to_string()))
            .unwrap();
    }
    let target = request.uri().path_and_query().unwrap().as_str().to_owned();
    let n = counts.count(&target);
    let query = query_map(&request);
    let status: u16 = query.get("status").map_or(200, |s| s.parse().unwrap());
    let mut response = Response::builder()
        .status(StatusCode::from_u16(status).unwrap())
        .header(
            "content-type",
            if status >= 400 {
                "application/problem+json"
            } else {
                "application/json"
            },
        )
        .header("etag", format!("\"v{n}\""))
        .header("x-origin-n", n.to_string());
    if let Some(cc) = query.get("cc") {
        response = response.header("cache-control", cc.as_str());
    }
    if let Some(vary) = query.get("vary") {
        response = response.header("vary", vary.as_str());
    }
    if let Some(seconds) = query.get("retry_after") {
        response = response.header("retry-after", seconds.as_str());
    }
    let authorization = request
        .headers()
        .get("authorization")
        .map(|v| v.to_str().unwrap().to_owned());
    let body = json!({"n": n, "target": target, "authorization": authorization,
                      "type": "about:blank", "status": status, "title": "x"});
    response.body(Body::from(body.to_string())).unwrap()
}

fn header(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_owned())
}

async fn n_of(response: reqwest::Response) -> u64 {
    let body: Value = response.json().await.unwrap();
    body["n"].as_u64().unwrap()
}

const PUBLIC: &str = "cc=public,%20max-age=60";

/// A hit keeps the stored `ETag` and carries an `Age` that grows with the seconds since the
/// service answered; the answer fresh from the service carries none.
#[tokio::test]
async fn hits_keep_the_etag_and_carry_a_growing_age() {
    let origin = Origin::start().await;
    let gateway = gateway_in_front_of_with(&origin.url, |_| {}).await;
    let target = format!("/v1/news/articles?{PUBLIC}");
    let first = gateway.get(&target).await;
    assert_eq!(first.status(), 200);
    assert_eq!(header(&first, "age"), None, "made for this request");
    let etag = header(&first, "etag").unwrap();
    let second = gateway.get(&target).await;
    assert_eq!(header(&second, "etag").as_deref(), Some(etag.as_str()));
    let age_0: u64 = header(&second, "age").unwrap().parse().unwrap();
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let third = gateway.get(&target).await;
    let age_2: u64 = header(&third, "age").unwrap().parse().unwrap();
    assert!(age_2 >= age_0 + 2, "{age_0} then {age_2}");
    assert_eq!(n_of(third).await, 1);
    assert_eq!(origin.hits(&target), 1);
}

/// RFC 9111 4.3.2 / RFC 9110 15.4.5: an `If-None-Match` that matches the stored answer is a
/// 304 from the cache, with the validator, `Cache-Control`, `Vary`, `Age` and no body; a weak
/// comparison; one that matches nothing gets the whole stored answer. A `HEAD` is answered
/// likewise.
#[tokio::test]
async fn if_none_match_is_answered_from_the_cache_with_the_right_headers() {
    let origin = Origin::start().await;
    let gateway = gateway_in_front_of_with(&origin.url, |_| {}).await;
    let target = format!("/v1/news/articles?{PUBLIC}&vary=accept-language");
    assert_eq!(gateway.get(&target).await.status(), 200);
    for (tags, matched) in [
        ("\"v1\"", true),
        ("W/\"v1\"", true),
        ("\"x\", \"v1\"", true),
        ("*", true),
        ("\"v2\"", false),
    ] {
        for method in [reqwest::Method::GET, reqwest::Method::HEAD] {
            let response = gateway
                .client
                .request(method.clone(), gateway.url(&target))
                .header("if-none-match", tags)
                .send()
                .await
                .unwrap();
            let case = format!("{method} If-None-Match: {tags}");
            if matched {
                assert_eq!(response.status(), 304, "{case}");
                assert_eq!(
                    header(&response, "etag").as_deref(),
                    Some("\"v1\""),
                    "{case}"
                );
                assert_eq!(
                    header(&response, "cache-control").as_deref(),
                    Some("public, max-age=60"),
                    "{case}"
                );
                assert_eq!(
                    header(&response, "vary").as_deref(),
                    Some("accept-language"),
                    "{case}"
                );
                assert!(header(&response, "age").is_some(), "{case}");
                assert!(header(&response, "x-request-id").is_some(), "{case}");
                assert!(response.bytes().await.unwrap().is_empty(), "{case}");
            } else {
                assert_eq!(response.status(), 200, "{case}");
                assert_eq!(
                    header(&response, "etag").as_deref(),
                    Some("\"v1\""),
                    "{case}"
                );
            }
        }
    }
    assert_eq!(origin.hits(&target), 1);
}

/// The key is the target exactly as sent: `?a=1&b=2` and `?b=2&a=1` are two entries, each
/// stored.
#[tokio::test]
async fn query_orders_are_two_keys_each_stored() {
    let origin = Origin::start().await;
    let gateway = gateway_in_front_of_with(&origin.url, |_| {}).await;
    let ab = format!("/v1/news/articles?a=1&b=2&{PUBLIC}");
    let ba = format!("/v1/news/articles?b=2&a=1&{PUBLIC}");
    for _ in 0..3 {
        assert_eq!(gateway.get(&ab).await.status(), 200);
        assert_eq!(gateway.get(&ba).await.status(), 200);
    }
    assert_eq!(origin.hits(&ab), 1);
    assert_eq!(origin.hits(&ba), 1);
}

/// A `HEAD` before any `GET` is forwarded and stores nothing; a `HEAD` after a `GET` is answered
/// from it, with the `GET`'s headers (its `Content-Length`) and no body.
#[tokio::test]
async fn head_after_get_is_a_hit_and_get_after_head_is_not() {
    let origin = Origin::start().await;
    let gateway = gateway_in_front_of_with(&origin.url, |_| {}).await;
    let target = format!("/v1/news/organizations?{PUBLIC}");
    let head = gateway
        .client
        .head(gateway.url(&target))
        .send()
        .await
        .unwrap();
    assert_eq!(head.status(), 200);
    assert_eq!(origin.hits(&target), 1);
    let get = gateway.get(&target).await;
    assert_eq!(
        header(&get, "x-origin-n").as_deref(),
        Some("2"),
        "HEAD stored nothing"
    );
    let length = get.bytes().await.unwrap().len();
    let head = gateway
        .client
        .head(gateway.url(&target))
        .send()
        .await
        .unwrap();
    assert_eq!(head.status(), 200);
    assert_eq!(header(&head, "x-origin-n").as_deref(), Some("2"));
    assert_eq!(
        header(&head, "content-length"),
        Some(length.to_string()),
        "the GET's length"
    );
    assert!(head.bytes().await.unwrap().is_empty());
    assert_eq!(origin.hits(&target), 2);
}

/// Answers a shared cache must not store (RFC 9111 3, 5.2.2): not `public`, a lifetime of 0
/// (`max-age=0`, or an `s-maxage=0` that comes first), `no-cache`, `no-store`, `private`, a
/// 404 or a 500 even with `public, max-age`. And directive names in any case are the same
/// directives (RFC 9111 5.2: case-insensitive).
#[tokio::test]
async fn what_may_not_be_stored_is_never_served_from_the_cache() {
    let origin = Origin::start().await;
    let gateway = gateway_in_front_of_with(&origin.url, |_| {}).await;
    for cc in [
        "max-age=60",
        "public",
        "public,%20max-age=0",
        "public,%20s-maxage=0,%20max-age=60",
        "public,%20max-age=60,%20no-cache",
        "public,%20max-age=60,%20no-store",
        "public,%20max-age=60,%20private",
    ] {
        let target = format!("/v1/news/articles?cc={cc}");
        for _ in 0..2 {
            assert_eq!(gateway.get(&target).await.status(), 200, "{cc}");
        }
        assert_eq!(origin.hits(&target), 2, "{cc} was served from the cache");
    }
    for status in [404, 500] {
        let target = format!("/v1/news/articles?status={status}&{PUBLIC}");
        for _ in 0..2 {
            assert_eq!(gateway.get(&target).await.status(), status);
        }
        assert_eq!(origin.hits(&target), 2, "a {status} was stored");
    }
    let target = "/v1/news/articles?cc=PUBLIC,%20Max-Age=60";
    for _ in 0..2 {
        assert_eq!(gateway.get(target).await.status(), 200);
    }
    assert_eq!(
        origin.hits(target),
        1,
        "directive names are case-insensitive"
    );
}

/// A request with `Authorization` never gets the stored answer: an invalid token is 401 (the
/// stored public answer is not a way around it), a valid one gets the service's own answer, and
/// that answer is not stored for anonymous readers.
#[tokio::test]
async fn a_request_with_a_token_never_meets_the_stored_answer() {
    let origin = Origin::start().await;
    let gateway = gateway_in_front_of_with(&origin.url, |_| {}).await;
    let target = format!("/v1/news/articles?{PUBLIC}");
    assert_eq!(n_of(gateway.get(&target).await).await, 1);

    let mut expired = default_claims("ada");
    expired["exp"] = json!(1);
    for bad in [
        "Bearer not-a-token",
        &format!("Bearer {}", token_with_claims(expired)),
        "Basic eA==",
    ] {
        let response = gateway
            .client
            .get(gateway.url(&target))
            .header("authorization", bad)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 401, "{bad}");
        assert!(header(&response, "etag").is_none(), "{bad}");
    }
    let signed_in = gateway
        .client
        .get(gateway.url(&target))
        .bearer_auth(token("ada"))
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.status(), 200);
    assert!(header(&signed_in, "age").is_none());
    let body: Value = signed_in.json().await.unwrap();
    assert_eq!(body["n"], 2, "the service's own answer");
    assert!(body["authorization"].is_string());
    assert_eq!(
        n_of(gateway.get(&target).await).await,
        1,
        "the anonymous entry stays"
    );
    assert_eq!(origin.hits(&target), 2);
}

/// docs/gateway.md: the request's own `Cache-Control` (`no-cache`, `max-age=0`) and `Pragma` are
/// not obeyed by the shared cache (a spike any client could bypass would not be absorbed).
#[tokio::test]
async fn a_clients_no_cache_does_not_bypass_the_shared_cache() {
    let origin = Origin::start().await;
    let gateway = gateway_in_front_of_with(&origin.url, |_| {}).await;
    let target = format!("/v1/news/articles?{PUBLIC}");
    assert_eq!(gateway.get(&target).await.status(), 200);
    for (name, value) in [
        ("cache-control", "no-cache"),
        ("cache-control", "max-age=0"),
        ("pragma", "no-cache"),
    ] {
        let response = gateway
            .client
            .get(gateway.url(&target))
            .header(name, value)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(n_of(response).await, 1, "{name}: {value}");
    }
    assert_eq!(origin.hits(&target), 1);
}

/// An entry lives `max-age` seconds from the service's answer, not longer: with `max-age=1`
/// the next request 1.2 s later goes to the service again, and its answer starts a new entry
/// with no `Age`.
#[tokio::test]
async fn an_entry_is_not_served_past_its_max_age() {
    let origin = Origin::start().await;
    let gateway = gateway_in_front_of_with(&origin.url, |_| {}).await;
    let target = "/v1/news/articles?cc=public,%20max-age=1";
    assert_eq!(n_of(gateway.get(target).await).await, 1);
    assert_eq!(n_of(gateway.get(target).await).await, 1);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let again = gateway.get(target).await;
    assert_eq!(header(&again, "age"), None);
    assert_eq!(n_of(again).await, 2);
}

/// A `PURGE` (Varnish, nginx's `proxy_cache_purge`) is no method of any endpoint: 405, and the
/// stored answer stays (an anonymous client cannot empty the shared cache).
#[tokio::test]
async fn purge_is_405_and_drops_nothing() {
    let origin = Origin::start().await;
    let gateway = gateway_in_front_of_with(&origin.url, |_| {}).await;
    let target = format!("/v1/news/articles?{PUBLIC}");
    assert_eq!(n_of(gateway.get(&target).await).await, 1);
    let purge = gateway
        .client
        .request(
            reqwest::Method::from_bytes(b"PURGE").unwrap(),
            gateway.url(&target),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(purge.status(), 405);
    assert_eq!(n_of(gateway.get(&target).await).await, 1);
    assert_eq!(origin.hits(&target), 1);
}

/// docs/gateway.md: the services' own answers, their 503 `overloaded` with `Retry-After`
/// included, are passed to the client unchanged (status, `Retry-After`, problem body), and never
/// stored.
#[tokio::test]
async fn a_services_own_503_is_passed_on_unchanged() {
    let origin = Origin::start().await;
    let gateway = gateway_in_front_of_with(&origin.url, |_| {}).await;
    let target = format!("/v1/news/articles?status=503&retry_after=2&{PUBLIC}");
    for n in 1..=2 {
        let response = gateway.get(&target).await;
        assert_eq!(response.status(), 503);
        assert_eq!(header(&response, "retry-after").as_deref(), Some("2"));
        assert_eq!(
            header(&response, "content-type").as_deref(),
            Some("application/problem+json")
        );
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["n"], n, "the service's own body, not stored");
    }
}

/// A `GET` that carries a body is not a request the cache answers: its body reaches the service.
#[tokio::test]
async fn a_get_with_a_body_goes_to_the_service_with_its_body() {
    let origin = Origin::start().await;
    let gateway = gateway_in_front_of_with(&origin.url, |_| {}).await;
    let target = format!("/v1/news/articles?{PUBLIC}");
    assert_eq!(n_of(gateway.get(&target).await).await, 1);
    let with_body = gateway
        .client
        .get(gateway.url(&target))
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(with_body.status(), 200);
    assert_eq!(n_of(with_body).await, 2, "not answered from the cache");
}
