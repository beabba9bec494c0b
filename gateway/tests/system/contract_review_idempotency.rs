//! `Idempotency-Key` through the gateway (the contract (docs/lingo.md): "A repeat with the same key and the same
//! body replays the first response (same status and body) with `Idempotency-Replayed: true` and
//! changes nothing; the same key with a different body is 422 `idempotency_key_reused`; a repeat
//! while the first is still running is 409 `idempotency_key_in_use`. A request that failed
//! validation stores nothing.").

use futures_util::future::join_all;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::contract_review::{Answer, Sys, answer};

const SESSIONS: &str = "/v1/lingo/me/study-sessions";

fn session(seconds: u64) -> Value {
    json!({"duration_seconds": seconds, "phrases_seen": 5, "phrases_correct": 5, "language_code": "es"})
}

async fn post_raw(sys: &Sys, path: &str, who: &str, key: Option<&str>, body: &str) -> Answer {
    let mut request = sys
        .req(Method::POST, path, Some(who))
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    answer(request).await
}

async fn session_count(sys: &Sys, who: &str) -> usize {
    let page = sys
        .get_ok(&format!("{SESSIONS}?limit=100"), Some(who))
        .await;
    page["count"].as_u64().unwrap() as usize
}

#[tokio::test]
async fn a_replay_answers_the_first_response_and_changes_nothing() {
    let sys = Sys::start().await;
    let body = r#"{"duration_seconds": 60, "phrases_seen": 5, "phrases_correct": 5, "language_code": "es"}"#;
    let same_values = r#"{"language_code":"es","phrases_correct":5,"phrases_seen":5,
        "duration_seconds":60}"#;
    let first = post_raw(&sys, SESSIONS, "replayer", Some("key-1"), body).await;
    assert_eq!(first.status, StatusCode::CREATED);
    assert_eq!(
        first.header("idempotency-replayed"),
        None,
        "the first answer is no replay"
    );
    for repeat in [body, same_values] {
        let replay = post_raw(&sys, SESSIONS, "replayer", Some("key-1"), repeat).await;
        assert_eq!(replay.status, StatusCode::CREATED);
        assert_eq!(replay.header("idempotency-replayed"), Some("true"));
        assert_eq!(replay.json(), first.json(), "the same body");
        assert_eq!(replay.header("location"), first.header("location"));
        assert_eq!(replay.header("cache-control"), Some("private, no-store"));
    }
    assert_eq!(session_count(&sys, "replayer").await, 1);
    assert_eq!(
        sys.get_ok("/v1/lingo/me/xp", Some("replayer")).await["total_xp"],
        first.json()["total_xp"]
    );

    // The same key with another body.
    let reused = post_raw(
        &sys,
        SESSIONS,
        "replayer",
        Some("key-1"),
        &session(61).to_string(),
    )
    .await;
    reused.assert_problem(422, "idempotency_key_reused", "another body");
    assert_eq!(reused.json()["errors"][0]["field"], "Idempotency-Key");
    assert_eq!(session_count(&sys, "replayer").await, 1);

    // Keys are the caller's own.
    let other = post_raw(&sys, SESSIONS, "someone-else", Some("key-1"), body).await;
    assert_eq!(other.status, StatusCode::CREATED);
    assert_eq!(other.header("idempotency-replayed"), None);
    assert_ne!(other.json()["id"], first.json()["id"]);
}

#[tokio::test]
async fn a_refused_request_stores_nothing_under_its_key() {
    let sys = Sys::start().await;
    let invalid = json!({"duration_seconds": 0, "phrases_seen": 5, "phrases_correct": 5, "language_code": "es"});
    let refused = post_raw(&sys, SESSIONS, "fixer", Some("fix-1"), &invalid.to_string()).await;
    refused.assert_problem(422, "validation_failed", "invalid");
    let unknown = json!({"duration_seconds": 5, "phrases_seen": 5, "phrases_correct": 5, "language_code": "xx"});
    let refused = post_raw(&sys, SESSIONS, "fixer", Some("fix-1"), &unknown.to_string()).await;
    refused.assert_problem(422, "unknown_language", "unknown language");
    let broken = post_raw(&sys, SESSIONS, "fixer", Some("fix-1"), "{").await;
    broken.assert_problem(400, "malformed_json", "broken");
    let fixed = post_raw(
        &sys,
        SESSIONS,
        "fixer",
        Some("fix-1"),
        &session(60).to_string(),
    )
    .await;
    assert_eq!(fixed.status, StatusCode::CREATED, "{}", fixed.json());
    assert_eq!(fixed.header("idempotency-replayed"), None);
}

