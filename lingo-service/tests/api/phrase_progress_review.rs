//! An adversarial review of the phrase-progress write path (late sessions, checkpoints, the
//! previous release's log writes, the analytics export), by tests through HTTP and PostgreSQL.
//!
//! The oracle of most tests is [`assert_agrees_with_the_whole_log`]: every stored state must be
//! exactly what the FSRS domain module computes from the learner's whole review log in time
//! order (`studied_at`, then session id, then position), every checkpoint exactly the state after
//! its phrase's answers before its cut, and `phrase_states.checkpoint_at` the newest cut. Tests
//! marked `#[ignore = "bug: ..."]` fail today; they describe a bug for the lead to fix.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Duration, DurationRound, SecondsFormat, Utc};
use futures_util::future::join_all;
use lingo_service::domain::fsrs::{self, Grade, PhraseState, Review};
use serde_json::{Value, json};
use shared_auth::testing::{token, token_with_scope};
use sqlx::{Connection, PgConnection};
use uuid::Uuid;

use crate::helpers::{TestApp, spawn_app};

const SESSIONS: &str = "/v1/lingo/me/study-sessions";
const EXPORT: &str = "/v1/lingo/analytics/phrase-progress";

fn now_seconds() -> DateTime<Utc> {
    Utc::now()
        .duration_trunc(Duration::seconds(1))
        .expect("truncates")
}

