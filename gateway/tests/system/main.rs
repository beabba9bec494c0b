//! The whole system in one process: real PostgreSQL, lingo-service and news-service on port 0,
//! and the gateway in front of them, called over real HTTP the way a client app calls it.
#![allow(clippy::unwrap_used)]

#[path = "../common/stack.rs"]
mod stack;

mod cache;
mod contract_review;
mod contract_review_bodies;
mod contract_review_cache;
mod contract_review_edges;
mod contract_review_head;
mod contract_review_idempotency;
mod contract_review_identity;
mod contract_review_openapi;
mod contract_review_paging;
mod contract_review_search;
mod openapi_examples;

use reqwest::{Client, StatusCode};
use serde_json::{Value, json};
use shared_auth::http::openapi::{OpenApi, merge};
use shared_auth::testing::{TestDatabase, token};

/// The running system: the gateway's base URL and the database behind it.
struct System {
    gateway: String,
    client: Client,
    _db: TestDatabase,
}

impl System {
    async fn start() -> Self {
        let stack = stack::start(Some(300)).await;
        Self {
            gateway: stack.gateway_url,
            client: Client::new(),
            _db: stack.db,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.gateway)
    }

    async fn get(&self, path: &str, who: Option<&str>) -> (StatusCode, Value) {
        let mut request = self.client.get(self.url(path));
        if let Some(sub) = who {
            request = request.bearer_auth(token(sub));
        }
        into_json(request.send().await.unwrap()).await
    }

    async fn post(&self, path: &str, who: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut request = self.client.post(self.url(path)).bearer_auth(token(who));
        if let Some(body) = body {
            request = request.json(&body);
        }
        into_json(request.send().await.unwrap()).await
    }
}

async fn into_json(response: reqwest::Response) -> (StatusCode, Value) {
    let status = response.status();
    let body = response.json().await.unwrap_or(Value::Null);
    (status, body)
}

