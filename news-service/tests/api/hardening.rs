//! Issue 14 at news: bad tokens, large bodies, 405s, deadlines, load shedding and slow clients,
//! each answered with the status and `code` the contract gives.

use std::time::{Duration, Instant};

use news_service::config::ServeConfig;
use reqwest::Method;
use serde_json::json;
use shared_auth::testing::{auth_config, role_statements, token, until_shed};
use sqlx::PgConnection;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::helpers::{TestApp, assert_problem, spawn_with_fixture, spawn_with_fixture_configured};

/// A superuser connection holding an exclusive lock on `likes` until it is dropped, so a like
/// blocks inside its INSERT.
async fn lock_likes(app: &TestApp) -> PgConnection {
    app.db.lock_table("news.likes").await
}

/// Starts a like in the background (it blocks while `lock_likes` holds); its status.
fn like_in_background(app: &TestApp) -> tokio::task::JoinHandle<reqwest::StatusCode> {
    let request = app
        .client
        .post(app.url("/articles/art-1/like"))
        .bearer_auth(token("u1"));
    tokio::spawn(async move { request.send().await.unwrap().status() })
}

/// Statements news_app is running right now.
async fn running_statements(admin: &mut PgConnection) -> i64 {
    role_statements(admin, "news_app", "state = 'active'").await
}

#[tokio::test]
async fn a_token_whose_sub_holds_a_nul_is_401_not_500() {
    let app = spawn_with_fixture().await;
    let nul = Some("reader\u{0}1");
    for (method, path) in [
        (Method::GET, "/me/bookmarks"),
        (Method::GET, "/articles/art-1"),
        (Method::POST, "/articles/art-1/like"),
    ] {
        let response = app.request(method.clone(), path, nul).await;
        assert!(
            response.headers()["www-authenticate"]
                .to_str()
                .unwrap()
                .contains("error=\"invalid_token\""),
            "{method} {path}"
        );
        assert_problem(response, 401, "invalid_token").await;
    }
}