#[tokio::test]
async fn a_key_that_is_not_1_to_255_visible_ascii_is_400() {
    let sys = Sys::start().await;
    let body = session(60).to_string();
    for key in [
        String::new(),
        "k".repeat(256),
        "has space".into(),
        "tab\tkey".into(),
    ] {
        let refused = post_raw(&sys, SESSIONS, "keys", Some(&key), &body).await;
        refused.assert_problem(400, "invalid_idempotency_key", &format!("{key:?}"));
    }
    let non_ascii = answer(
        sys.req(Method::POST, SESSIONS, Some("keys"))
            .header("content-type", "application/json")
            .header(
                "idempotency-key",
                reqwest::header::HeaderValue::from_bytes("clé".as_bytes()).unwrap(),
            )
            .body(body.clone()),
    )
    .await;
    non_ascii.assert_problem(400, "invalid_idempotency_key", "non-ASCII");
    let twice = answer(
        sys.req(Method::POST, SESSIONS, Some("keys"))
            .header("content-type", "application/json")
            .header("idempotency-key", "a")
            .header("idempotency-key", "a")
            .body(body.clone()),
    )
    .await;
    twice.assert_problem(400, "invalid_idempotency_key", "two headers");
    let longest = post_raw(&sys, SESSIONS, "keys", Some(&"~".repeat(255)), &body).await;
    assert_eq!(longest.status, StatusCode::CREATED);
    assert_eq!(session_count(&sys, "keys").await, 1);
}

/// Concurrent requests with one key: one session, every answer either that session (the first
/// or its replay) or 409 `idempotency_key_in_use`.
#[tokio::test]
async fn concurrent_requests_with_one_key_record_one_session() {
    let sys = Sys::start().await;
    for round in 0..3 {
        let who = format!("racer-{round}");
        let body = session(60).to_string();
        let answers =
            join_all((0..12).map(|_| post_raw(&sys, SESSIONS, &who, Some("race"), &body))).await;
        let mut created_ids = Vec::new();
        for answer in &answers {
            match answer.status {
                StatusCode::CREATED => created_ids.push(answer.json()["id"].clone()),
                StatusCode::CONFLICT => {
                    answer.assert_problem(409, "idempotency_key_in_use", "race");
                }
                other => panic!("{other}: {}", answer.json()),
            }
        }
        assert!(!created_ids.is_empty());
        assert!(
            created_ids.iter().all(|id| id == &created_ids[0]),
            "{created_ids:?}"
        );
        let originals = answers
            .iter()
            .filter(|a| {
                a.status == StatusCode::CREATED && a.header("idempotency-replayed").is_none()
            })
            .count();
        assert_eq!(originals, 1, "one first answer, the rest replays");
        assert_eq!(session_count(&sys, &who).await, 1);
        assert_eq!(
            sys.get_ok("/v1/lingo/me/xp", Some(&who)).await["total_xp"],
            20
        );
    }
    // Concurrent posts with distinct keys (or none) are all counted.
    let body = session(60).to_string();
    let keys: Vec<String> = (0..10).map(|n| format!("distinct-{n}")).collect();
    let with_keys = keys
        .iter()
        .map(|k| post_raw(&sys, SESSIONS, "many", Some(k), &body));
    let answers = join_all(with_keys).await;
    assert!(answers.iter().all(|a| a.status == StatusCode::CREATED));
    let without = join_all((0..10).map(|_| post_raw(&sys, SESSIONS, "many", None, &body))).await;
    assert!(without.iter().all(|a| a.status == StatusCode::CREATED));
    assert_eq!(session_count(&sys, "many").await, 20);
    assert_eq!(
        sys.get_ok("/v1/lingo/me/xp", Some("many")).await["total_xp"],
        400
    );
}

#[tokio::test]
async fn comments_replay_under_their_key_too() {
    let sys = Sys::start().await;
    let article = sys.article_ids(1).await.remove(0);
    let body = json!({"article_id": article, "text": "once"}).to_string();
    let answers = join_all(
        (0..8).map(|_| post_raw(&sys, "/v1/news/comments", "commenter", Some("c-1"), &body)),
    )
    .await;
    let created: Vec<&Answer> = answers
        .iter()
        .filter(|a| a.status == StatusCode::CREATED)
        .collect();
    assert!(
        answers
            .iter()
            .all(|a| a.status == StatusCode::CREATED || a.status == StatusCode::CONFLICT)
    );
    assert!(created.iter().all(|a| a.json() == created[0].json()));
    let replay = post_raw(&sys, "/v1/news/comments", "commenter", Some("c-1"), &body).await;
    assert_eq!(replay.header("idempotency-replayed"), Some("true"));
    assert_eq!(replay.header("location"), created[0].header("location"));
    let thread = sys
        .get_ok(
            &format!("/v1/news/articles/{article}/comments"),
            Some("commenter"),
        )
        .await;
    assert_eq!(thread["count"], 1);
    let article_page = sys
        .get_ok(&format!("/v1/news/articles/{article}"), Some("commenter"))
        .await;
    assert_eq!(article_page["comment_count"], 1);
    let reused = post_raw(
        &sys,
        "/v1/news/comments",
        "commenter",
        Some("c-1"),
        &json!({"article_id": article, "text": "twice"}).to_string(),
    )
    .await;
    reused.assert_problem(422, "idempotency_key_reused", "comment");
}

