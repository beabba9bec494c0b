//! The harness of the API tests: a migrated, seeded database per test, the service on port 0,
//! and assertions for problems, content types and timestamps.

use std::collections::BTreeSet;
use std::net::SocketAddr;

use chrono::{DateTime, DurationRound, SecondsFormat, TimeDelta, Utc};
use lingo_service::{Application, ServeConfig};
use reqwest::header::{CONTENT_TYPE, HeaderMap};
use serde_json::{Value, json};
use shared_auth::testing::{TestDatabase, auth_config};
use sqlx::PgConnection;

pub struct TestApp {
    pub address: String,
    pub client: reqwest::Client,
    pub db: TestDatabase,
}

/// Generic learners the test seed creates besides `demo-learner`.
pub const SEEDED_LEARNERS: usize = 3;

/// Migrated as `lingo_owner`, seeded as `lingo_pipeline`, served as `lingo_app`.
pub async fn spawn_app() -> TestApp {
    spawn(true).await
}

/// Migrated only: no languages, no phrases.
#[allow(dead_code)]
pub async fn spawn_app_unseeded() -> TestApp {
    spawn(false).await
}

async fn spawn(seed: bool) -> TestApp {
    let db = TestDatabase::create().await;
    lingo_service::migrate(&db.url_for("lingo_owner"))
        .await
        .expect("migrate");
    if seed {
        lingo_service::seed_with(&db.url_for("lingo_pipeline"), SEEDED_LEARNERS)
            .await
            .expect("seed");
    }
    let address = serve(ServeConfig::new(
        local(),
        db.url_for("lingo_app"),
        auth_config(),
    ))
    .await;
    TestApp {
        address,
        client: reqwest::Client::new(),
        db,
    }
}

pub fn local() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// Starts the service in the background; returns its base URL.
pub async fn serve(config: ServeConfig) -> String {
    let app = Application::build(config).await.expect("build application");
    let address = format!("http://127.0.0.1:{}", app.port());
    tokio::spawn(app.run_with_shutdown(std::future::pending()));
    address
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.address)
    }

    pub async fn get(&self, path: &str, token: Option<&str>) -> reqwest::Response {
        let mut request = self.client.get(self.url(path));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send().await.expect("GET")
    }

    /// POST of a raw body with `Content-Type: application/json`.
    pub async fn post_raw(
        &self,
        path: &str,
        token: &str,
        body: &str,
        key: Option<&str>,
    ) -> reqwest::Response {
        let mut request = self
            .client
            .post(self.url(path))
            .bearer_auth(token)
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_owned());
        if let Some(key) = key {
            request = request.header("Idempotency-Key", key);
        }
        request.send().await.expect("POST")
    }

    pub async fn post_session(&self, token: &str, body: &Value) -> reqwest::Response {
        self.post_raw(
            "/v1/lingo/me/study-sessions",
            token,
            &body.to_string(),
            None,
        )
        .await
    }

    /// A superuser connection to this test's database (search_path lingo).
    pub async fn admin(&self) -> PgConnection {
        lingo_service::db::connect_one(&self.db.admin_url())
            .await
            .expect("admin connection")
    }

    /// Waits until every transaction of the service's role (`lingo_app`) that was open when this
    /// is called has ended. The analytics exports read only below the start of the oldest such
    /// transaction (`store::progress::export_horizon`), and a background task of the service (the
    /// idempotency sweep it runs at start-up, a pool health check) may hold one open for a moment
    /// on a loaded machine: a test that reads an export right after its writes waits for it.
    pub async fn settle_export_horizon(&self) {
        let mut admin = self.admin().await;
        let since: chrono::DateTime<chrono::Utc> = sqlx::query_scalar("SELECT clock_timestamp()")
            .fetch_one(&mut admin)
            .await
            .unwrap();
        for _ in 0..1000 {
            let open: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                   AND usename = 'lingo_app' AND xact_start <= $1",
            )
            .bind(since)
            .fetch_one(&mut admin)
            .await
            .unwrap();
            if open == 0 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("a transaction of lingo_app stayed open for 10 s");
    }

    pub async fn count(&self, table: &str) -> i64 {
        let mut admin = self.admin().await;
        sqlx::query_scalar(&format!("SELECT count(*) FROM lingo.{table}"))
            .fetch_one(&mut admin)
            .await
            .unwrap()
    }
}

