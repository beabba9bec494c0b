//! Issue 14 at lingo: bad tokens, large bodies, 405s, deadlines, load shedding and slow clients,
//! each answered with the status and `code` the contract gives.

use std::time::{Duration, Instant};

use lingo_service::Config;
use shared_auth::testing::{TestDatabase, auth_config, role_statements, token, until_shed};
use sqlx::PgConnection;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::helpers::{SEEDED_LEARNERS, TestApp, assert_problem, local, serve, session, spawn_app};

const SESSIONS: &str = "/v1/lingo/me/study-sessions";

/// A seeded database served with `adjust` applied to the configuration.
async fn spawn_configured(adjust: impl FnOnce(&mut Config)) -> TestApp {
    let db = TestDatabase::create().await;
    lingo_service::migrate(&db.url_for("lingo_owner"))
        .await
        .unwrap();
    lingo_service::seed_with(&db.url_for("lingo_pipeline"), SEEDED_LEARNERS)
        .await
        .unwrap();
    let mut config = Config::new(local(), db.url_for("lingo_app"), auth_config());
    adjust(&mut config);
    TestApp {
        address: serve(config).await,
        client: reqwest::Client::new(),
        db,
    }
}

/// A superuser connection holding an exclusive lock on `study_sessions` until it is dropped, so
/// a new session blocks inside its INSERT.
async fn lock_sessions(app: &TestApp) -> PgConnection {
    app.db.lock_table("lingo.study_sessions").await
}

async fn running_statements(admin: &mut PgConnection) -> i64 {
    role_statements(admin, "lingo_app", "state = 'active'").await
}

async fn statements_waiting_on_a_lock(admin: &mut PgConnection) -> i64 {
    role_statements(admin, "lingo_app", "wait_event_type = 'Lock'").await
}

/// Starts a session POST in the background (it blocks while `lock_sessions` holds).
fn post_in_background(app: &TestApp) -> tokio::task::JoinHandle<u16> {
    let request = app
        .client
        .post(app.url(SESSIONS))
        .bearer_auth(token("learner-held"))
        .json(&session("es", 60, 5, 5));
    tokio::spawn(async move { request.send().await.unwrap().status().as_u16() })
}

#[tokio::test]
async fn a_token_whose_sub_holds_a_nul_is_401_not_500() {
    let app = spawn_app().await;
    for path in ["/v1/lingo/me/xp", SESSIONS] {
        let response = app.get(path, Some(&token("learner\u{0}1"))).await;
        let challenge = response.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
        assert_problem(response, 401, "invalid_token").await;
    }
}

#[tokio::test]
async fn a_body_over_128_kib_is_413() {
    let app = spawn_app().await;
    let padding = " ".repeat(200 * 1024);
    let response = app
        .post_raw(
            SESSIONS,
            &token("learner-a"),
            &format!("{{{padding}}}"),
            None,
        )
        .await;
    assert_problem(response, 413, "payload_too_large").await;
}

#[tokio::test]
async fn a_405_names_the_allowed_methods() {
    let app = spawn_app().await;
    let response = app
        .client
        .delete(app.url("/v1/lingo/languages"))
        .send()
        .await
        .unwrap();
    assert!(response.headers().contains_key("allow"));
    let body = assert_problem(response, 405, "method_not_allowed").await;
    let detail = body["detail"].as_str().unwrap();
    assert!(
        detail.contains("GET") && detail.contains("HEAD"),
        "{detail}"
    );
}

#[tokio::test]
async fn a_request_past_its_deadline_is_503_timeout_and_its_statement_is_cancelled() {
    let app = spawn_configured(|config| config.request_timeout_ms = 1_000).await;
    let sessions_before = app.count("study_sessions").await;
    let mut lock = lock_sessions(&app).await;

    let started = Instant::now();
    let response = app
        .post_session(&token("learner-a"), &session("es", 60, 5, 5))
        .await;
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
         WHERE usename = 'lingo_app' AND state = 'active' AND datname = current_database()",
    )
    .fetch_all(&mut lock)
    .await
    .unwrap();
    assert_eq!(running, 0, "the timed-out statement still runs: {still:?}");
    drop(lock);

    // The timed-out transaction was rolled back: nothing half-written, and the service recovers.
    assert_eq!(app.count("study_sessions").await, sessions_before);
    let response = app
        .post_session(&token("learner-a"), &session("es", 60, 5, 5))
        .await;
    assert_eq!(response.status(), 201);
}

