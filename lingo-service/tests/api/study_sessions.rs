//! `POST /me/study-sessions`, the caller's list and single session.

use futures_util::future::join_all;
use serde_json::{Value, json};
use shared_auth::testing::token;

use crate::helpers::{
    assert_content_type, assert_problem, assert_timestamp, cursor_page_keys, error_fields, key_set,
    keys, session, spawn_app,
};

const SESSIONS: &str = "/v1/lingo/me/study-sessions";

fn session_keys() -> std::collections::BTreeSet<String> {
    key_set(&[
        "id",
        "language_code",
        "duration_seconds",
        "phrases_seen",
        "phrases_correct",
        "xp_awarded",
        "created_at",
        "studied_at",
        "answer_count",
    ])
}

#[tokio::test]
async fn a_session_is_created_and_its_location_resolves() {
    let app = spawn_app().await;
    let learner = token("learner-a");
    let response = app
        .post_session(&learner, &session("es", 300, 10, 10))
        .await;
    assert_eq!(response.status(), 201);
    assert_content_type(response.headers(), "application/json");
    let location = response.headers()["location"].to_str().unwrap().to_owned();
    let created: Value = response.json().await.unwrap();

    let mut expected_keys = session_keys();
    expected_keys.extend(key_set(&["total_xp", "level", "leveled_up"]));
    assert_eq!(keys(&created), expected_keys);
    let id = created["id"].as_str().unwrap();
    let uuid = uuid::Uuid::parse_str(id).unwrap();
    assert_eq!(uuid.get_version_num(), 7, "UUIDv7");
    assert_eq!(location, format!("/v1/lingo/me/study-sessions/{id}"));
    assert_eq!(created["language_code"], "es");
    assert_eq!(created["duration_seconds"], 300);
    assert_eq!(created["phrases_seen"], 10);
    assert_eq!(created["phrases_correct"], 10);
    assert_eq!(
        created["xp_awarded"], 25,
        "10 + 10 correct + 5 perfect bonus"
    );
    assert_timestamp(&created["created_at"]);
    assert_eq!(created["total_xp"], 25);
    assert_eq!(created["level"], 1);
    assert_eq!(created["leveled_up"], false);

    // The Location header resolves to the same session.
    let response = app.get(&location, Some(&learner)).await;
    assert_eq!(response.status(), 200);
    let fetched: Value = response.json().await.unwrap();
    assert_eq!(keys(&fetched), session_keys());
    for field in session_keys() {
        assert_eq!(fetched[&field], created[&field], "{field}");
    }

    // Crossing 60 XP levels up: 25 + 21 = 46, then 46 + 20 = 66.
    let second: Value = app
        .post_session(&learner, &session("fr", 60, 6, 6))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (second["xp_awarded"].as_i64(), second["total_xp"].as_i64()),
        (Some(21), Some(46))
    );
    assert_eq!(second["leveled_up"], false);
    let third: Value = app
        .post_session(&learner, &session("fr", 60, 5, 5))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (third["total_xp"].as_i64(), third["level"].as_i64()),
        (Some(66), Some(2))
    );
    assert_eq!(third["leveled_up"], true);
    // Nothing seen, nothing earned.
    let idle: Value = app
        .post_session(&learner, &session("fr", 10, 0, 0))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (idle["xp_awarded"].as_i64(), idle["total_xp"].as_i64()),
        (Some(0), Some(66))
    );
}