/// `at` as the API writes timestamps: RFC 3339, whole seconds, `Z`.
pub fn rfc3339(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Now, to the whole second (what the API shows of a time).
pub fn now_seconds() -> DateTime<Utc> {
    Utc::now()
        .duration_trunc(TimeDelta::seconds(1))
        .expect("truncates")
}

/// A session body in `language` whose counts are those of `answers` (`(phrase_id, correct,
/// grade)`), at `studied_at` when given.
pub fn answered_session(
    language: &str,
    studied_at: Option<DateTime<Utc>>,
    answers: &[(&str, bool, Option<&str>)],
) -> Value {
    let list: Vec<Value> = answers
        .iter()
        .map(|(phrase, correct, grade)| match grade {
            Some(grade) => json!({"phrase_id": phrase, "correct": correct, "grade": grade}),
            None => json!({"phrase_id": phrase, "correct": correct}),
        })
        .collect();
    let mut body = json!({
        "duration_seconds": 120,
        "phrases_seen": answers.len(),
        "phrases_correct": answers.iter().filter(|a| a.1).count(),
        "language_code": language,
        "answers": list,
    });
    if let Some(at) = studied_at {
        body["studied_at"] = json!(rfc3339(at));
    }
    body
}

/// Posts the session `body` with the token `learner`; 201 or panic. Returns the answer.
pub async fn post_created(app: &TestApp, learner: &str, body: &Value) -> Value {
    let response = app.post_session(learner, body).await;
    assert_eq!(response.status(), 201, "{body}");
    response.json().await.unwrap()
}

pub fn session(language: &str, duration: i64, seen: i64, correct: i64) -> Value {
    serde_json::json!({
        "duration_seconds": duration,
        "phrases_seen": seen,
        "phrases_correct": correct,
        "language_code": language,
    })
}

/// The keys of a JSON object, for field-by-field shape checks.
pub fn keys(value: &Value) -> BTreeSet<String> {
    value
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {value}"))
        .keys()
        .cloned()
        .collect()
}

pub fn key_set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

/// The members of a page of a list paged by offset or by cursor.
pub fn cursor_page_keys() -> BTreeSet<String> {
    key_set(&[
        "data",
        "count",
        "limit",
        "offset",
        "next_offset",
        "next_cursor",
    ])
}

/// The members of a phrase in a list (`PhraseItem`).
pub fn phrase_item_keys() -> BTreeSet<String> {
    key_set(&["id", "text", "language_code", "translation_count", "stats"])
}

/// Asserts a problem response: status, problem content type, `code`; returns the body.
pub async fn assert_problem(response: reqwest::Response, status: u16, code: &str) -> Value {
    assert_eq!(response.status().as_u16(), status, "status");
    assert_content_type(response.headers(), "application/problem+json");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["code"], code, "problem {body}");
    assert_eq!(body["status"], status);
    assert_eq!(body["type"], "about:blank");
    assert!(body["title"].is_string());
    assert!(body["request_id"].is_string());
    body
}

/// The `errors[].field`s of a problem, in order.
pub fn error_fields(problem: &Value) -> Vec<String> {
    problem["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("no errors in {problem}"))
        .iter()
        .map(|e| e["field"].as_str().unwrap().to_owned())
        .collect()
}

pub fn assert_content_type(headers: &HeaderMap, expected: &str) {
    let value = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    assert!(
        value.starts_with(expected),
        "content type {value:?}, expected {expected}"
    );
}

/// RFC 3339, UTC, with `Z`.
pub fn assert_timestamp(value: &Value) {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("not a string: {value}"));
    assert!(text.ends_with('Z'), "{text} does not end with Z");
    chrono::DateTime::parse_from_rfc3339(text).unwrap();
}

/// Moves `learners`' whole phrase history `days` into the past (as the bench's loader does):
/// every elapsed time stays the same, so the states stay what the service computed. The only
/// way to a history older than the 30 days a new session may reach back.
pub async fn move_into_the_past(app: &TestApp, learners: &[&str], days: i32) {
    let mut admin = app.admin().await;
    let learners: Vec<String> = learners.iter().map(|l| (*l).to_owned()).collect();
    for statement in [
        "UPDATE lingo.study_sessions SET studied_at = studied_at - $2 * interval '1 day', \
           created_at = created_at - $2 * interval '1 day' WHERE learner_id = ANY($1)",
        "UPDATE lingo.phrase_review_sessions SET studied_at = studied_at - $2 * interval '1 day' \
           WHERE learner_id = ANY($1)",
        "UPDATE lingo.phrase_states SET due_at = due_at - $2 * interval '1 day', \
           first_reviewed_at = first_reviewed_at - $2 * interval '1 day', \
           last_reviewed_at = last_reviewed_at - $2 * interval '1 day', \
           checkpoint_at = checkpoint_at - $2 * interval '1 day' WHERE learner_id = ANY($1)",
        "UPDATE lingo.phrase_checkpoints SET cut = cut - $2 * interval '1 day', \
           due_at = due_at - $2 * interval '1 day', \
           first_reviewed_at = first_reviewed_at - $2 * interval '1 day', \
           last_reviewed_at = last_reviewed_at - $2 * interval '1 day' \
           WHERE learner_id = ANY($1)",
        "UPDATE lingo.learner_language_totals SET \
           first_studied_at = first_studied_at - $2 * interval '1 day', \
           last_studied_at = last_studied_at - $2 * interval '1 day' WHERE learner_id = ANY($1)",
    ] {
        sqlx::query(statement)
            .bind(&learners)
            .bind(days)
            .execute(&mut admin)
            .await
            .unwrap();
    }
}

/// The stored states of `learner`, every field but the learner and the times they were written.
pub async fn stored_states(app: &TestApp, learner: &str) -> Vec<String> {
    let mut admin = app.admin().await;
    sqlx::query_scalar(
        "SELECT concat_ws(' ', phrase_id, stability, difficulty, due_at, reviews, correct, \
           lapses, first_reviewed_at, last_reviewed_at, last_grade) \
         FROM lingo.phrase_states WHERE learner_id = $1 ORDER BY phrase_id",
    )
    .bind(learner)
    .fetch_all(&mut admin)
    .await
    .unwrap()
}
