//! `Idempotency-Key` on `POST /me/study-sessions`: replay, reuse with another body, in flight.

use std::time::{Duration, Instant};

use serde_json::Value;
use shared_auth::testing::token;
use sqlx::Connection;

use crate::helpers::{assert_problem, session, spawn_app};

const SESSIONS: &str = "/v1/lingo/me/study-sessions";

#[tokio::test]
async fn the_same_key_twice_replays_the_first_response() {
    let app = spawn_app().await;
    let learner = token("learner-idem");
    let body = session("es", 120, 7, 7).to_string();
    let first = app.post_raw(SESSIONS, &learner, &body, Some("key-1")).await;
    assert_eq!(first.status(), 201);
    assert!(first.headers().get("idempotency-replayed").is_none());
    let first_location = first.headers()["location"].clone();
    let first_body = first.bytes().await.unwrap();

    // Same key, same body (whitespace and key order differ): the stored answer, byte for byte.
    let reordered = r#"{ "language_code": "es", "phrases_correct": 7,
                         "phrases_seen": 7, "duration_seconds": 120 }"#;
    for repeat in [body.as_str(), reordered] {
        let again = app
            .post_raw(SESSIONS, &learner, repeat, Some("key-1"))
            .await;
        assert_eq!(again.status(), 201);
        assert_eq!(again.headers()["idempotency-replayed"], "true");
        assert_eq!(again.headers()["location"], first_location);
        assert!(
            again.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("application/json")
        );
        assert_eq!(again.bytes().await.unwrap(), first_body);
    }
    assert_eq!(app.count("study_sessions").await, 1);
    let xp: Value = app
        .get("/v1/lingo/me/xp", Some(&learner))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(xp["total_xp"], 22, "counted once: 10 + 7 + 5");

    // Same key with another body: 422, nothing written.
    let other = session("es", 120, 7, 6).to_string();
    let response = app
        .post_raw(SESSIONS, &learner, &other, Some("key-1"))
        .await;
    assert_problem(response, 422, "idempotency_key_reused").await;
    assert_eq!(app.count("study_sessions").await, 1);

    // Keys are scoped to the caller: another learner's "key-1" is a new request.
    let response = app
        .post_raw(SESSIONS, &token("someone-else"), &body, Some("key-1"))
        .await;
    assert_eq!(response.status(), 201);
    assert!(response.headers().get("idempotency-replayed").is_none());
    assert_eq!(app.count("study_sessions").await, 2);

    // A malformed key is a bad header.
    for bad in ["has space", &"k".repeat(256)] {
        let response = app.post_raw(SESSIONS, &learner, &body, Some(bad)).await;
        assert_problem(response, 400, "invalid_idempotency_key").await;
    }
}

#[tokio::test]
async fn a_repeat_while_the_first_is_in_flight_is_409() {
    let app = spawn_app().await;
    let learner = token("learner-inflight");
    let body = session("fr", 60, 5, 5).to_string();

    // Hold the first request inside its transaction: block inserts into study_sessions.
    let mut blocker = app.admin().await;
    let mut lock = blocker.begin().await.unwrap();
    sqlx::query("LOCK TABLE lingo.study_sessions IN SHARE MODE")
        .execute(&mut *lock)
        .await
        .unwrap();

    let first = {
        let client = app.client.clone();
        let url = app.url(SESSIONS);
        let (learner, body) = (learner.clone(), body.clone());
        tokio::spawn(async move {
            client
                .post(url)
                .bearer_auth(learner)
                .header("content-type", "application/json")
                .header("idempotency-key", "slow-key")
                .body(body)
                .send()
                .await
                .unwrap()
        })
    };
    wait_for_lock_waiter(&app).await;

    let response = app
        .post_raw(SESSIONS, &learner, &body, Some("slow-key"))
        .await;
    assert_problem(response, 409, "idempotency_key_in_use").await;

    lock.commit().await.unwrap();
    let first = first.await.unwrap();
    assert_eq!(first.status(), 201);
    let first_body = first.bytes().await.unwrap();

    let replay = app
        .post_raw(SESSIONS, &learner, &body, Some("slow-key"))
        .await;
    assert_eq!(replay.status(), 201);
    assert_eq!(replay.headers()["idempotency-replayed"], "true");
    assert_eq!(replay.bytes().await.unwrap(), first_body);
    assert_eq!(app.count("study_sessions").await, 1);
    assert_eq!(app.count("idempotency_keys").await, 1);
}

/// Waits until a `lingo_app` backend is blocked on a lock (the first request is in flight).
async fn wait_for_lock_waiter(app: &crate::helpers::TestApp) {
    let mut admin = app.admin().await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND usename = 'lingo_app' \
               AND wait_event_type = 'Lock'",
        )
        .fetch_one(&mut admin)
        .await
        .unwrap();
        if waiting > 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the first request never reached the lock"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn expired_keys_are_forgotten_and_cleaned_up() {
    let app = spawn_app().await;
    let learner = token("learner-expiry");
    let body = session("it", 60, 3, 3).to_string();
    let first = app
        .post_raw(SESSIONS, &learner, &body, Some("old-key"))
        .await;
    assert_eq!(first.status(), 201);

    // Age the record past its 24 hours.
    let mut admin = app.admin().await;
    sqlx::query(
        "UPDATE lingo.idempotency_keys SET created_at = now() - interval '25 hours', \
         expires_at = now() - interval '1 hour'",
    )
    .execute(&mut admin)
    .await
    .unwrap();

    // An expired key is a new request (its record is replaced).
    let again = app
        .post_raw(SESSIONS, &learner, &body, Some("old-key"))
        .await;
    assert_eq!(again.status(), 201);
    assert!(again.headers().get("idempotency-replayed").is_none());
    assert_eq!(app.count("study_sessions").await, 2);
    assert_eq!(app.count("idempotency_keys").await, 1);

    // The sweeper removes expired records.
    sqlx::query("UPDATE lingo.idempotency_keys SET expires_at = now() - interval '1 second'")
        .execute(&mut admin)
        .await
        .unwrap();
    let pool = lingo_service::db::runtime_pool(
        &app.db.url_for("lingo_app"),
        2,
        Duration::from_secs(5),
        Duration::from_secs(5),
    )
    .unwrap();
    let removed = lingo_service::idempotency::cleanup_expired(&pool)
        .await
        .unwrap();
    assert_eq!(removed, 1);
    assert_eq!(app.count("idempotency_keys").await, 0);
}