fn micros(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// A session body of `(phrase_id, grade)` answers, at `studied_at` (to the microsecond) or, with
/// `None`, at the time it arrives.
fn session_at(studied_at: Option<DateTime<Utc>>, answers: &[(&str, &str)]) -> Value {
    let list: Vec<Value> = answers
        .iter()
        .map(|(phrase, grade)| json!({"phrase_id": phrase, "correct": *grade != "again", "grade": grade}))
        .collect();
    let mut body = json!({
        "duration_seconds": 60,
        "phrases_seen": answers.len(),
        "phrases_correct": answers.iter().filter(|a| a.1 != "again").count(),
        "language_code": "es",
        "answers": list,
    });
    if let Some(at) = studied_at {
        body["studied_at"] = json!(micros(at));
    }
    body
}

/// Posts `body` as `learner`; 201 or panic. Returns the answer.
async fn post_ok(app: &TestApp, learner: &str, body: &Value) -> Value {
    let response = app.post_session(&token(learner), body).await;
    let status = response.status();
    let answer: Value = response.json().await.unwrap();
    assert_eq!(status, 201, "{body} -> {answer}");
    answer
}

/// `body` with the `studied_at` the service stored for it (`answer` shows it to the second only),
/// so a twin gets the very same time.
async fn as_recorded(app: &TestApp, body: &Value, answer: &Value) -> Value {
    let id: Uuid = answer["id"].as_str().unwrap().parse().unwrap();
    let mut admin = app.admin().await;
    let at: DateTime<Utc> =
        sqlx::query_scalar("SELECT studied_at FROM lingo.study_sessions WHERE id = $1")
            .bind(id)
            .fetch_one(&mut admin)
            .await
            .unwrap();
    let mut body = body.clone();
    body["studied_at"] = json!(micros(at));
    body
}

fn studied_at_of(body: &Value) -> DateTime<Utc> {
    body["studied_at"].as_str().unwrap().parse().unwrap()
}

/// A stored state or checkpoint row, as the domain's [`PhraseState`].
type StateTuple = (
    String,
    f32,
    f32,
    DateTime<Utc>,
    i32,
    i32,
    i32,
    DateTime<Utc>,
    DateTime<Utc>,
    i16,
    Option<DateTime<Utc>>,
);

fn state_of(row: &StateTuple) -> PhraseState {
    PhraseState {
        stability: row.1,
        difficulty: row.2,
        due_at: row.3,
        reviews: row.4,
        correct: row.5,
        lapses: row.6,
        first_reviewed_at: row.7,
        last_reviewed_at: row.8,
        last_grade: Grade::from_rating(row.9).unwrap(),
    }
}

/// Every answer of `learner` per phrase, in the order the contract defines: `studied_at`, then
/// session id (docs/lingo.md), then position in the session.
async fn whole_log(admin: &mut PgConnection, learner: &str) -> BTreeMap<String, Vec<Review>> {
    let rows: Vec<(DateTime<Utc>, Uuid, Vec<String>, Vec<i16>)> = sqlx::query_as(
        "SELECT studied_at, session_id, phrase_ids, grades FROM lingo.phrase_review_sessions \
         WHERE learner_id = $1 ORDER BY studied_at, session_id",
    )
    .bind(learner)
    .fetch_all(&mut *admin)
    .await
    .unwrap();
    let mut log: BTreeMap<String, Vec<Review>> = BTreeMap::new();
    for (studied_at, _, phrase_ids, grades) in rows {
        for (phrase, grade) in phrase_ids.into_iter().zip(grades) {
            log.entry(phrase).or_default().push(Review {
                studied_at,
                grade: Grade::from_rating(grade).unwrap(),
            });
        }
    }
    log
}

fn replayed(reviews: &[Review]) -> Option<PhraseState> {
    fsrs::replay(None, reviews.iter().copied()).unwrap()
}

/// The review oracle: `learner`'s stored states are exactly the replays of their whole review log,
/// every checkpoint is exactly the state after its phrase's answers before its cut, each state's
/// `checkpoint_at` names its newest checkpoint, and `phrases_started` counts the states.
async fn assert_agrees_with_the_whole_log(app: &TestApp, learner: &str, what: &str) {
    let mut admin = app.admin().await;
    let log = whole_log(&mut admin, learner).await;
    let states: Vec<StateTuple> = sqlx::query_as(
        "SELECT phrase_id, stability, difficulty, due_at, reviews, correct, lapses, \
           first_reviewed_at, last_reviewed_at, last_grade, checkpoint_at \
         FROM lingo.phrase_states WHERE learner_id = $1 ORDER BY phrase_id",
    )
    .bind(learner)
    .fetch_all(&mut admin)
    .await
    .unwrap();
    let stored: Vec<&str> = states.iter().map(|s| s.0.as_str()).collect();
    let logged: Vec<&str> = log.keys().map(String::as_str).collect();
    assert_eq!(stored, logged, "{what}: phrases with a state vs in the log");
    for row in &states {
        let expected = replayed(&log[&row.0]).unwrap();
        assert_eq!(
            state_of(row),
            expected,
            "{what}: {learner} {} differs from the replay of its {} answers",
            row.0,
            log[&row.0].len()
        );
    }

    let checkpoints: Vec<StateTuple> = sqlx::query_as(
        "SELECT phrase_id, stability, difficulty, due_at, reviews, correct, lapses, \
           first_reviewed_at, last_reviewed_at, last_grade, cut \
         FROM lingo.phrase_checkpoints WHERE learner_id = $1 ORDER BY phrase_id, cut",
    )
    .bind(learner)
    .fetch_all(&mut admin)
    .await
    .unwrap();
    let mut newest: HashMap<&str, DateTime<Utc>> = HashMap::new();
    for row in &checkpoints {
        let cut = row.10.unwrap();
        let before: Vec<Review> = log
            .get(&row.0)
            .map(|all| all.iter().filter(|r| r.studied_at < cut).copied().collect())
            .unwrap_or_default();
        assert_eq!(
            Some(state_of(row)),
            replayed(&before),
            "{what}: {learner}'s checkpoint of {} cut at {cut} is not the state after the {} \
             answers before it",
            row.0,
            before.len()
        );
        newest.insert(&row.0, cut);
    }
    for row in &states {
        assert_eq!(
            row.10,
            newest.get(row.0.as_str()).copied(),
            "{what}: {learner} {}: checkpoint_at vs its newest checkpoint",
            row.0
        );
    }

    let started: Option<i32> = sqlx::query_scalar(
        "SELECT phrases_started::integer FROM lingo.learner_language_totals \
         WHERE learner_id = $1 AND language_code = 'es'",
    )
    .bind(learner)
    .fetch_optional(&mut admin)
    .await
    .unwrap();
    assert_eq!(
        started.unwrap_or(0) as usize,
        states.len(),
        "{what}: phrases_started"
    );
}

/// The stored states of `learner`, every field but the learner and the write's bookkeeping.
async fn stored_states(app: &TestApp, learner: &str) -> Vec<String> {
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

/// Moves `learners`' whole history `days` into the past, as the bench loader and the tests of
/// tests/api/phrase_progress.rs do (the only way to a history older than 30 days): every elapsed
/// time stays, so every state and checkpoint stays right.
async fn move_into_the_past(app: &TestApp, learners: &[&str], days: i32) {
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

/// The cuts of `learner`'s checkpoints of `phrase`, oldest first.
async fn cuts(app: &TestApp, learner: &str, phrase: &str) -> Vec<DateTime<Utc>> {
    let mut admin = app.admin().await;
    sqlx::query_scalar(
        "SELECT cut FROM lingo.phrase_checkpoints WHERE learner_id = $1 AND phrase_id = $2 \
         ORDER BY cut",
    )
    .bind(learner)
    .bind(phrase)
    .fetch_all(&mut admin)
    .await
    .unwrap()
}

/// A history older than the 31 settled days for `learners`: sessions 28, 25 and 3 days ago, then
/// moved 12 days back (40, 37 and 15 days ago). ph-es-001 and ph-es-002 were last answered 37
/// days ago, ph-es-003 15 days ago; none has a checkpoint yet.
async fn old_history(app: &TestApp, learners: &[&str]) {
    let now = now_seconds();
    let sessions = [
        (28, vec![("ph-es-001", "good"), ("ph-es-002", "again"), ("ph-es-003", "easy")]),
        (25, vec![("ph-es-001", "hard"), ("ph-es-002", "good"), ("ph-es-003", "good")]),
        (3, vec![("ph-es-003", "good")]),
    ];
    for learner in learners {
        for (days, answers) in &sessions {
            let at = now - Duration::days(*days) + Duration::minutes(7);
            post_ok(app, learner, &session_at(Some(at), answers)).await;
        }
    }
    move_into_the_past(app, learners, 12).await;
    assert_eq!(app.count("phrase_checkpoints").await, 0);
}

/// Late and in-order sessions at every edge the checkpoints have, each checked against a replay
/// of the whole log right after it: in order past a phrase with no checkpoint (one at the settled
/// line; one just after the last answer for a phrase last answered within 31 days), in order past
/// a settled checkpoint (a second one), late between two checkpoints, late before every
/// checkpoint of a phrase, late exactly at a cut, late at the very `studied_at` of an earlier
/// session (a tie, by id), nearly 30 days old, 50 s in the future, then one without `studied_at`
/// (late against the future one), then another at the future one's time; phrases answered
/// several times in one session and phrases first answered by a late session. A twin learner
/// gets the same sessions newest first (ties kept in their order) and ends in the same states.
#[tokio::test]
async fn late_sessions_at_every_checkpoint_edge_agree_with_a_replay_of_the_whole_log() {
    let app = spawn_app().await;
    let (a, b) = ("edge-a", "edge-b");
    old_history(&app, &[a, b]).await;
    let now = now_seconds();
    let mut posted: Vec<Value> = Vec::new();
    let post = async |body: Value, posted: &mut Vec<Value>, what: &str| {
        let answer = post_ok(&app, a, &body).await;
        posted.push(as_recorded(&app, &body, &answer).await);
        assert_agrees_with_the_whole_log(&app, a, what).await;
    };

    let two_days = now - Duration::days(2) + Duration::microseconds(123_457);
    let body = session_at(
        Some(two_days),
        &[("ph-es-001", "good"), ("ph-es-002", "good"), ("ph-es-003", "hard")],
    );
    post(body, &mut posted, "in order, first checkpoints").await;
    for phrase in ["ph-es-001", "ph-es-002"] {
        let cut = cuts(&app, a, phrase).await;
        assert_eq!(cut.len(), 1, "{phrase}: {cut:?}");
        let age = now - cut[0];
        assert!(
            age > Duration::days(31) - Duration::minutes(5) && age < Duration::days(31) + Duration::minutes(5),
            "{phrase}: a checkpoint at the settled line, not {cut:?}"
        );
    }
    let last_003 = now - Duration::days(15) + Duration::minutes(7);
    assert_eq!(
        cuts(&app, a, "ph-es-003").await,
        [last_003 + Duration::microseconds(1)],
        "ph-es-003 last answered within 31 days: cut just after that answer"
    );

    let one_day = now - Duration::days(1) + Duration::microseconds(5);
    let body = session_at(Some(one_day), &[("ph-es-001", "easy"), ("ph-es-004", "good")]);
    post(body, &mut posted, "in order past a settled checkpoint").await;
    assert_eq!(cuts(&app, a, "ph-es-001").await.len(), 2);
    assert_eq!(
        cuts(&app, a, "ph-es-001").await[1],
        two_days + Duration::microseconds(1)
    );

    // ph-es-003: its only checkpoint (15 days ago) is after this session; ph-es-001: between its
    // two; ph-es-005: a first answer, given late; ph-es-003 three times.
    let body = session_at(
        Some(now - Duration::days(20)),
        &[
            ("ph-es-003", "again"),
            ("ph-es-001", "good"),
            ("ph-es-003", "good"),
            ("ph-es-005", "good"),
            ("ph-es-003", "hard"),
        ],
    );
    post(body, &mut posted, "late, before every checkpoint of ph-es-003").await;

    let hour = now - Duration::hours(1);
    let body = session_at(Some(hour), &[("ph-es-001", "good"), ("ph-es-002", "hard")]);
    post(body, &mut posted, "in order again").await;
    let cut_001 = *cuts(&app, a, "ph-es-001").await.last().unwrap();
    assert_eq!(cut_001, one_day + Duration::microseconds(1));

    let body = session_at(Some(cut_001), &[("ph-es-001", "again"), ("ph-es-001", "good")]);
    post(body, &mut posted, "late, exactly at a cut").await;

    // The very time of the first in-order session: after it (by id), before ph-es-002's cut.
    let body = session_at(Some(two_days), &[("ph-es-002", "easy"), ("ph-es-001", "hard")]);
    post(body, &mut posted, "late, tied with an earlier session").await;

    let body = session_at(
        Some(now - Duration::days(30) + Duration::minutes(2)),
        &[
            ("ph-es-001", "good"),
            ("ph-es-002", "again"),
            ("ph-es-003", "hard"),
            ("ph-es-004", "good"),
        ],
    );
    post(body, &mut posted, "late, nearly 30 days old").await;

    let ahead = Utc::now().duration_trunc(Duration::seconds(1)).unwrap() + Duration::seconds(50);
    let body = session_at(Some(ahead), &[("ph-es-002", "good"), ("ph-es-004", "hard")]);
    post(body, &mut posted, "50 s in the future").await;
    let body = session_at(None, &[("ph-es-002", "again"), ("ph-es-004", "good")]);
    post(body, &mut posted, "without studied_at, before the future one").await;
    let body = session_at(Some(ahead), &[("ph-es-004", "easy"), ("ph-es-006", "good")]);
    post(body, &mut posted, "tied with the future one").await;

    // The twin: newest first; sessions with the same time keep their order (so their ids do).
    let mut newest_first = posted.clone();
    newest_first.sort_by_key(|body| std::cmp::Reverse(studied_at_of(body)));
    for body in &newest_first {
        post_ok(&app, b, body).await;
    }
    assert_agrees_with_the_whole_log(&app, b, "the twin, newest first").await;
    assert_eq!(stored_states(&app, b).await, stored_states(&app, a).await);
}
