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

/// The sweep of expired keys (`cleanup_expired`, every few minutes on every replica) and a post
/// that drops the caller's expired keys meet on the same rows, each locking them in the order of
/// its own plan: the post by expiry here, the sweep by a hash of the keys. A transaction holds
/// the key that expires second; the sweep takes its first rows and queues on that key, the post
/// takes the key that expires first and queues behind the sweep. When the transaction ends, the
/// sweep goes on to the post's key and the post waits for the sweep: a deadlock (the post's 500,
/// or the sweep's error) whenever the sweep's order is the post's reversed. Over every order of
/// expiry for three keys, one round is that one, whatever order the hash gives. The sweep must
/// never make a post fail, nor fail itself.
#[tokio::test]
async fn the_expired_key_sweep_never_deadlocks_a_post() {
    let app = spawn_app().await;
    let learner_id = "learner-sweep";
    let learner = token(learner_id);
    let mut admin = app.admin().await;
    // Other callers' live keys: the statements plan by index, as on a real table.
    sqlx::query(
        "INSERT INTO lingo.idempotency_keys \
           (caller_id, key, request_hash, response_status, response_body, created_at, expires_at) \
         SELECT format('other-%s', i), 'k', '\\x00', 201, '\\x7b7d', now(), now() + interval '1 day' \
         FROM generate_series(1, 20000) i",
    )
    .execute(&mut admin)
    .await
    .unwrap();
    sqlx::query("ANALYZE lingo.idempotency_keys")
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

    let orders = [
        [0, 1, 2],
        [0, 2, 1],
        [1, 0, 2],
        [1, 2, 0],
        [2, 0, 1],
        [2, 1, 0],
    ];
    for (round, expiry) in orders.into_iter().enumerate() {
        // `keys[i]` expired `expiry[i] + 1` hours ago: the one with `expiry` 1 is in the middle.
        let keys: Vec<String> = ["x", "y", "z"]
            .iter()
            .map(|name| format!("old-{round}-{name}"))
            .collect();
        let hours: Vec<i32> = expiry.iter().map(|&rank| 3 - rank).collect();
        sqlx::query(
            "INSERT INTO lingo.idempotency_keys \
               (caller_id, key, request_hash, response_status, response_body, created_at, \
                expires_at) \
             SELECT $1, key, '\\x00', 201, '\\x7b7d', now() - interval '2 days', \
               now() - make_interval(hours => h) \
             FROM unnest($2::text[], $3::int[]) AS k (key, h)",
        )
        .bind(learner_id)
        .bind(&keys)
        .bind(&hours)
        .execute(&mut admin)
        .await
        .unwrap();
        let middle = &keys[expiry.iter().position(|&rank| rank == 1).unwrap()];
        let mut holder = app.admin().await;
        let mut hold = holder.begin().await.unwrap();
        sqlx::query(
            "SELECT 1 FROM lingo.idempotency_keys WHERE caller_id = $1 AND key = $2 FOR UPDATE",
        )
        .bind(learner_id)
        .bind(middle)
        .execute(&mut *hold)
        .await
        .unwrap();

        let sweep = {
            let pool = pool.clone();
            tokio::spawn(async move { lingo_service::idempotency::cleanup_expired(&pool).await })
        };
        wait_until_blocked(&app, || usize::from(!sweep.is_finished())).await;
        let post = {
            let client = app.client.clone();
            let url = app.url(SESSIONS);
            let learner = learner.clone();
            let body = session("fr", 60, 2, 1).to_string();
            tokio::spawn(async move {
                let response = client
                    .post(url)
                    .bearer_auth(learner)
                    .header("content-type", "application/json")
                    .header("idempotency-key", format!("new-{round}"))
                    .body(body)
                    .send()
                    .await
                    .unwrap();
                (response.status(), response.text().await.unwrap())
            })
        };
        wait_until_blocked(&app, || {
            usize::from(!sweep.is_finished()) + usize::from(!post.is_finished())
        })
        .await;
        hold.rollback().await.unwrap();

        let swept = sweep.await.unwrap();
        let (status, body) = post.await.unwrap();
        assert!(swept.is_ok(), "round {round}: the sweep failed: {swept:?}");
        assert_eq!(status, 201, "round {round}: {body}");
        let expired: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM lingo.idempotency_keys \
             WHERE caller_id = $1 AND expires_at <= now()",
        )
        .bind(learner_id)
        .fetch_one(&mut admin)
        .await
        .unwrap();
        assert_eq!(
            expired, 0,
            "round {round}: the post and the sweep removed them"
        );
    }
    assert_eq!(app.count("study_sessions").await, orders.len() as i64);
}

/// Waits until every task still `running` waits on a lock (one `lingo_app` backend blocked on a
/// lock per running task).
async fn wait_until_blocked(app: &crate::helpers::TestApp, running: impl Fn() -> usize) {
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
        if waiting as usize >= running() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the tasks never reached the lock"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