#[tokio::test]
async fn a_statement_that_starts_late_is_cancelled_at_the_request_deadline_not_after() {
    // One database connection: the second request gets it only when the first is cancelled at
    // its deadline (1.5 s), with a third of its own deadline left; its INSERT then waits on the
    // lock. The pools' statement_timeout alone would let that INSERT run until about 3.0 s.
    let app = spawn_configured(|config| {
        config.request_timeout_ms = 1_500;
        config.db_max_connections = 1;
        config.db_acquire_timeout_ms = 3_000;
    })
    .await;
    let mut lock = lock_sessions(&app).await;
    let first = post_in_background(&app);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let second = post_in_background(&app);

    assert_eq!(first.await.unwrap(), 503);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        running_statements(&mut lock).await,
        1,
        "the second request's INSERT waits on the lock"
    );
    assert_eq!(second.await.unwrap(), 503);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        running_statements(&mut lock).await,
        0,
        "the second INSERT outlived its request's deadline"
    );
}

#[tokio::test]
async fn past_the_in_flight_limit_requests_are_shed_at_once_but_health_answers() {
    let app = spawn_configured(|config| config.max_in_flight = 1).await;
    let lock = lock_sessions(&app).await;
    let held = post_in_background(&app);
    let response = until_shed(|| app.get("/v1/lingo/languages", None)).await;
    assert!(response.headers().contains_key("retry-after"));
    assert_problem(response, 503, "overloaded").await;
    // A shed `/me/*` request is still the caller's own answer.
    let mine = app.get("/v1/lingo/me/xp", Some(&token("learner-b"))).await;
    assert_eq!(mine.headers()["cache-control"], "private, no-store");
    assert_problem(mine, 503, "overloaded").await;
    for path in ["/healthz", "/readyz", "/metrics"] {
        assert_eq!(
            app.get(path, None).await.status(),
            200,
            "{path} is not shed"
        );
    }

    drop(lock);
    assert_eq!(held.await.unwrap(), 201, "the admitted request completes");
    assert_eq!(app.get("/v1/lingo/languages", None).await.status(), 200);
}

#[tokio::test]
async fn no_connection_free_in_time_is_503_overloaded() {
    let app = spawn_configured(|config| {
        config.db_max_connections = 1;
        config.db_acquire_timeout_ms = 300;
    })
    .await;
    let lock = lock_sessions(&app).await;
    let held = post_in_background(&app);
    let response = until_shed(|| app.get("/v1/lingo/languages", None)).await;
    assert!(response.headers().contains_key("retry-after"));
    assert_problem(response, 503, "overloaded").await;

    drop(lock);
    assert_eq!(held.await.unwrap(), 201);
    assert_eq!(app.get("/v1/lingo/languages", None).await.status(), 200);
}