#[tokio::test]
async fn the_list_is_the_callers_newest_first_and_paged() {
    let app = spawn_app().await;
    let learner = token("learner-list");
    let mut ids = Vec::new();
    for seen in 0..5 {
        let body: Value = app
            .post_session(&learner, &session("de", 60, seen, 0))
            .await
            .json()
            .await
            .unwrap();
        ids.push(body["id"].as_str().unwrap().to_owned());
    }
    ids.reverse();

    let body: Value = app
        .get(&format!("{SESSIONS}?limit=2"), Some(&learner))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(keys(&body), cursor_page_keys());
    assert_eq!(
        (body["count"].as_i64(), body["next_offset"].as_i64()),
        (Some(2), Some(2))
    );
    for item in body["data"].as_array().unwrap() {
        assert_eq!(keys(item), session_keys());
    }
    let mut listed = Vec::new();
    let mut offset = 0;
    loop {
        let body: Value = app
            .get(
                &format!("{SESSIONS}?limit=2&offset={offset}"),
                Some(&learner),
            )
            .await
            .json()
            .await
            .unwrap();
        listed.extend(
            body["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["id"].as_str().unwrap().to_owned()),
        );
        match body["next_offset"].as_i64() {
            Some(next) => offset = next,
            None => break,
        }
    }
    assert_eq!(listed, ids, "newest first, each once");

    let response = app.get(SESSIONS, None).await;
    assert_eq!(
        response.headers()["www-authenticate"],
        "Bearer realm=\"lingo-news\""
    );
    assert_problem(response, 401, "missing_token").await;
    let response = app
        .get(&format!("{SESSIONS}?limit=0"), Some(&learner))
        .await;
    assert_problem(response, 400, "invalid_query").await;
    let response = app
        .get(&format!("{SESSIONS}/not-a-uuid"), Some(&learner))
        .await;
    assert_problem(response, 404, "study_session_not_found").await;
}

#[tokio::test]
async fn one_learner_never_sees_another_learners_data() {
    let app = spawn_app().await;
    let alice = token("alice");
    let bob = token("bob");
    let created: Value = app
        .post_session(&alice, &session("es", 120, 8, 7))
        .await
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().unwrap();

    let response = app.get(&format!("{SESSIONS}/{id}"), Some(&bob)).await;
    assert_problem(response, 404, "study_session_not_found").await;
    // Ids are compared as written: another spelling of the same UUID names nothing.
    let upper = id.to_uppercase();
    let unhyphenated = id.replace('-', "");
    for spelling in [upper.as_str(), &unhyphenated, &format!("urn:uuid:{id}")] {
        let response = app
            .get(&format!("{SESSIONS}/{spelling}"), Some(&alice))
            .await;
        assert_problem(response, 404, "study_session_not_found").await;
    }
    let list: Value = app.get(SESSIONS, Some(&bob)).await.json().await.unwrap();
    assert_eq!(list["count"], 0);
    let progress: Value = app
        .get("/v1/lingo/me/progress", Some(&bob))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(progress["learner_id"], "bob");
    assert_eq!(progress["count"], 0);
    assert_eq!(progress["totals"]["sessions"], 0);
    let xp: Value = app
        .get("/v1/lingo/me/xp", Some(&bob))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(xp["total_xp"], 0);
    assert_eq!(xp["by_language"], json!([]));

    // Alice still sees hers.
    let response = app.get(&format!("{SESSIONS}/{id}"), Some(&alice)).await;
    assert_eq!(response.status(), 200);
    let xp: Value = app
        .get("/v1/lingo/me/xp", Some(&alice))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(xp["total_xp"], created["xp_awarded"]);
}

/// Name, body, content type, status, code, and the field named in `errors` (if any).
type Case<'a> = (&'a str, String, &'a str, u16, &'a str, Option<&'a str>);

#[tokio::test]
async fn invalid_sessions_are_refused_and_store_nothing() {
    let app = spawn_app().await;
    let learner = token("learner-invalid");
    let valid = |field: &str, value: Value| {
        let mut body = session("es", 60, 5, 4);
        body[field] = value;
        body.to_string()
    };
    let without = |field: &str| {
        let mut body = session("es", 60, 5, 4);
        body.as_object_mut().unwrap().remove(field);
        body.to_string()
    };
    let json = "application/json";
    let cases: Vec<Case> = vec![
        (
            "missing field",
            without("phrases_seen"),
            json,
            422,
            "validation_failed",
            Some("phrases_seen"),
        ),
        (
            "missing language",
            without("language_code"),
            json,
            422,
            "validation_failed",
            Some("language_code"),
        ),
        (
            "null",
            valid("duration_seconds", Value::Null),
            json,
            422,
            "validation_failed",
            Some("duration_seconds"),
        ),
        (
            "float",
            valid("duration_seconds", json!(60.5)),
            json,
            422,
            "validation_failed",
            Some("duration_seconds"),
        ),
        (
            "integral float",
            valid("phrases_seen", json!(5.0)),
            json,
            422,
            "validation_failed",
            Some("phrases_seen"),
        ),
        (
            "numeric string",
            valid("phrases_seen", json!("5")),
            json,
            422,
            "validation_failed",
            Some("phrases_seen"),
        ),
        (
            "negative duration",
            valid("duration_seconds", json!(-1)),
            json,
            422,
            "validation_failed",
            Some("duration_seconds"),
        ),
        (
            "zero duration",
            valid("duration_seconds", json!(0)),
            json,
            422,
            "validation_failed",
            Some("duration_seconds"),
        ),
        (
            "negative correct",
            valid("phrases_correct", json!(-1)),
            json,
            422,
            "validation_failed",
            Some("phrases_correct"),
        ),
        (
            "duration over max",
            valid("duration_seconds", json!(86_401)),
            json,
            422,
            "validation_failed",
            Some("duration_seconds"),
        ),
        (
            "seen over max",
            session("es", 60, 10_001, 0).to_string(),
            json,
            422,
            "validation_failed",
            Some("phrases_seen"),
        ),
        (
            "huge number",
            valid("phrases_seen", json!(1e300)),
            json,
            422,
            "validation_failed",
            Some("phrases_seen"),
        ),
        (
            "correct > seen",
            session("es", 60, 5, 6).to_string(),
            json,
            422,
            "validation_failed",
            Some("phrases_correct"),
        ),
        (
            "unknown language",
            session("xx", 60, 5, 4).to_string(),
            json,
            422,
            "unknown_language",
            Some("language_code"),
        ),
        (
            "language not a string",
            valid("language_code", json!(1)),
            json,
            422,
            "validation_failed",
            Some("language_code"),
        ),
        (
            "unknown field",
            valid("mood", json!("happy")),
            json,
            422,
            "validation_failed",
            Some("mood"),
        ),
        (
            "learner_id field",
            valid("learner_id", json!("someone-else")),
            json,
            422,
            "validation_failed",
            Some("learner_id"),
        ),
        (
            "not an object",
            "[1, 2]".into(),
            json,
            422,
            "validation_failed",
            None,
        ),
        (
            "malformed JSON",
            r#"{"duration_seconds": 60,"#.into(),
            json,
            400,
            "malformed_json",
            None,
        ),
        (
            "empty body",
            String::new(),
            json,
            400,
            "malformed_json",
            None,
        ),
        (
            "wrong content type",
            session("es", 60, 5, 4).to_string(),
            "text/plain",
            415,
            "unsupported_media_type",
            None,
        ),
        (
            "form content type",
            "duration_seconds=60".into(),
            "application/x-www-form-urlencoded",
            415,
            "unsupported_media_type",
            None,
        ),
        (
            "too large",
            format!(r#"{{"language_code": "{}"}}"#, "x".repeat(130 * 1024)),
            json,
            413,
            "payload_too_large",
            None,
        ),
    ];
    for (index, (name, body, content_type, status, code, field)) in cases.into_iter().enumerate() {
        let response = app
            .client
            .post(app.url(SESSIONS))
            .bearer_auth(&learner)
            .header("content-type", content_type)
            .header("idempotency-key", format!("invalid-{index}"))
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), status, "case {name}");
        let problem = assert_problem(response, status, code).await;
        if let Some(field) = field {
            assert!(
                error_fields(&problem).iter().any(|f| f == field),
                "case {name}: {problem}"
            );
        }
    }
    // Without a token the body is never looked at.
    let response = app
        .client
        .post(app.url(SESSIONS))
        .header("content-type", "application/json")
        .body(session("es", 60, 5, 4).to_string())
        .send()
        .await
        .unwrap();
    assert_problem(response, 401, "missing_token").await;

    for table in [
        "study_sessions",
        "learners",
        "learner_language_totals",
        "idempotency_keys",
    ] {
        assert_eq!(app.count(table).await, 0, "{table} must stay empty");
    }
}