/// A repeat while the first request still holds its key is 409 `idempotency_key_in_use`, with
/// the request's own id through the gateway. The first request is held by taking its key's
/// lock from outside (psql), where the service takes it (`pg_try_advisory_xact_lock`).
#[tokio::test]
async fn a_key_in_use_is_409_with_the_gateways_request_id() {
    let sys = Sys::start().await;
    let lock = shared_auth::pg::idempotency::lock_key("lingo:idempotency", "holder", "held-key");
    let holder = std::process::Command::new("psql")
        .arg(sys.stack.db.admin_url())
        .args([
            "-q",
            "-c",
            &format!("SELECT pg_advisory_lock({lock})"),
            "-c",
            "SELECT pg_sleep(3)",
        ])
        .stdout(std::process::Stdio::null())
        .spawn();
    let Ok(mut holder) = holder else {
        eprintln!("psql is not installed: cannot hold the key from outside; skipped");
        return;
    };
    let body = session(60).to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    let mut in_use = None;
    while std::time::Instant::now() < deadline {
        let got = answer(
            sys.req(Method::POST, SESSIONS, Some("holder"))
                .header("content-type", "application/json")
                .header("idempotency-key", "held-key")
                .header("x-request-id", "while-held")
                .body(body.clone()),
        )
        .await;
        if got.status == StatusCode::CONFLICT {
            in_use = Some(got);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let in_use = in_use.expect("never 409 while the key was held");
    let id = in_use.assert_problem(409, "idempotency_key_in_use", "held key");
    assert_eq!(id, "while-held");
    assert_eq!(in_use.header("cache-control"), Some("private, no-store"));
    holder.wait().unwrap();
    let after = post_raw(&sys, SESSIONS, "holder", Some("held-key"), &body).await;
    assert_eq!(after.status, StatusCode::CREATED, "{}", after.json());
    assert_eq!(session_count(&sys, "holder").await, 1);
}

/// A service's own 503 `timeout` (its 5 s deadline passed while its statement waited on a lock)
/// comes through the gateway unchanged, with the request's id; the write was cancelled, and its
/// retry with the same key is recorded once.
#[tokio::test]
async fn a_services_deadline_503_passes_through_and_the_retry_records_once() {
    let sys = Sys::start().await;
    let holder = std::process::Command::new("psql")
        .arg(sys.stack.db.admin_url())
        .args([
            "-q",
            "-c",
            "BEGIN; LOCK TABLE lingo.learners IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(7); COMMIT;",
        ])
        .stdout(std::process::Stdio::null())
        .spawn();
    let Ok(mut holder) = holder else {
        eprintln!("psql is not installed: cannot hold a lock from outside; skipped");
        return;
    };
    // Let psql take the lock before the write arrives.
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    let body = session(60).to_string();
    let started = std::time::Instant::now();
    let timed_out = answer(
        sys.req(Method::POST, SESSIONS, Some("deadline"))
            .header("content-type", "application/json")
            .header("idempotency-key", "slow-key")
            .header("x-request-id", "slow-1")
            .body(body.clone()),
    )
    .await;
    let waited = started.elapsed();
    let id = timed_out.assert_problem(503, "timeout", "a write past the service's deadline");
    assert_eq!(id, "slow-1");
    assert!(
        waited < std::time::Duration::from_secs(7),
        "answered after {waited:?}"
    );
    holder.wait().unwrap();
    let retry = post_raw(&sys, SESSIONS, "deadline", Some("slow-key"), &body).await;
    assert_eq!(retry.status, StatusCode::CREATED, "{}", retry.json());
    assert_eq!(
        retry.header("idempotency-replayed"),
        None,
        "the first attempt recorded nothing"
    );
    assert_eq!(session_count(&sys, "deadline").await, 1);
    assert_eq!(
        sys.get_ok("/v1/lingo/me/xp", Some("deadline")).await["total_xp"],
        20
    );
}