/// A pool whose only connection stays busy for longer than the wait for one (and its slack) is
/// still busy, not unreachable: the background check reaches the database on a connection of
/// its own. It used to answer `database_unavailable` once the last hand-out was that old.
#[tokio::test]
async fn a_pool_busy_for_long_is_overloaded_not_unavailable() {
    let app = spawn_configured(|config| {
        config.db_max_connections = 1;
        config.db_acquire_timeout_ms = 300;
    })
    .await;
    let mut lock = lock_sessions(&app).await;
    let held = post_in_background(&app);
    // The background check's own `SELECT 1` may be running too: wait for the waiting write.
    let mut waiting = 0;
    for _ in 0..100 {
        waiting = statements_waiting_on_a_lock(&mut lock).await;
        if waiting == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(waiting, 1, "the write holds the only connection");
    tokio::time::sleep(Duration::from_millis(1800)).await;
    for _ in 0..3 {
        let response = app.get("/v1/lingo/languages", None).await;
        assert_problem(response, 503, "overloaded").await;
    }

    drop(lock);
    assert_eq!(held.await.unwrap(), 201);
}

/// RFC 9112: an HTTP/1.1 request needs exactly one `Host`, a host and optional port (HTTP/1.0 may
/// go without), an absolute target is an http URI, and chunked is the only transfer coding;
/// analytics tools call the service directly, so it judges as the gateway does.
#[tokio::test]
async fn an_http11_request_without_one_host_header_is_400() {
    let app = spawn_app().await;
    let host = app.address.trim_start_matches("http://").to_owned();
    let cases = [
        (
            "GET /v1/lingo/languages HTTP/1.1\r\nconnection: close\r\n\r\n",
            "400",
        ),
        (
            "GET /v1/lingo/languages HTTP/1.1\r\nhost: a\r\nhost: b\r\nconnection: close\r\n\r\n",
            "400",
        ),
        (
            "GET /v1/lingo/languages HTTP/1.1\r\nhost: a, b\r\nconnection: close\r\n\r\n",
            "400",
        ),
        (
            "GET /v1/lingo/languages HTTP/1.1\r\nhost: user@a\r\nconnection: close\r\n\r\n",
            "400",
        ),
        (
            "GET /v1/lingo/languages HTTP/1.1\r\nhost: a\r\ntransfer-encoding: gzip, chunked\r\nconnection: close\r\n\r\n0\r\n\r\n",
            "400",
        ),
        (
            "GET ftp://a/v1/lingo/languages HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n",
            "400",
        ),
        (
            "GET http://a/v1/lingo/languages HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n",
            "200",
        ),
        ("GET /v1/lingo/languages HTTP/1.0\r\n\r\n", "200"),
        (
            "GET /v1/lingo/languages HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n",
            "200",
        ),
        (
            "GET /v1/lingo/languages HTTP/1.1\r\nhost: [::1]:8081\r\nconnection: close\r\n\r\n",
            "200",
        ),
    ];
    for (request, status) in cases {
        let mut stream = tokio::net::TcpStream::connect(&host).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.unwrap();
        let answer = String::from_utf8_lossy(&answer);
        assert_eq!(&answer[9..12], status, "{request:?}: {answer}");
        if status == "400" {
            assert!(answer.contains("\"code\":\"bad_request\""), "{answer}");
        }
    }
}

/// A client that sends its request and then closes its sending side (HTTP/1.0 tools, `nc -N`)
/// still gets its answer.
#[tokio::test]
async fn a_request_followed_by_a_half_close_is_answered() {
    let app = spawn_app().await;
    let host = app.address.trim_start_matches("http://").to_owned();
    for _ in 0..5 {
        let mut stream = tokio::net::TcpStream::connect(&host).await.unwrap();
        let request = "GET /v1/lingo/languages HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
        stream.write_all(request.as_bytes()).await.unwrap();
        stream.shutdown().await.unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.unwrap();
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
}

#[tokio::test]
async fn a_half_sent_request_head_is_closed_while_others_are_served() {
    let app = spawn_configured(|config| config.header_read_timeout_ms = 500).await;
    let host = app.address.trim_start_matches("http://").to_owned();
    let mut slow = tokio::net::TcpStream::connect(&host).await.unwrap();
    slow.write_all(b"GET /v1/lingo/languages HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();

    assert_eq!(app.get("/v1/lingo/languages", None).await.status(), 200);

    let mut buffer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), slow.read_to_end(&mut buffer)).await;
    assert!(read.is_ok(), "the slow connection was not closed");
    assert_eq!(app.get("/v1/lingo/languages", None).await.status(), 200);
}

/// A body the service refuses (over 128 KiB, or not JSON, or sent to a route or with a method
/// that takes none) is still read to its end, while and after it answers, so the answer cannot be
/// lost to a connection reset (the gateway turned such a 413 into a 502 now and then) and the
/// connection carries the next request.
#[tokio::test]
async fn a_refused_body_is_read_to_its_end_and_the_connection_stays_usable() {
    let app = spawn_app().await;
    let token = token("learner-a");
    let cases: [(&str, &str, &str, Vec<u8>, &str); 6] = [
        (
            SESSIONS,
            "application/json",
            "Content-Length: 1048576",
            vec![b' '; 1024 * 1024],
            "413",
        ),
        (
            SESSIONS,
            "application/json",
            "Transfer-Encoding: chunked",
            chunked(&[b' '; 200 * 1024]),
            "413",
        ),
        (
            SESSIONS,
            "text/plain",
            "Content-Length: 65536",
            vec![b'x'; 64 * 1024],
            "415",
        ),
        (
            "/v1/lingo/languages",
            "application/json",
            "Content-Length: 65536",
            vec![b' '; 64 * 1024],
            "405",
        ),
        // The route and the method are judged before the body: 405 and 404, not 415.
        (
            "/v1/lingo/languages",
            "text/plain",
            "Content-Length: 1048576",
            vec![b'x'; 1024 * 1024],
            "405",
        ),
        (
            "/v1/lingo/me/levels",
            "text/plain",
            "Content-Length: 1048576",
            vec![b'x'; 1024 * 1024],
            "404",
        ),
    ];
    for (path, content_type, framing, body, status) in cases {
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: {content_type}\r\n{framing}\r\n\r\n"
        );
        let answers = send_then_get_languages(&app, head.as_bytes(), &body).await;
        let statuses: Vec<&str> = answers
            .match_indices("HTTP/1.1 ")
            .map(|(at, prefix)| &answers[at + prefix.len()..at + prefix.len() + 3])
            .collect();
        assert_eq!(statuses, [status, "200"], "{path} {content_type} {framing}");
    }
}