#[tokio::test]
async fn a_learner_studies_and_sees_progress_through_the_gateway() {
    let system = System::start().await;

    let (status, languages) = system.get("/v1/lingo/languages", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(languages["count"].as_u64().unwrap() >= 5);
    assert_eq!(
        languages["count"],
        languages["data"].as_array().unwrap().len()
    );
    let code = languages["data"][0]["code"].as_str().unwrap().to_owned();

    let session = json!({"duration_seconds": 600, "phrases_seen": 10, "phrases_correct": 10, "language_code": code});
    let response = system
        .client
        .post(system.url("/v1/lingo/me/study-sessions"))
        .bearer_auth(token("journey-learner"))
        .json(&session)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let location = response.headers()["location"].to_str().unwrap().to_owned();
    let (_, created) = into_json(response).await;
    assert_eq!(
        created["xp_awarded"], 25,
        "10 + 10 correct + 5 for a perfect session"
    );

    // The Location header resolves through the gateway.
    let (status, fetched) = system.get(&location, Some("journey-learner")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(fetched["id"], created["id"]);
    // Another learner cannot see it.
    let (status, problem) = system.get(&location, Some("someone-else")).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("study_session_not_found"))
    );

    let (status, xp) = system.get("/v1/lingo/me/xp", Some("journey-learner")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(xp["total_xp"], 25);
    assert_eq!(xp["learner_id"], "journey-learner");
    let (_, progress) = system
        .get("/v1/lingo/me/progress", Some("journey-learner"))
        .await;
    assert_eq!(progress["count"], 1);
    assert_eq!(progress["current_streak_days"], 1);
}

#[tokio::test]
async fn a_reader_likes_comments_and_follows_through_the_gateway() {
    let system = System::start().await;

    let (status, page) = system.get("/v1/news/articles?limit=2", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(page["count"], 2);
    assert!(
        page["data"][0]["viewer"].is_null(),
        "anonymous readers get viewer: null"
    );
    let article = page["data"][0]["id"].as_str().unwrap().to_owned();
    let journalist = page["data"][0]["journalist_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let (status, liked) = system
        .post(
            &format!("/v1/news/articles/{article}/like"),
            "reader-1",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        liked,
        json!({"article_id": article, "liked": true, "like_count": 1})
    );

    let (status, comment) = system
        .post(
            "/v1/news/comments",
            "reader-1",
            Some(json!({"article_id": article, "text": "  First!  "})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(comment["text"], "First!");
    let (status, reply) = system
        .post(
            "/v1/news/comments",
            "reader-2",
            Some(json!({"article_id": article, "text": "Welcome", "parent_id": comment["id"]})),
        )
        .await;
    assert_eq!(
        (status, reply["depth"].as_u64()),
        (StatusCode::CREATED, Some(1))
    );

    let (_, thread) = system
        .get(&format!("/v1/news/articles/{article}/comments"), None)
        .await;
    let ids: Vec<&Value> = thread["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["id"])
        .collect();
    assert_eq!(ids, vec![&comment["id"], &reply["id"]]);

    let (_, mine) = system
        .get(&format!("/v1/news/articles/{article}"), Some("reader-1"))
        .await;
    assert_eq!(mine["viewer"]["liked"], true);
    assert_eq!(mine["comment_count"], 2);

    let (status, _) = system
        .post(
            &format!("/v1/news/journalists/{journalist}/follow"),
            "reader-1",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, feed) = system
        .get("/v1/news/me/feed?limit=5", Some("reader-1"))
        .await;
    assert!(feed["count"].as_u64().unwrap() >= 1);
    let by_followed = |a: &Value| a["journalist_id"] == journalist.as_str();
    assert!(feed["data"].as_array().unwrap().iter().all(by_followed));
}

#[tokio::test]
async fn the_front_door_refuses_and_identifies_requests() {
    let system = System::start().await;

    let response = system
        .client
        .get(system.url("/v1/lingo/me/xp"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        response.headers()["www-authenticate"],
        "Bearer realm=\"lingo-news\""
    );
    assert_eq!(
        response.headers()["content-type"],
        "application/problem+json"
    );
    assert!(response.headers().contains_key("x-request-id"));
    let problem: Value = response.json().await.unwrap();
    assert_eq!(problem["code"], "missing_token");

    let response = system
        .client
        .get(system.url("/v1/news/articles/does-not-exist"))
        .header("x-request-id", "journey-123")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_eq!(response.headers()["x-request-id"], "journey-123");
    let problem: Value = response.json().await.unwrap();
    assert_eq!(problem["code"], "article_not_found");
    assert_eq!(
        problem["request_id"], "journey-123",
        "the service saw the id the client sent"
    );

    let (status, problem) = system.get("/v1/elsewhere", None).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("not_found"))
    );
}

/// The merged document the gateway serves is generated from the services' code; the committed
/// `openapi.json` must equal it. To refresh it after an API change:
/// `UPDATE_OPENAPI=1 cargo test -p gateway --test system committed_openapi`.
#[test]
fn committed_openapi_document_matches_the_code() {
    let generated =
        shared_auth::http::openapi::merge([lingo_service::openapi(), news_service::openapi()]);
    let generated = serde_json::to_string_pretty(&generated).unwrap() + "\n";
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../openapi.json");
    if std::env::var_os("UPDATE_OPENAPI").is_some() {
        std::fs::write(path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(path).unwrap();
    assert!(
        committed == generated,
        "openapi.json differs from what the code generates; run \
         UPDATE_OPENAPI=1 cargo test -p gateway --test system committed_openapi"
    );
    assert_eq!(
        gateway::docs::OPENAPI_JSON,
        committed,
        "the gateway binary embeds the committed file"
    );
}

/// Every body limit the document states is the one the services enforce.
#[test]
fn the_document_states_the_services_body_limit() {
    let limit = format!("{} KiB", shared_auth::http::stack::MAX_BODY_BYTES / 1024);
    let document =
        shared_auth::http::openapi::merge([lingo_service::openapi(), news_service::openapi()]);
    let text = serde_json::to_string(&document).unwrap();
    let stated: Vec<&str> = text
        .match_indices(" KiB")
        .map(|(at, _)| {
            let digits = text[..at]
                .rfind(|c: char| !c.is_ascii_digit())
                .map_or(0, |i| i + 1);
            &text[digits..at + 4]
        })
        .collect();
    assert!(!stated.is_empty(), "the document states no body limit");
    assert!(
        stated.iter().all(|s| *s == limit),
        "{stated:?}, expected {limit}"
    );
}

/// Once the gateway has read both services' documents, `/openapi.json` is their merge, made from
/// what they publish: byte for byte the committed `openapi.json` when they are this build's.
#[tokio::test]
async fn the_gateway_serves_the_merged_document_and_the_docs_page() {
    let stack = stack::start_with(Some(30), |config| config.routes_refresh_secs = 1).await;
    let published = [
        format!("{}/v1/lingo/openapi.json", stack.lingo_url),
        format!("{}/v1/news/openapi.json", stack.news_url),
    ];
    let system = System {
        gateway: stack.gateway_url.clone(),
        client: Client::new(),
        _db: stack.db,
    };
    // Read twice: the second read starts after the first one's documents were taken.
    wait_for_route_documents(&system, 2).await;
    let response = system
        .client
        .get(system.url("/openapi.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "application/json");
    let etag = response.headers()["etag"].clone();
    let served = response.text().await.unwrap();
    let committed = include_str!("../../../openapi.json");
    assert!(
        served == committed,
        "the merge of the services' published documents differs from openapi.json"
    );
    // Those are also the bytes the gateway starts with (the compiled-in document), so check on
    // its own that what the services publish reads back into that very merge, as the gateway
    // reads it (the api test `learned_reference` shows the gateway serving what it read).
    let mut read_back = Vec::new();
    for url in published {
        let bytes = system.client.get(url).send().await.unwrap().bytes().await;
        read_back.push(serde_json::from_slice::<OpenApi>(&bytes.unwrap()).unwrap());
    }
    let merged = serde_json::to_string_pretty(&merge(read_back)).unwrap() + "\n";
    assert!(
        merged == committed,
        "the services' documents do not read back"
    );
    let document: Value = serde_json::from_str(&served).unwrap();
    assert!(document["openapi"].as_str().unwrap().starts_with("3.1"));
    let paths = document["paths"].as_object().unwrap();
    assert!(paths.contains_key("/v1/lingo/me/study-sessions"));
    assert!(paths.contains_key("/v1/news/articles/{article_id}/comments"));
    let again = system
        .client
        .get(system.url("/openapi.json"))
        .header("if-none-match", etag.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(again.headers()["etag"], etag);

    let page = system.client.get(system.url("/docs")).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let html = page.text().await.unwrap();
    assert!(html.contains("/docs/swagger-ui-bundle.js") && html.contains("/openapi.json"));
    for asset in ["/docs/swagger-ui-bundle.js", "/docs/swagger-ui.css"] {
        let response = system.client.get(system.url(asset)).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{asset}");
        assert!(
            response.bytes().await.unwrap().len() > 10_000,
            "{asset} is served from the binary"
        );
    }
}

/// Waits until the gateway has read each group's document at least `reads` times (its metric).
async fn wait_for_route_documents(system: &System, reads: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let text = system
            .client
            .get(system.url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let ok = |group: &str| {
            let line =
                format!("gateway_route_documents_total{{group=\"{group}\",outcome=\"ok\"}} ");
            text.lines()
                .find_map(|l| l.strip_prefix(&line)?.trim().parse::<u64>().ok())
                .unwrap_or(0)
        };
        if ok("lingo") >= reads && ok("news") >= reads {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{text}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// With lingo down the gateway stays ready and news is served; lingo's routes answer problems; when
/// lingo comes back everything recovers without restarting the gateway.
#[tokio::test]
async fn one_service_down_never_takes_the_other_with_it() {
    let mut stack = stack::start_with(Some(30), |config| {
        config.upstream_probe_interval_secs = 1;
        config.upstream_cooldown_secs = 1;
        // Otherwise the languages stored by the first read would be served while lingo is down.
        config.cache_max_bytes = 0;
    })
    .await;
    let client = Client::new();
    let gateway = stack.gateway_url.clone();
    let url = |path: &str| format!("{gateway}{path}");
    let get = |path: String| client.get(path).send();
    assert_eq!(get(url("/v1/lingo/languages")).await.unwrap().status(), 200);

    stack.stop_lingo().await;
    // Refused on every replica (502), then marked down (503 with Retry-After); never 200, never 500.
    let mut seen = Vec::new();
    for _ in 0..4 {
        let response = get(url("/v1/lingo/languages")).await.unwrap();
        let status = response.status();
        let retry_after = response.headers().get("retry-after").cloned();
        let (_, body) = into_json(response).await;
        assert_eq!(body["code"], "upstream_unavailable", "{status} {body}");
        match status {
            StatusCode::BAD_GATEWAY => {}
            StatusCode::SERVICE_UNAVAILABLE => assert!(retry_after.is_some()),
            other => panic!("lingo down answered {other}"),
        }
        seen.push(status);
    }
    assert!(seen.contains(&StatusCode::SERVICE_UNAVAILABLE), "{seen:?}");
    let ready = get(url("/readyz")).await.unwrap();
    assert_eq!(ready.status(), 200, "the gateway stays ready");
    let news = get(url("/v1/news/articles?limit=2")).await.unwrap();
    assert_eq!(news.status(), 200, "news is served");

    stack.restart_lingo().await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let status = get(url("/v1/lingo/languages")).await.unwrap().status();
        if status == StatusCode::OK {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "lingo never came back: {status}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(get(url("/readyz")).await.unwrap().status(), 200);
    assert_eq!(
        get(url("/v1/news/articles?limit=2"))
            .await
            .unwrap()
            .status(),
        200
    );
}

/// A chunked body over the gateway's 1 MiB limit is refused by the gateway, even though the
/// service stops reading much earlier at its own limit.
/// The gateway reads both services' own documents (`/v1/<group>/openapi.json`) and takes them:
/// what the services publish is something the gateway can route by.
#[tokio::test]
async fn the_gateway_learns_its_routes_from_both_services_documents() {
    let stack = stack::start(None).await;
    let client = Client::new();
    let metrics_url = format!("{}/metrics", stack.gateway_url);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let text = client
            .get(&metrics_url)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let read = |group: &str, outcome: &str| {
            let line = format!(
                "gateway_route_documents_total{{group=\"{group}\",outcome=\"{outcome}\"}} "
            );
            text.lines().any(|l| l.starts_with(&line))
        };
        for group in ["lingo", "news"] {
            for outcome in ["invalid", "wrong_prefix", "too_large"] {
                assert!(!read(group, outcome), "{group}: {outcome}\n{text}");
            }
        }
        if read("lingo", "ok") && read("news", "ok") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{text}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let xp = client
        .get(format!("{}/v1/lingo/me/xp", stack.gateway_url))
        .send()
        .await
        .unwrap();
    assert_eq!(
        xp.status(),
        StatusCode::UNAUTHORIZED,
        "required, as lingo documents it"
    );
}

/// The only lingo replica is killed and started again on its port: the gateway serves lingo
/// again as soon as the service is ready (it tries a replica marked down rather than refusing
/// without trying, and probes it every 0.5 s), not after its cooldown or full probe interval.
#[tokio::test]
async fn the_only_replica_restarted_is_served_within_a_second_of_being_ready() {
    // Without the cache: a stored answer would hide the outage and the return alike.
    let mut stack = stack::start_with(None, |config| config.cache_max_bytes = 0).await;
    let client = Client::new();
    let languages = format!("{}/v1/lingo/languages", stack.gateway_url);
    assert_eq!(client.get(&languages).send().await.unwrap().status(), 200);

    stack.stop_lingo().await;
    for _ in 0..3 {
        let status = client.get(&languages).send().await.unwrap().status();
        assert!(
            status == StatusCode::BAD_GATEWAY || status == StatusCode::SERVICE_UNAVAILABLE,
            "{status}"
        );
    }
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;

    stack.restart_lingo().await;
    let ready = std::time::Instant::now();
    loop {
        let status = client.get(&languages).send().await.unwrap().status();
        if status == StatusCode::OK {
            break;
        }
        assert!(
            ready.elapsed() < std::time::Duration::from_secs(3),
            "lingo not served 3 s after it was ready: {status}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    println!(
        "lingo-service restarted: served through the gateway {:?} after it was ready",
        ready.elapsed()
    );
}

#[tokio::test]
async fn a_chunked_body_over_1_mib_is_413_from_the_gateway() {
    let system = System::start().await;
    let chunks = futures_util::stream::iter(
        (0..32).map(|_| Ok::<_, std::io::Error>(bytes::Bytes::from(vec![b' '; 64 * 1024]))),
    );
    let response = system
        .client
        .post(system.url("/v1/news/comments"))
        .bearer_auth(token("ada"))
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(chunks))
        .send()
        .await
        .unwrap();
    let (status, body) = into_json(response).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert_eq!(body["code"], "payload_too_large");
}

/// A service routes before it authenticates: a method a route does not take is 405, a path that
/// is no route is 404, token or not. Through the gateway, which refuses token-only paths itself,
/// the answer must be the same: the service's 404 or 405 where it refuses by route or method,
/// and the same 401 where it refuses for the token. Every path of the document is tried (and a few that
/// are no route), without a token and with a broken one.
#[tokio::test]
async fn wrong_methods_and_unknown_paths_get_the_services_answer_not_a_401() {
    let stack = stack::start(None).await;
    let client = Client::new();
    let document: Value = serde_json::from_str(include_str!("../../../openapi.json")).unwrap();
    let documented = document["paths"].as_object().unwrap().keys();
    let no_route = [
        "/v1/lingo/me",
        "/v1/lingo/me/levels",
        "/v1/lingo/analytics",
        "/v1/news/me",
        "/v1/news/me/likes",
        "/v1/news/articles/a1/share",
        // Odd spellings of endpoints: no endpoint at either.
        "/v1/lingo/me/xp/",
        "/v1/news//me/feed",
        "/v1/news/m%65/feed",
        "/v1/lingo/analytics/progress/",
    ];
    let paths = documented
        .map(|path| path.replace(['{', '}'], ""))
        .chain(no_route.map(str::to_owned));
    let mut compared = 0;
    for path in paths {
        let service = if path.starts_with("/v1/lingo") {
            &stack.lingo_url
        } else {
            &stack.news_url
        };
        for method in ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"] {
            for authorization in [None, Some("Bearer not-a-token")] {
                let ask = |base: &str| {
                    let mut request =
                        client.request(method.parse().unwrap(), format!("{base}{path}"));
                    if let Some(value) = authorization {
                        request = request.header("authorization", value);
                    }
                    request.send()
                };
                let direct = routing_answer(ask(service).await.unwrap()).await;
                // Routing and token refusals must be the same; anything the service answers
                // past them (a resource's 404, a 400 about the body) needs the request itself.
                let refused = matches!(direct.0, 401 | 405) || direct.2 == "not_found";
                if !refused {
                    continue;
                }
                let through = routing_answer(ask(&stack.gateway_url).await.unwrap()).await;
                assert_eq!(through, direct, "{method} {path} {authorization:?}");
                compared += 1;
            }
        }
    }
    assert!(compared > 100, "only {compared} answers compared");
}

/// What routing decides: the status, the `Allow` header and the problem's code and detail.
async fn routing_answer(response: reqwest::Response) -> (u16, String, String, String) {
    let status = response.status().as_u16();
    let allow = response
        .headers()
        .get("allow")
        .map(|value| value.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let problem: Value = response.json().await.unwrap_or(Value::Null);
    let text = |field: &str| problem[field].as_str().unwrap_or_default().to_owned();
    (status, allow, text("code"), text("detail"))
}

/// Sends one raw HTTP/1.1 request head to the gateway and returns the whole answer.
async fn raw(system: &System, head: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = system.gateway.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let request = format!("{head}host: {address}\r\nconnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

/// What the gateway accepts, the service behind it accepts too: a head with as many fields as
/// the gateway takes is not refused by the service for the fields the gateway adds to it.
#[tokio::test]
async fn a_request_with_the_most_header_fields_the_gateway_takes_reaches_the_service() {
    let system = System::start().await;
    // 98 of these, plus `host` and `connection`: the gateway's 100.
    let fields: String = (0..98).map(|n| format!("x-field-{n}: {n}\r\n")).collect();
    let answer = raw(
        &system,
        &format!("GET /v1/news/articles?limit=1 HTTP/1.1\r\n{fields}"),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

/// The request id reaches the service even when a `Connection` header names it (which makes
/// it hop-by-hop to a proxy that follows the letter): the gateway forwards its own id.
#[tokio::test]
async fn the_request_id_reaches_the_service_even_when_connection_names_it() {
    let system = System::start().await;
    let answer = raw(
        &system,
        "GET /v1/news/articles/does-not-exist HTTP/1.1\r\nx-request-id: journey-456\r\n\
         connection: x-request-id\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    assert!(
        answer.contains("\"request_id\":\"journey-456\""),
        "the service saw another id: {answer}"
    );
}