#[tokio::test]
async fn the_longest_comment_in_emoji_escapes_fits_and_200_kib_does_not() {
    let app = spawn_with_fixture().await;
    // 10,000 characters, each written as a JSON surrogate pair: 120,000 bytes of text.
    let text = "\\ud83d\\ude00".repeat(10_000);
    let body = format!(r#"{{"article_id": "art-1", "text": "{text}"}}"#);
    let response = app
        .client
        .post(app.url("/comments"))
        .bearer_auth(token("u1"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let comment: serde_json::Value = response.json().await.unwrap();
    assert_eq!(comment["text"], "\u{1F600}".repeat(10_000));

    let huge = format!(
        r#"{{"article_id": "art-1", "text": "{}"}}"#,
        "a".repeat(200 * 1024)
    );
    let response = app
        .client
        .post(app.url("/comments"))
        .bearer_auth(token("u1"))
        .header("content-type", "application/json")
        .body(huge)
        .send()
        .await
        .unwrap();
    assert_problem(response, 413, "payload_too_large").await;
}

#[tokio::test]
async fn a_405_names_the_allowed_methods() {
    let app = spawn_with_fixture().await;
    let response = app.request(Method::DELETE, "/articles", None).await;
    let allow = response.headers()["allow"].to_str().unwrap().to_owned();
    assert!(allow.contains("GET"), "{allow}");
    let body = assert_problem(response, 405, "method_not_allowed").await;
    let detail = body["detail"].as_str().unwrap();
    assert!(
        detail.contains("GET") && detail.contains("HEAD"),
        "{detail}"
    );
}

#[tokio::test]
async fn a_request_past_its_deadline_is_503_timeout_and_its_statement_is_cancelled() {
    let app = spawn_with_fixture_configured(|config| config.request_timeout_ms = 1_000).await;
    let mut lock = lock_likes(&app).await;

    let started = Instant::now();
    let response = app.post("/articles/art-1/like", "u1").await;
    let elapsed = started.elapsed();
    assert!(response.headers().contains_key("retry-after"));
    assert_problem(response, 503, "timeout").await;
    assert!(
        elapsed < Duration::from_secs(4),
        "answered after {elapsed:?}"
    );

    // The lock is still held, so only statement_timeout can have ended the INSERT.
    let mut running = running_statements(&mut lock).await;
    for _ in 0..50 {
        if running == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        running = running_statements(&mut lock).await;
    }
    let still: Vec<(String, Option<String>)> = sqlx::query_as(
        "SELECT query, wait_event_type FROM pg_stat_activity
         WHERE usename = 'news_app' AND state = 'active' AND datname = current_database()",
    )
    .fetch_all(&mut lock)
    .await
    .unwrap();
    assert_eq!(running, 0, "the timed-out statement still runs: {still:?}");
    drop(lock);

    let response = app.post("/articles/art-1/like", "u1").await;
    assert_eq!(response.status(), 200, "the service recovers");
}

#[tokio::test]
async fn past_the_in_flight_limit_requests_are_shed_at_once_but_health_answers() {
    let app = spawn_with_fixture_configured(|config| config.max_in_flight = 1).await;
    let lock = lock_likes(&app).await;
    let held = like_in_background(&app);
    let response = until_shed(|| app.get("/articles", None)).await;
    assert!(response.headers().contains_key("retry-after"));
    assert_problem(response, 503, "overloaded").await;
    for path in ["/healthz", "/readyz", "/metrics"] {
        let response = app
            .client
            .get(format!("{}{path}", app.address))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path} is not shed");
    }

    drop(lock);
    assert_eq!(held.await.unwrap(), 200, "the admitted request completes");
    assert_eq!(app.get("/articles", None).await.status(), 200);
}

#[tokio::test]
async fn no_connection_free_in_time_is_503_overloaded() {
    let app = spawn_with_fixture_configured(|config| {
        config.db_max_connections = 1;
        config.db_acquire_timeout_ms = 300;
    })
    .await;
    let lock = lock_likes(&app).await;
    let held = like_in_background(&app);
    let response = until_shed(|| app.get("/articles", None)).await;
    assert!(response.headers().contains_key("retry-after"));
    assert_problem(response, 503, "overloaded").await;

    drop(lock);
    assert_eq!(held.await.unwrap(), 200);
    assert_eq!(app.get("/articles", None).await.status(), 200);
}

#[tokio::test]
async fn a_half_sent_request_head_is_closed_while_others_are_served() {
    let app = spawn_with_fixture_configured(|config| config.header_read_timeout_ms = 500).await;
    let host = app.address.trim_start_matches("http://").to_owned();
    let mut slow = tokio::net::TcpStream::connect(&host).await.unwrap();
    slow.write_all(b"GET /v1/news/articles HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();

    assert_eq!(app.get("/articles", None).await.status(), 200);

    let mut buffer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), slow.read_to_end(&mut buffer)).await;
    assert!(read.is_ok(), "the slow connection was not closed");
    assert_eq!(app.get("/articles", None).await.status(), 200);
}

#[tokio::test]
async fn the_limits_have_the_contract_defaults() {
    let config = ServeConfig::new("postgres://news_app@localhost/news", auth_config());
    assert_eq!(config.request_timeout_ms, 5_000);
    assert_eq!(config.header_read_timeout_ms, 10_000);
    assert!(config.db_acquire_timeout_ms < config.request_timeout_ms);
    assert_eq!(json!(config.max_in_flight), json!(256));
}

/// Like, bookmark and follow take no body, but a body sent anyway follows the rules of every
/// body: JSON only, not content-coded (415), at most 128 KiB whether its length is declared or it
/// comes in chunks (413). A small JSON body is ignored.
#[tokio::test]
async fn a_body_sent_to_a_bodyless_toggle_follows_the_body_rules() {
    let app = spawn_with_fixture().await;
    let toggles = [
        (Method::POST, "/articles/art-1/like"),
        (Method::DELETE, "/articles/art-1/bookmark"),
        (Method::POST, "/journalists/jrn-1/follow"),
    ];
    for (method, path) in toggles {
        let toggle = |content_type: &'static str| {
            app.client
                .request(method.clone(), app.url(path))
                .bearer_auth(token("u1"))
                .header("content-type", content_type)
        };
        let response = toggle("text/plain").body("hello").send().await.unwrap();
        assert_problem(response, 415, "unsupported_media_type").await;
        let coded = toggle("application/json").header("content-encoding", "gzip");
        let response = coded.body("{}").send().await.unwrap();
        assert_problem(response, 415, "unsupported_media_type").await;

        let huge = format!(r#"{{"padding": "{}"}}"#, "a".repeat(200 * 1024));
        let response = toggle("application/json").body(huge).send().await.unwrap();
        assert_problem(response, 413, "payload_too_large").await;
        let chunks = (0..300).map(|_| Ok::<_, std::io::Error>(vec![b' '; 1024]));
        let chunked = reqwest::Body::wrap_stream(futures_util::stream::iter(chunks));
        let response = toggle("application/json")
            .body(chunked)
            .send()
            .await
            .unwrap();
        assert_problem(response, 413, "payload_too_large").await;

        let response = toggle("application/json").body("{}").send().await.unwrap();
        assert_eq!(response.status(), 200, "{method} {path}");
    }
}