/// A service routes, then authenticates, then reads the body: a bad body does not hide a 405 or
/// a 401.
#[tokio::test]
async fn the_body_is_judged_after_the_route_the_method_and_the_token() {
    let app = spawn_app().await;
    let text = |request: reqwest::RequestBuilder| {
        request
            .header("content-type", "text/plain")
            .body("not json")
    };
    let response = text(app.client.post(app.url("/v1/lingo/languages")))
        .send()
        .await
        .unwrap();
    assert_problem(response, 405, "method_not_allowed").await;
    let response = text(app.client.post(app.url(SESSIONS)))
        .send()
        .await
        .unwrap();
    assert_problem(response, 401, "missing_token").await;
    let response = text(
        app.client
            .post(app.url(SESSIONS))
            .bearer_auth(token("learner-a")),
    )
    .send()
    .await
    .unwrap();
    assert_problem(response, 415, "unsupported_media_type").await;
}

/// `data` as one chunk of a chunked body, and the last chunk.
fn chunked(data: &[u8]) -> Vec<u8> {
    let mut body = format!("{:x}\r\n", data.len()).into_bytes();
    body.extend_from_slice(data);
    body.extend_from_slice(b"\r\n0\r\n\r\n");
    body
}

/// Sends a request (`head` and `body`) and then `GET /v1/lingo/languages` on one connection;
/// returns everything the service wrote back until it closed the connection.
async fn send_then_get_languages(app: &TestApp, head: &[u8], body: &[u8]) -> String {
    let host = app.address.trim_start_matches("http://").to_owned();
    let stream = tokio::net::TcpStream::connect(&host).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let write = async {
        writer.write_all(head).await?;
        writer.write_all(body).await?;
        writer
            .write_all(b"GET /v1/lingo/languages HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
    };
    let mut answers = Vec::new();
    let read = reader.read_to_end(&mut answers);
    // The writing half stays open until the service has closed the connection: a half-closed
    // connection would end it early.
    let both = tokio::time::timeout(Duration::from_secs(10), async { tokio::join!(write, read) });
    // A connection reset (the failure this guards against) shows as a missing second answer.
    let _ = both
        .await
        .expect("the service answered and closed the connection");
    drop(writer);
    String::from_utf8_lossy(&answers).into_owned()
}

/// A transaction of the runtime pool left idle past the statement limit (the request deadline) is
/// ended by the server: an abandoned one cannot hold locks, or the analytics export's horizon,
/// for long.
#[tokio::test]
async fn an_idle_transaction_is_ended_at_the_deadline() {
    let db = TestDatabase::create().await;
    lingo_service::migrate(&db.url_for("lingo_owner"))
        .await
        .unwrap();
    let pool = lingo_service::db::runtime_pool(
        &db.url_for("lingo_app"),
        1,
        Duration::from_secs(2),
        Duration::from_millis(200),
    )
    .unwrap();
    let mut transaction = pool.begin().await.unwrap();
    sqlx::query("SELECT 1")
        .execute(&mut *transaction)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    let after_idling = sqlx::query("SELECT 1").execute(&mut *transaction).await;
    assert!(after_idling.is_err(), "the idle transaction was left open");
}

/// A client that waits for `100 Continue` before sending its body, refused before the body is
/// wanted (no token), gets the refusal and is never invited to send the body.
#[tokio::test]
async fn a_refused_request_that_waits_for_100_continue_is_not_invited_to_send() {
    let app = spawn_app().await;
    let host = app.address.trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&host).await.unwrap();
    let head = format!(
        "POST {SESSIONS} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         Content-Length: 1048576\r\nExpect: 100-continue\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the connection was left open");
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 401"), "{text}");
    assert!(!text.contains("100 Continue"), "{text}");
    // The connection ends with this answer, and the answer says so.
    assert!(
        text.to_ascii_lowercase()
            .contains("\r\nconnection: close\r\n"),
        "{text}"
    );
}