#[tokio::test]
async fn fifty_concurrent_sessions_of_one_learner_are_all_counted() {
    let app = spawn_app().await;
    let learner = token("learner-busy");
    let bodies: Vec<Value> = (0..50)
        .map(|i| {
            let language = ["es", "fr", "de"][i % 3];
            let seen = (i % 12) as i64;
            session(
                language,
                30 + i as i64,
                seen,
                seen - (i % 2) as i64 * seen.min(1),
            )
        })
        .collect();
    let responses = join_all(bodies.iter().map(|body| app.post_session(&learner, body))).await;
    let mut awarded = 0;
    let mut totals = Vec::new();
    for response in responses {
        assert_eq!(response.status(), 201);
        let body: Value = response.json().await.unwrap();
        awarded += body["xp_awarded"].as_i64().unwrap();
        totals.push(body["total_xp"].as_i64().unwrap());
    }
    assert_eq!(app.count("study_sessions").await, 50);

    let xp: Value = app
        .get("/v1/lingo/me/xp", Some(&learner))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(xp["total_xp"], awarded);
    let by_language: i64 = xp["by_language"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["xp"].as_i64().unwrap())
        .sum();
    assert_eq!(by_language, awarded);
    let progress: Value = app
        .get("/v1/lingo/me/progress", Some(&learner))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(progress["totals"]["sessions"], 50);
    assert_eq!(progress["totals"]["xp"], awarded);
    // Writes of one learner are serialised: the last one to commit saw every session.
    assert_eq!(totals.iter().max().copied(), Some(awarded));
}

