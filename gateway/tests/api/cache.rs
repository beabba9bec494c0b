//! The cache of public answers, over real HTTP, in front of an upstream that counts the requests
//! it gets per target and answers with the caching headers the query asks for:
//! `cc` (Cache-Control), `vary`, `cookie=1` (Set-Cookie), `status`, `sleep_ms`, `size` (a body of
//! that many bytes instead of the JSON), `chunked=1` (the body in 16 KiB pieces, no length),
//! `break=1` (a chunked body that breaks off after its first piece), `private_until=N`
//! (`Cache-Control: private` instead of `cc` on the target's first N requests), `location`,
//! `age` (the answer arrives with that `Age`, as from a cache behind the gateway), `no_etag=1`,
//! `hold=1` (the body's first KiB, then the rest once the test lets go of [`Counts::hold`]),
//! `length=1` (with `hold`: a `Content-Length`, which a body in pieces has not otherwise).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use futures_util::StreamExt as _;
use futures_util::future::join_all;
use serde_json::{Value, json};
use shared_auth::testing::token;

use crate::helpers::{
    TargetCounts, TestGateway, committed_document, gateway_in_front_of_with, problem, query_map,
    serve_origin,
};

#[derive(Clone, Default)]
struct Counts {
    /// Requests per target.
    by_target: TargetCounts,
    /// Requests that arrived with `If-None-Match`.
    conditional: Arc<Mutex<usize>>,
    /// While the test holds it for writing, `hold=1` bodies stop after their first KiB.
    hold: Arc<tokio::sync::RwLock<()>>,
}

struct Origin {
    url: String,
    counts: Counts,
}

impl Origin {
    async fn start() -> Self {
        let counts = Counts::default();
        let url = serve_origin(Router::new().fallback(answer).with_state(counts.clone())).await;
        Self { url, counts }
    }

    fn hits(&self, target: &str) -> usize {
        self.counts.by_target.of(target)
    }
}

/// The origin's route document: the committed news document, with comments also taken by
/// `POST` at the article's comments (a target both read and written).
fn document() -> Response {
    let mut document = committed_document("news");
    document["paths"]["/v1/news/articles/{article_id}/comments"]["post"] =
        json!({"security": [{"bearer": []}]});
    Response::builder()
        .header("content-type", "application/json")
        .body(Body::from(document.to_string()))
        .unwrap()
}

async fn answer(State(counts): State<Counts>, request: Request) -> Response {
    if request.uri().path() == "/v1/news/openapi.json" {
        return document();
    }
    let target = request.uri().path_and_query().unwrap().as_str().to_owned();
    let n = counts.by_target.count(&target);
    if request.headers().contains_key("if-none-match") {
        *counts.conditional.lock().unwrap() += 1;
    }
    let query = query_map(&request);
    if let Some(ms) = query.get("sleep_ms") {
        tokio::time::sleep(Duration::from_millis(ms.parse().unwrap())).await;
    }
    let status = query
        .get("status")
        .map_or(200, |status| status.parse().unwrap());
    let language = request
        .headers()
        .get("accept-language")
        .map(|v| v.to_str().unwrap().to_owned());
    // An error that is a problem is passed on as it is (any other is rewritten into one).
    let content_type = if status >= 400 {
        "application/problem+json"
    } else {
        "application/json"
    };
    let mut response = Response::builder()
        .status(StatusCode::from_u16(status).unwrap())
        .header("content-type", content_type)
        .header("x-request-id", format!("upstream-{n}"));
    if !query.contains_key("no_etag") {
        response = response.header("etag", format!("\"v{n}\""));
    }
    let private_until = query
        .get("private_until")
        .map_or(0, |until| until.parse().unwrap());
    if n <= private_until {
        response = response.header("cache-control", "private");
    } else if let Some(cc) = query.get("cc") {
        response = response.header("cache-control", cc.as_str());
    }
    if let Some(vary) = query.get("vary") {
        response = response.header("vary", vary.as_str());
    }
    if let Some(age) = query.get("age") {
        response = response.header("age", age.as_str());
    }
    if let Some(location) = query.get("location") {
        response = response.header("location", location.as_str());
    }
    if query.contains_key("cookie") {
        response = response.header("set-cookie", "session=1");
    }
    let body = match query.get("size").map(|size| size.parse::<usize>().unwrap()) {
        Some(size) => vec![b'x'; size],
        None => {
            serde_json::to_vec(&json!({"n": n, "target": target, "language": language})).unwrap()
        }
    };
    let body = if query.contains_key("hold") {
        if query.contains_key("length") {
            response = response.header("content-length", body.len());
        }
        let mut rest = bytes::Bytes::from(body);
        let start = rest.split_to(1024);
        let hold = counts.hold.clone();
        let rest = async move {
            let _go = hold.read().await;
            Ok::<_, std::io::Error>(rest)
        };
        let pieces = futures_util::stream::once(async { Ok(start) });
        Body::from_stream(pieces.chain(futures_util::stream::once(rest)))
    } else if query.contains_key("break") {
        // The break comes a moment after the first piece, which has gone out by then.
        let start = futures_util::stream::once(async {
            Ok::<_, std::io::Error>(bytes::Bytes::from_static(b"the start"))
        });
        let broken = futures_util::stream::once(async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Err(std::io::Error::other("the upstream broke off"))
        });
        Body::from_stream(start.chain(broken))
    } else if query.contains_key("chunked") {
        let pieces: Vec<Result<bytes::Bytes, std::io::Error>> = body
            .chunks(16 * 1024)
            .map(|piece| Ok(bytes::Bytes::copy_from_slice(piece)))
            .collect();
        Body::from_stream(futures_util::stream::iter(pieces))
    } else {
        Body::from(body)
    };
    response.body(body).unwrap()
}

const PUBLIC: &str = "cc=public,max-age=60";

async fn get(gateway: &TestGateway, target: &str) -> reqwest::Response {
    gateway.get(target).await
}

fn age(response: &reqwest::Response) -> Option<u64> {
    response
        .headers()
        .get("age")
        .map(|age| age.to_str().unwrap().parse().unwrap())
}

/// The value of an unlabelled gateway metric, or of the sample whose line starts with `name`.
async fn metric(gateway: &TestGateway, name: &str) -> f64 {
    let text = gateway.metrics().await;
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_burst_of_misses_for_one_url_reaches_the_upstream_once() {
    let origin = Origin::start().await;
    let gateway = gateway_in_front_of_with(&origin.url, |_| {}).await;
    let target = format!("/v1/news/articles/burst?{PUBLIC}&sleep_ms=300");

    let burst = (0..200).map(|_| async {
        let response = get(&gateway, &target).await;
        assert_eq!(response.status(), 200);
        response.json::<Value>().await.unwrap()
    });
    let bodies = join_all(burst).await;

    assert_eq!(
        origin.hits(&target),
        1,
        "one upstream request for the burst"
    );
    assert!(
        bodies.iter().all(|body| body["n"] == 1),
        "every answer is the one stored"
    );
    let waited = metric(&gateway, "gateway_answer_cache_total{result=\"coalesced\"}").await;
    let hits = metric(&gateway, "gateway_answer_cache_total{result=\"hit\"}").await;
    let misses = metric(&gateway, "gateway_answer_cache_total{result=\"miss\"}").await;
    assert_eq!(misses, 1.0);
    assert_eq!(waited + hits, 199.0);
    assert!(waited > 0.0, "the burst overlapped the upstream call");
}

#[tokio::test]
async fn waiters_go_upstream_themselves_when_the_leader_gets_nothing_storable() {
    let origin = Origin::start().await;
    let gateway = gateway_in_front_of_with(&origin.url, |_| {}).await;
    for query in [
        "cc=private&sleep_ms=300",
        "cc=public,max-age=60&status=503&sleep_ms=300",
    ] {
        let target = format!("/v1/news/articles/flight?{query}");
        let burst = (0..20).map(|_| async {
            let response = get(&gateway, &target).await;
            let status = response.status();
            let body: Value = response.json().await.unwrap();
            (status, body["n"].as_u64().unwrap())
        });
        let answers = join_all(burst).await;
        // Each got its own upstream answer: twenty distinct ones.
        let mut numbers: Vec<u64> = answers.iter().map(|(_, n)| *n).collect();
        numbers.sort_unstable();
        assert_eq!(numbers, (1..=20).collect::<Vec<u64>>(), "{query}");
        let expected = if query.contains("503") { 503 } else { 200 };
        assert!(
            answers.iter().all(|(status, _)| *status == expected),
            "{query}"
        );
        assert_eq!(origin.hits(&target), 20, "{query}");
    }
}

#[tokio::test]
async fn waiters_share_the_leaders_upstream_timeout_instead_of_waiting_it_out_again() {
    let origin = Origin::start().await;
    let gateway =
        gateway_in_front_of_with(&origin.url, |config| config.upstream_timeout_ms = 400).await;
    let target = format!("/v1/news/articles/stalled?{PUBLIC}&sleep_ms=2000");

    let burst = (0..8).map(|_| async {
        let response = get(&gateway, &target).await;
        let status = response.status();
        let body: Value = response.json().await.unwrap();
        (status, body["code"].clone())
    });
    for (status, code) in join_all(burst).await {
        assert_eq!(status, 504);
        assert_eq!(code, "upstream_timeout");
    }
    assert_eq!(
        origin.hits(&target),
        1,
        "the waiters got the leader's 504, none went upstream after it"
    );
}

#[tokio::test]
async fn a_waiter_is_answered_when_the_leaders_client_goes_away() {
    use tokio::io::AsyncWriteExt as _;
    let origin = Origin::start().await;
    let gateway = gateway_in_front_of_with(&origin.url, |_| {}).await;
    let target = format!("/v1/news/articles/abandoned?{PUBLIC}&sleep_ms=600");

    // The leader: a client that sends its request and hangs up before the answer.
    let mut leader = tokio::net::TcpStream::connect(gateway.addr).await.unwrap();
    let request = format!("GET {target} HTTP/1.1\r\nhost: gateway\r\n\r\n");
    leader.write_all(request.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let waiter = tokio::spawn({
        let request = gateway.client.get(gateway.url(&target));
        async move { request.send().await.unwrap() }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(leader);

    let started = std::time::Instant::now();
    let answer = waiter.await.unwrap();
    assert_eq!(answer.status(), 200);
    assert!(answer.json::<Value>().await.unwrap()["n"].is_u64());
    // Answered by the leader's stored answer or by its own upstream request, never left to
    // wait for the upstream timeout.
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn answers_that_are_personal_or_not_public_are_never_stored() {
    let origin = Origin::start().await;
    let gateway = gateway_in_front_of_with(&origin.url, |_| {}).await;
    for query in [
        "cc=private",
        "cc=no-store",
        "cc=private,no-store",
        "cc=public,max-age=60,no-store",
        "cc=public,max-age=60,private",
        "cc=public,max-age=60,no-cache",
        "cc=max-age=60",
        "cc=public,max-age=0",
        "cc=public,max-age=60,s-maxage=0",
        "cc=public,max-age=60&cookie=1",
        "cc=public,max-age=60&vary=*",
        "cc=public,max-age=60&status=404",
        "status=200",
    ] {
        let target = format!("/v1/news/articles/personal?{query}");
        for round in 1..=3 {
            let response = get(&gateway, &target).await;
            assert!(age(&response).is_none(), "{query}");
            let body: Value = response.json().await.unwrap();
            assert_eq!(
                body["n"], round,
                "{query}: answered by the upstream each time"
            );
        }
        assert_eq!(origin.hits(&target), 3, "{query}");
    }
}

/// A URL whose answer was not storable skips the single flight for a while (Varnish's
/// hit-for-miss), but an answer that is storable again is stored at once: the cache does not
/// stay bypassed for a URL that has become public.
#[tokio::test]
async fn a_url_whose_answer_becomes_public_is_stored_at_once() {
    let origin = Origin::start().await;
    let gateway = gateway_in_front_of_with(&origin.url, |_| {}).await;
    let target = format!("/v1/news/articles/changing?{PUBLIC}&private_until=1");
    let personal = get(&gateway, &target).await;
    assert_eq!(personal.headers()["cache-control"], "private");
    let public = get(&gateway, &target).await;
    assert!(age(&public).is_none());
    assert_eq!(public.json::<Value>().await.unwrap()["n"], 2);
    let stored = get(&gateway, &target).await;
    assert!(age(&stored).is_some(), "answered from the cache");
    assert_eq!(stored.json::<Value>().await.unwrap()["n"], 2);
    assert_eq!(origin.hits(&target), 2);
    let passed = metric(&gateway, "gateway_answer_cache_total{result=\"pass\"}").await;
    assert_eq!(passed, 1.0, "the second request skipped the single flight");
}

/// RFC 9111 4.4: a write that succeeded drops the stored answers of its target and of the
/// paths its `Location` and `Content-Location` name; one that failed changes nothing.
#[tokio::test]
async fn a_successful_write_drops_the_stored_answers_it_changed() {
    let origin = Origin::start().await;
    let gateway = gateway_in_front_of_with(&origin.url, |_| {}).await;
    let comments = format!("/v1/news/articles/a1/comments?{PUBLIC}");
    let article = format!("/v1/news/articles/a1?{PUBLIC}");
    let gateway = &gateway;
    let read = |target: String| async move {
        let response = get(gateway, &target).await;
        assert_eq!(response.status(), 200, "{target}");
        age(&response).is_some()
    };
    let write = |target: String| {
        let request = gateway.client.post(gateway.url(&target));
        async move {
            let response = request.bearer_auth(token("ada")).send().await.unwrap();
            response.status().as_u16()
        }
    };
    // The origin's document, read at start, adds the POST.
    while write("/v1/news/articles/a0/comments".into()).await == 405 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for target in [&comments, &article] {
        assert!(!read(target.clone()).await);
        assert!(read(target.clone()).await, "{target} stored");
    }

    // Refused by the service: nothing changed, nothing dropped.
    assert_eq!(write(format!("{comments}&status=403")).await, 403);
    assert!(read(comments.clone()).await);
    // A write to another target leaves the comments alone, but drops what its Location names.
    assert_eq!(
        write(format!("/v1/news/articles/a2/comments?location={article}")).await,
        200
    );
    assert!(read(comments.clone()).await, "another target's write");
    assert!(!read(article.clone()).await, "named by the Location");
    // A write to the target itself drops it.
    assert_eq!(write(comments.clone()).await, 200);
    assert!(!read(comments.clone()).await, "the write's own target");
    assert!(read(comments.clone()).await, "stored again");
}

#[tokio::test]
async fn requests_with_a_token_or_a_cookie_never_use_the_cache() {
    let origin = Origin::start().await;
    let gateway = gateway_in_front_of_with(&origin.url, |_| {}).await;
    let target = format!("/v1/news/articles/mine?{PUBLIC}");
    let anonymous = get(&gateway, &target).await;
    assert_eq!(anonymous.json::<Value>().await.unwrap()["n"], 1);

    let with_token = gateway
        .client
        .get(gateway.url(&target))
        .bearer_auth(token("ada"))
        .send()
        .await
        .unwrap();
    assert!(age(&with_token).is_none());
    assert_eq!(with_token.json::<Value>().await.unwrap()["n"], 2);
    let with_cookie = gateway
        .client
        .get(gateway.url(&target))
        .header("cookie", "session=1")
        .send()
        .await
        .unwrap();
    assert_eq!(with_cookie.json::<Value>().await.unwrap()["n"], 3);
    assert_eq!(origin.hits(&target), 3);

    // Nor does a request with a token fill the cache, even with a public answer.
    let fresh = format!("/v1/news/articles/first-with-token?{PUBLIC}");
    let with_token = gateway
        .client
        .get(gateway.url(&fresh))
        .bearer_auth(token("ada"))
        .send()
        .await
        .unwrap();
    assert_eq!(with_token.status(), 200);
    let anonymous = get(&gateway, &fresh).await;
    assert_eq!(anonymous.json::<Value>().await.unwrap()["n"], 2);
}

#[tokio::test]
async fn if_none_match_is_answered_with_304_from_the_stored_answer() {
    let origin = Origin::start().await;
    let gateway = gateway_in_front_of_with(&origin.url, |_| {}).await;
    let conditional = |target: String, tag: &'static str| {
        let request = gateway.client.get(gateway.url(&target));
        async move { request.header("if-none-match", tag).send().await.unwrap() }
    };

    let target = format!("/v1/news/articles/tagged?{PUBLIC}");
    let first = get(&gateway, &target).await;
    assert_eq!(first.headers()["etag"], "\"v1\"");
    let not_modified = conditional(target.clone(), "\"v1\"").await;
    assert_eq!(not_modified.status(), 304);
    assert_eq!(not_modified.headers()["etag"], "\"v1\"");
    assert_eq!(not_modified.headers()["cache-control"], "public,max-age=60");
    assert!(age(&not_modified).is_some());
    assert!(not_modified.bytes().await.unwrap().is_empty());
    // `*`: any stored answer is a current representation, with an ETag or without.
    let untagged = format!("/v1/news/articles/untagged?{PUBLIC}&no_etag=1");
    assert_eq!(get(&gateway, &untagged).await.status(), 200);
    for stored in [&target, &untagged] {
        let any = conditional(stored.clone(), "*").await;
        assert_eq!(any.status(), 304, "{stored}");
        assert!(age(&any).is_some(), "{stored}");
    }
    assert_eq!(origin.hits(&untagged), 1);
    let weak_or_listed = conditional(target.clone(), "\"x\", W/\"v1\"").await;
    assert_eq!(weak_or_listed.status(), 304);
    let other = conditional(target.clone(), "\"v0\"").await;
    assert_eq!(other.status(), 200);
    assert_eq!(other.json::<Value>().await.unwrap()["n"], 1);
    assert_eq!(origin.hits(&target), 1);

    // On a miss the upstream is asked for the whole answer (without the validator) to fill the
    // cache, and the client's validator is judged against it.
    let missed = format!("/v1/news/articles/tagged-on-a-miss?{PUBLIC}");
    let not_modified = conditional(missed.clone(), "\"v1\"").await;
    assert_eq!(not_modified.status(), 304);
    assert_eq!(*origin.counts.conditional.lock().unwrap(), 0);
    let stored = get(&gateway, &missed).await;
    assert!(age(&stored).is_some());
    assert_eq!(stored.json::<Value>().await.unwrap()["n"], 1);
    assert_eq!(origin.hits(&missed), 1);

    // An answer that is not stored is still judged against the validator the gateway held back:
    // a matching tag is 304, as the upstream itself would have answered.
    for target in [
        "/v1/news/articles/private-tagged?cc=private",
        "/v1/news/articles/large-tagged?cc=public,max-age=60&size=3000000",
    ] {
        let not_modified = conditional(target.to_owned(), "\"v1\"").await;
        assert_eq!(not_modified.status(), 304, "{target}");
        assert_eq!(not_modified.headers()["etag"], "\"v1\"", "{target}");
        assert!(age(&not_modified).is_none(), "{target}");
        assert!(not_modified.bytes().await.unwrap().is_empty(), "{target}");
        let changed = conditional(target.to_owned(), "\"v1\"").await;
        assert_eq!(
            changed.status(),
            200,
            "{target}: the second answer is tagged v2"
        );
    }
}

#[tokio::test]
async fn entries_expire_at_their_max_age_and_s_maxage_comes_first() {
    let origin = Origin::start().await;
    let gateway = gateway_in_front_of_with(&origin.url, |_| {}).await;
    let short = "/v1/news/articles/short?cc=public,max-age=1";
    let shared = "/v1/news/articles/shared?cc=public,max-age=1,s-maxage=60";
    for target in [short, shared] {
        assert_eq!(get(&gateway, target).await.status(), 200);
        let again = get(&gateway, target).await;
        assert!(age(&again).is_some_and(|age| age <= 1), "{target}");
        assert_eq!(origin.hits(target), 1, "{target}");
    }

    tokio::time::sleep(Duration::from_millis(1200)).await;
    let refetched = get(&gateway, short).await;
    assert!(age(&refetched).is_none());
    assert_eq!(refetched.json::<Value>().await.unwrap()["n"], 2);
    let kept = get(&gateway, shared).await;
    assert!(age(&kept).is_some_and(|age| age >= 1));
    assert_eq!(kept.json::<Value>().await.unwrap()["n"], 1);
}

/// An answer that arrives with an `Age` (from a cache behind the gateway) keeps it on its way to
/// the client that fetched it, and the stored copy counts on from it; only an answer the
/// service made for this request goes without one.
#[tokio::test]
async fn an_age_the_answer_arrived_with_is_passed_on_and_counted_on() {
    let origin = Origin::start().await;
    let gateway = gateway_in_front_of_with(&origin.url, |_| {}).await;
    let target = "/v1/news/articles/aged?cc=public,max-age=60&age=20";
    let first = get(&gateway, target).await;
    assert_eq!(age(&first), Some(20), "the upstream's Age, not dropped");
    let stored = get(&gateway, target).await;
    assert!(age(&stored).is_some_and(|age| (20..=21).contains(&age)));
    assert_eq!(origin.hits(target), 1);
}

/// RFC 9111 1.2.2: a lifetime larger than the cache can count with is taken as 2^31 s. An
/// upstream's `max-age=18446744073709551615` once overflowed the entry's expiry instant (a panic
/// that dropped the client's connection without an answer).
#[tokio::test]
async fn a_lifetime_too_large_to_count_is_kept_as_the_largest_one() {
    let origin = Origin::start().await;
    let gateway = gateway_in_front_of_with(&origin.url, |_| {}).await;
    for lifetime in ["18446744073709551615", "99999999999999999999999"] {
        let target = format!("/v1/news/articles/forever-{lifetime}?cc=public,max-age={lifetime}");
        let first = get(&gateway, &target).await;
        assert_eq!(first.status(), 200, "{lifetime}");
        assert!(age(&first).is_none(), "{lifetime}");
        let again = get(&gateway, &target).await;
        assert_eq!(again.status(), 200, "{lifetime}");
        assert_eq!(age(&again), Some(0), "{lifetime}: answered from the cache");
        assert_eq!(again.json::<Value>().await.unwrap()["n"], 1, "{lifetime}");
        assert_eq!(origin.hits(&target), 1, "{lifetime}");
    }
}

#[tokio::test]
async fn head_is_answered_from_a_stored_get_but_does_not_fill_the_cache() {
    let origin = Origin::start().await;
    let gateway = gateway_in_front_of_with(&origin.url, |_| {}).await;
    let target = format!("/v1/news/articles/head?{PUBLIC}");
    let body = get(&gateway, &target).await.bytes().await.unwrap();
    let head = gateway
        .client
        .head(gateway.url(&target))
        .send()
        .await
        .unwrap();
    assert_eq!(head.status(), 200);
    assert_eq!(
        head.headers()["content-length"],
        body.len().to_string().as_str()
    );
    assert!(age(&head).is_some());
    assert_eq!(origin.hits(&target), 1);

    let fresh = format!("/v1/news/articles/head-first?{PUBLIC}");
    let head = gateway
        .client
        .head(gateway.url(&fresh))
        .send()
        .await
        .unwrap();
    assert!(age(&head).is_none());
    assert_eq!(
        get(&gateway, &fresh).await.json::<Value>().await.unwrap()["n"],
        2
    );
}

#[tokio::test]
async fn vary_keeps_answers_for_different_request_headers_apart() {
    let origin = Origin::start().await;
    let gateway = gateway_in_front_of_with(&origin.url, |_| {}).await;
    let target = format!("/v1/news/articles/vary?{PUBLIC}&vary=Accept-Language");
    let in_language = |language: &'static str| {
        let request = gateway.client.get(gateway.url(&target));
        async move {
            let response = request
                .header("accept-language", language)
                .send()
                .await
                .unwrap();
            let cached = age(&response).is_some();
            let body: Value = response.json().await.unwrap();
            (body["language"].as_str().unwrap().to_owned(), cached)
        }
    };
    assert_eq!(in_language("de").await, ("de".to_owned(), false));
    assert_eq!(in_language("de").await, ("de".to_owned(), true));
    assert_eq!(in_language("fr").await, ("fr".to_owned(), false));
    assert_eq!(in_language("fr").await, ("fr".to_owned(), true));
    // One answer per URL is kept (the latest): German is fetched again, never served French.
    assert_eq!(in_language("de").await.0, "de");
    let none = get(&gateway, &target).await.json::<Value>().await.unwrap();
    assert_eq!(none["language"], Value::Null);
}

#[tokio::test]
async fn large_and_chunked_answers_are_passed_on_whole() {
    let origin = Origin::start().await;
    let gateway = gateway_in_front_of_with(&origin.url, |_| {}).await;
    // Over the largest stored body: streamed through, never stored.
    let large = format!("/v1/news/articles/large?{PUBLIC}&size=3000000&chunked=1");
    for round in 1..=2 {
        let response = get(&gateway, &large).await;
        assert!(age(&response).is_none());
        assert_eq!(response.bytes().await.unwrap().len(), 3_000_000);
        assert_eq!(origin.hits(&large), round);
    }
    // A chunked answer under the limit is stored from its pieces.
    let chunked = format!("/v1/news/articles/chunked?{PUBLIC}&size=100000&chunked=1");
    for cached in [false, true] {
        let response = get(&gateway, &chunked).await;
        assert_eq!(age(&response).is_some(), cached);
        assert_eq!(response.headers()["content-length"], "100000");
        assert_eq!(response.bytes().await.unwrap(), vec![b'x'; 100_000]);
    }
    assert_eq!(origin.hits(&chunked), 1);
    // A body that breaks off while the gateway reads it to store it is a 502 (nothing of it has
    // reached the client), and nothing is stored.
    let broken = format!("/v1/news/articles/broken?{PUBLIC}&break=1");
    for round in 1..=2 {
        let response = get(&gateway, &broken).await;
        assert_eq!(response.status(), 502);
        assert_eq!(problem(response).await["code"], "upstream_unavailable");
        assert_eq!(origin.hits(&broken), round);
    }
}

#[tokio::test]
async fn the_cache_stays_under_its_byte_limit_with_ten_thousand_urls() {
    const LIMIT: u64 = 256 * 1024;
    let origin = Origin::start().await;
    let gateway =
        gateway_in_front_of_with(&origin.url, |config| config.cache_max_bytes = LIMIT).await;
    let hot = format!("/v1/news/articles/front-page?{PUBLIC}&size=1000");
    let mut most = 0.0f64;
    for batch in 0..100 {
        assert_eq!(get(&gateway, &hot).await.status(), 200);
        let requests = (0..100).map(|index| {
            let target = format!("/v1/news/articles/u{batch}-{index}?{PUBLIC}&size=1000");
            let gateway = &gateway;
            async move {
                let response = get(gateway, &target).await;
                assert_eq!(response.status(), 200);
                assert_eq!(response.bytes().await.unwrap().len(), 1000);
            }
        });
        join_all(requests).await;
        if batch % 10 == 9 {
            let bytes = metric(&gateway, "gateway_answer_cache_bytes").await;
            assert!(bytes <= LIMIT as f64, "{bytes} bytes after batch {batch}");
            most = most.max(bytes);
        }
    }
    assert!(
        most > LIMIT as f64 / 2.0,
        "the cache was really filled: {most}"
    );
    let entries = metric(&gateway, "gateway_answer_cache_entries").await;
    assert!(
        (10.0..=LIMIT as f64 / 512.0).contains(&entries),
        "{entries}"
    );
    // A page read again and again (the front page) outlives the flood of pages read once.
    assert!(age(&get(&gateway, &hot).await).is_some());
    assert_eq!(origin.hits(&hot), 1);
}

#[tokio::test]
async fn hits_still_get_the_edges_headers_and_rate_limits() {
    let origin = Origin::start().await;
    let gateway = gateway_in_front_of_with(&origin.url, |config| {
        config.rate_limit_enabled = true;
        config.rate_limit_reads = 3;
        config.cors_allowed_origins = "https://app.example".parse().unwrap();
    })
    .await;
    let target = format!("/v1/news/articles/edge?{PUBLIC}");
    let mut ids = Vec::new();
    for remaining in ["2", "1", "0"] {
        let response = gateway
            .client
            .get(gateway.url(&target))
            .header("origin", "https://app.example")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let headers = response.headers();
        assert_eq!(headers["ratelimit-remaining"], remaining);
        assert_eq!(
            headers["access-control-allow-origin"],
            "https://app.example"
        );
        ids.push(headers["x-request-id"].to_str().unwrap().to_owned());
    }
    assert!(ids.iter().all(|id| !id.starts_with("upstream-")), "{ids:?}");
    ids.dedup();
    assert_eq!(ids.len(), 3, "each answer has its own request id");
    assert_eq!(get(&gateway, &target).await.status(), 429);
    assert_eq!(origin.hits(&target), 1);
}

#[tokio::test]
async fn a_cache_of_zero_bytes_is_off() {
    let origin = Origin::start().await;
    let gateway = gateway_in_front_of_with(&origin.url, |config| config.cache_max_bytes = 0).await;
    let target = format!("/v1/news/articles/off?{PUBLIC}");
    for round in 1..=2 {
        let response = get(&gateway, &target).await;
        assert!(age(&response).is_none());
        assert_eq!(response.json::<Value>().await.unwrap()["n"], round);
    }
}

/// The bytes of answers being read to be stored, from `/metrics`.
async fn filling(gateway: &TestGateway) -> f64 {
    metric(gateway, "gateway_answer_cache_filling_bytes").await
}

/// Waits until the origin has had a request for every one of `targets`.
async fn until_all_arrived(origin: &Origin, targets: &[String]) {
    for _ in 0..500 {
        if targets.iter().all(|target| origin.hits(target) > 0) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("not every request reached the origin");
}

/// The answers being read to be stored hold at most a quarter of the cache's size, all together:
/// many misses of distinct URLs at once (a client asking for every `?cursor=` page of a list),
/// whose bodies are slow to arrive, no longer hold one buffer each. Those that find no room are
/// streamed through uncached, whole and correct, and stored by a later request once there is room.
#[tokio::test]
async fn misses_beyond_the_fill_budget_are_streamed_through_and_stored_once_there_is_room() {
    const CACHE: u64 = 2 * 1024 * 1024;
    const BUDGET: f64 = (CACHE / 4) as f64;
    const SIZE: usize = 4096;
    let origin = Origin::start().await;
    let gateway =
        gateway_in_front_of_with(&origin.url, |config| config.cache_max_bytes = CACHE).await;
    // Three in four with a `Content-Length` (their bytes taken at once: 144 x 4 KiB is more than
    // the budget alone), the others in pieces (taken as they arrive).
    let targets: Vec<String> = (0..192)
        .map(|page| {
            let length = if page % 4 == 0 { "" } else { "&length=1" };
            format!("/v1/news/articles?cursor={page}&{PUBLIC}&size={SIZE}&hold=1{length}")
        })
        .collect();

    let held = origin.counts.hold.write().await;
    let clients: Vec<_> = targets
        .iter()
        .map(|target| {
            let request = gateway.client.get(gateway.url(target));
            tokio::spawn(async move {
                let response = request.send().await.unwrap();
                assert_eq!(response.status(), 200);
                response.bytes().await.unwrap()
            })
        })
        .collect();
    until_all_arrived(&origin, &targets).await;
    let mut highest = 0.0f64;
    for _ in 0..20 {
        let now = filling(&gateway).await;
        assert!(now <= BUDGET, "{now} bytes being read to be stored");
        highest = highest.max(now);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        highest > BUDGET / 2.0,
        "the fills were really buffered: {highest}"
    );
    // The budget is full (less than one page's room is left): a burst for one more page finds no
    // room either, and those waiting for its first request go to the origin on their own.
    let burst_target =
        format!("/v1/news/articles?cursor=burst&{PUBLIC}&size={SIZE}&hold=1&length=1");
    let burst: Vec<_> = (0..8)
        .map(|_| {
            let request = gateway.client.get(gateway.url(&burst_target));
            tokio::spawn(async move {
                let response = request.send().await.unwrap();
                assert_eq!(response.status(), 200);
                response.bytes().await.unwrap()
            })
        })
        .collect();
    for _ in 0..500 {
        if origin.hits(&burst_target) == 8 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(origin.hits(&burst_target), 8, "each went upstream itself");
    assert!(filling(&gateway).await <= BUDGET);
    drop(held);
    for client in clients.into_iter().chain(burst) {
        let body = client.await.unwrap();
        assert_eq!(body.len(), SIZE);
        assert!(body.iter().all(|&byte| byte == b'x'));
    }
    assert_eq!(
        filling(&gateway).await,
        0.0,
        "every fill gave its bytes back"
    );
    let unbuffered = metric(&gateway, "gateway_answer_cache_unbuffered_total").await - 8.0;
    assert!(unbuffered >= 16.0, "{unbuffered} streamed through");
    assert!(age(&get(&gateway, &burst_target).await).is_none());
    assert!(
        age(&get(&gateway, &burst_target).await).is_some(),
        "stored once there was room"
    );

    // The pages streamed through are stored by their next request; the others were stored.
    let mut fetched_again = 0;
    for target in &targets {
        let response = get(&gateway, target).await;
        if age(&response).is_none() {
            fetched_again += 1;
            assert_eq!(origin.hits(target), 2, "{target}");
        }
        assert_eq!(response.bytes().await.unwrap().len(), SIZE);
    }
    assert_eq!(f64::from(fetched_again), unbuffered);
    for target in &targets {
        let response = get(&gateway, target).await;
        assert!(age(&response).is_some(), "{target} is stored");
    }
    assert_eq!(filling(&gateway).await, 0.0);
}

/// A fill gives its bytes back however it ends: stored (also when its client went away while the
/// body was arriving: the gateway notices that only when it answers, and stores the answer for the
/// next client), broken off by the upstream, or over the size limit.
#[tokio::test]
async fn a_fill_gives_its_bytes_back_however_it_ends() {
    use tokio::io::AsyncWriteExt as _;
    let origin = Origin::start().await;
    let gateway = gateway_in_front_of_with(&origin.url, |_| {}).await;

    let held = origin.counts.hold.write().await;
    let mut gone = Vec::new();
    let mut targets = Vec::new();
    for (index, length) in ["", "&length=1"].iter().enumerate() {
        let target = format!("/v1/news/articles/gone-{index}?{PUBLIC}&size=100000&hold=1{length}");
        let mut client = tokio::net::TcpStream::connect(gateway.addr).await.unwrap();
        let request = format!("GET {target} HTTP/1.1\r\nhost: gateway\r\n\r\n");
        client.write_all(request.as_bytes()).await.unwrap();
        gone.push(client);
        targets.push(target);
    }
    until_all_arrived(&origin, &targets).await;
    let mut holding = 0.0;
    for _ in 0..100 {
        holding = filling(&gateway).await;
        if holding > 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(holding > 0.0, "the fills hold their bytes");
    drop(gone);
    drop(held);
    let mut released = false;
    for _ in 0..250 {
        if filling(&gateway).await == 0.0 {
            released = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        released,
        "the fills of clients that went away gave their bytes back"
    );
    for target in &targets {
        let response = get(&gateway, target).await;
        assert!(
            age(&response).is_some(),
            "{target} stored for the next client"
        );
        assert_eq!(response.bytes().await.unwrap().len(), 100_000);
        assert_eq!(origin.hits(target), 1);
    }

    for query in ["size=1000", "size=3000000&chunked=1", "break=1"] {
        let target = format!("/v1/news/articles/ends?{PUBLIC}&{query}");
        let _ = get(&gateway, &target).await.bytes().await;
        assert_eq!(filling(&gateway).await, 0.0, "{query}");
    }
}