/// A POST with nothing in it is told its body is missing; a body without a type is 415.
#[tokio::test]
async fn no_body_at_all_is_400_and_an_untyped_body_415() {
    let app = spawn_app().await;
    let learner = token("untyped");
    let post = || app.client.post(app.url(SESSIONS)).bearer_auth(&learner);
    let response = post().send().await.unwrap();
    let problem = assert_problem(response, 400, "malformed_json").await;
    assert_eq!(problem["detail"], "the request body is empty");
    let body = session("es", 60, 5, 4).to_string();
    let response = post().body(body).send().await.unwrap();
    assert_problem(response, 415, "unsupported_media_type").await;
}

/// A language the pipeline deletes between the request's check and the session's insert: the
/// insert's foreign key is answered 422 `unknown_language`, never a 500 (`error::on_constraint`).
/// The store is called directly with a language that never existed, as the race would leave it.
#[tokio::test]
async fn a_language_gone_before_the_insert_is_unknown_language() {
    use sqlx::Connection;

    let app = spawn_app().await;
    let url = app.db.url_for("lingo_app");
    let mut connection = lingo_service::db::connect_one(&url)
        .await
        .expect("connect as lingo_app");
    let mut tx = connection.begin().await.expect("begin");
    let input: lingo_service::domain::study_session::StudySessionInput =
        serde_json::from_value(session("xx", 60, 5, 4)).expect("a valid input");
    let error = lingo_service::store::study_sessions::record(
        &mut tx,
        "learner-race",
        &input,
        chrono::Utc::now(),
    )
    .await
    .expect_err("no such language");
    let problem = error.to_problem();
    assert_eq!(problem.status, 422, "{problem:?}");
    assert_eq!(problem.code, "unknown_language");
}
