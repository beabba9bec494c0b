//! An adversarial review of the phrase-progress write path (late sessions, checkpoints, the
//! analytics export), by tests through HTTP and PostgreSQL.
//!
//! The oracle of most tests is [`assert_agrees_with_the_whole_log`]: every stored state must be
//! exactly what the FSRS domain module computes from the learner's whole review log in time
//! order (`studied_at`, then for sessions of the very same time their answers, then position),
//! every checkpoint exactly the state after its phrase's answers before its cut, and
//! `phrase_states.checkpoint_at` the newest cut. Three of them found bugs, fixed since: ties
//! ordered by arrival, and two in the previous releases' log writes (answers appended through
//! the old log's view, sessions before a cut in the future), paths gone since migration
//! 20261129400001, with their tests.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Duration, DurationRound, SecondsFormat, Utc};
use futures_util::future::join_all;
use lingo_service::domain::fsrs::{self, Grade, PhraseState, Review};
use serde_json::{Value, json};
use shared_auth::testing::{token, token_with_scope};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::helpers::{TestApp, move_into_the_past, spawn_app, stored_states};

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

/// A row of the review log: `studied_at`, session id, phrase ids, grades.
type LogRow = (DateTime<Utc>, Uuid, Vec<String>, Vec<i16>);

/// Every answer of `learner` per phrase, in the order the contract defines: `studied_at`, then
/// (sessions of the very same time) their answers' phrase ids and grades as bytes, then session id
/// (docs/lingo.md), then position in the session.
async fn whole_log(admin: &mut PgConnection, learner: &str) -> BTreeMap<String, Vec<Review>> {
    let rows: Vec<LogRow> = sqlx::query_as(
        "SELECT studied_at, session_id, phrase_ids, grades FROM lingo.phrase_review_sessions \
         WHERE learner_id = $1 \
         ORDER BY studied_at, phrase_ids::text[] COLLATE \"C\", grades, session_id",
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

    // The due counts per day (kept by triggers on the states) follow every rewrite.
    let drift: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT language_code, \
           (due_at AT TIME ZONE 'UTC')::date AS due_day, count(*)::int AS phrases \
           FROM lingo.phrase_states WHERE learner_id = $1 GROUP BY 1, 2) counted \
         FULL JOIN (SELECT * FROM lingo.phrase_due_days WHERE learner_id = $1) kept \
           USING (language_code, due_day) \
         WHERE counted.phrases IS DISTINCT FROM kept.phrases",
    )
    .bind(learner)
    .fetch_one(&mut admin)
    .await
    .unwrap();
    assert_eq!(drift, 0, "{what}: phrase_due_days of {learner}");
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
/// days ago, ph-es-003 15 days ago (each plus 7 minutes); none has a checkpoint yet. Returns the
/// time those ages count from.
async fn old_history(app: &TestApp, learners: &[&str]) -> DateTime<Utc> {
    let now = now_seconds();
    let sessions = [
        (
            28,
            vec![
                ("ph-es-001", "good"),
                ("ph-es-002", "again"),
                ("ph-es-003", "easy"),
            ],
        ),
        (
            25,
            vec![
                ("ph-es-001", "hard"),
                ("ph-es-002", "good"),
                ("ph-es-003", "good"),
            ],
        ),
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
    now
}

/// Late and in-order sessions at every edge the checkpoints have, each checked against a replay
/// of the whole log right after it: in order past a phrase with no checkpoint (one at the settled
/// line; one just after the last answer for a phrase last answered within 31 days), in order past
/// a settled checkpoint (a second one), late between two checkpoints, late before every
/// checkpoint of a phrase, late exactly at a cut, late at the very `studied_at` of an earlier
/// session (a tie, by id), nearly 30 days old, 40 s in the future, then one without `studied_at`
/// (late against the future one), then another at the future one's time; phrases answered
/// several times in one session and phrases first answered by a late session. A twin learner
/// gets the same sessions newest first (ties kept in their order) and ends in the same states.
#[tokio::test]
async fn late_sessions_at_every_checkpoint_edge_agree_with_a_replay_of_the_whole_log() {
    let app = spawn_app().await;
    let (a, b) = ("edge-a", "edge-b");
    let history_base = old_history(&app, &[a, b]).await;
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
        &[
            ("ph-es-001", "good"),
            ("ph-es-002", "good"),
            ("ph-es-003", "hard"),
        ],
    );
    post(body, &mut posted, "in order, first checkpoints").await;
    for phrase in ["ph-es-001", "ph-es-002"] {
        let cut = cuts(&app, a, phrase).await;
        assert_eq!(cut.len(), 1, "{phrase}: {cut:?}");
        let age = now - cut[0];
        assert!(
            age > Duration::days(31) - Duration::minutes(5)
                && age < Duration::days(31) + Duration::minutes(5),
            "{phrase}: a checkpoint at the settled line, not {cut:?}"
        );
    }
    let last_003 = history_base - Duration::days(15) + Duration::minutes(7);
    assert_eq!(
        cuts(&app, a, "ph-es-003").await,
        [last_003 + Duration::microseconds(1)],
        "ph-es-003 last answered within 31 days: cut just after that answer"
    );

    let one_day = now - Duration::days(1) + Duration::microseconds(5);
    let body = session_at(
        Some(one_day),
        &[("ph-es-001", "easy"), ("ph-es-004", "good")],
    );
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
    post(
        body,
        &mut posted,
        "late, before every checkpoint of ph-es-003",
    )
    .await;

    let hour = now - Duration::hours(1);
    let body = session_at(Some(hour), &[("ph-es-001", "good"), ("ph-es-002", "hard")]);
    post(body, &mut posted, "in order again").await;
    let cut_001 = *cuts(&app, a, "ph-es-001").await.last().unwrap();
    assert_eq!(cut_001, one_day + Duration::microseconds(1));

    let body = session_at(
        Some(cut_001),
        &[("ph-es-001", "again"), ("ph-es-001", "good")],
    );
    post(body, &mut posted, "late, exactly at a cut").await;

    // The very time of the first in-order session: after it (by id), before ph-es-002's cut.
    let body = session_at(
        Some(two_days),
        &[("ph-es-002", "easy"), ("ph-es-001", "hard")],
    );
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

    let ahead = Utc::now().duration_trunc(Duration::seconds(1)).unwrap() + Duration::seconds(40);
    let body = session_at(Some(ahead), &[("ph-es-002", "good"), ("ph-es-004", "hard")]);
    post(body, &mut posted, "40 s in the future").await;
    let body = session_at(None, &[("ph-es-002", "again"), ("ph-es-004", "good")]);
    post(
        body,
        &mut posted,
        "without studied_at, before the future one",
    )
    .await;
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

/// Sessions spread over the last 29 days (and one 30 s ahead) over five phrases, some twice in a
/// session: `(minutes before now, answers)`, all times distinct.
fn spread_sessions(now: DateTime<Utc>, wave: i64) -> Vec<Value> {
    let grades = ["again", "hard", "good", "easy"];
    let phrases = [
        "ph-es-001",
        "ph-es-002",
        "ph-es-003",
        "ph-es-004",
        "ph-es-005",
    ];
    (0..12i64)
        .map(|i| {
            // Newest first in the list, so most arrive late; one 30 s in the future.
            let minutes = (i * 3_517 + wave * 1_111) % (29 * 24 * 60);
            let at = if i == 5 {
                now + Duration::seconds(30)
            } else {
                now - Duration::minutes(minutes + 1) + Duration::microseconds(i + 1)
            };
            let answers: Vec<(&str, &str)> = (0..1 + (i + wave) % 4)
                .map(|j| {
                    let k = (i * 7 + j * 3 + wave) as usize;
                    (phrases[k % phrases.len()], grades[(k / 2) % grades.len()])
                })
                .collect();
            session_at(Some(at), &answers)
        })
        .collect()
}

/// A learner with a history older than 31 days sends twelve sessions at once (late ones, in-order
/// ones that write first checkpoints, one ahead), then twelve more at once: every answer is in
/// the log once, and every state and checkpoint is the replay of the whole log, as for a twin
/// that sent the same sessions one by one in time order.
#[tokio::test]
async fn concurrent_late_and_in_order_sessions_writing_first_checkpoints_agree_with_the_log() {
    let app = spawn_app().await;
    let (busy, calm) = ("conc-busy", "conc-calm");
    old_history(&app, &[busy, calm]).await;
    let mut sent = 0;
    for wave in 0..2 {
        let now = now_seconds();
        let sessions = spread_sessions(now, wave);
        sent += sessions
            .iter()
            .map(|s| s["answers"].as_array().unwrap().len())
            .sum::<usize>();
        let busy_token = token(busy);
        let responses = join_all(
            sessions
                .iter()
                .map(|body| app.post_session(&busy_token, body)),
        )
        .await;
        for response in responses {
            assert_eq!(response.status(), 201);
        }
        assert_agrees_with_the_whole_log(&app, busy, &format!("wave {wave}, at once")).await;
        let mut in_time_order = sessions.clone();
        in_time_order.sort_by_key(studied_at_of);
        for body in &in_time_order {
            post_ok(&app, calm, body).await;
        }
        assert_agrees_with_the_whole_log(&app, calm, &format!("wave {wave}, in order")).await;
        assert_eq!(
            stored_states(&app, busy).await,
            stored_states(&app, calm).await
        );
    }
    assert!(
        !cuts(&app, busy, "ph-es-001").await.is_empty(),
        "the waves wrote checkpoints"
    );
    let mut admin = app.admin().await;
    let logged: i64 = sqlx::query_scalar(
        "SELECT sum(cardinality(phrase_ids))::bigint FROM lingo.phrase_review_sessions \
         WHERE learner_id = $1",
    )
    .bind(busy)
    .fetch_one(&mut admin)
    .await
    .unwrap();
    assert_eq!(
        logged as usize,
        sent + 7,
        "the waves' answers and the history's 7"
    );
}

/// Two sessions with the very same `studied_at` sent at once, five times over: each phrase's
/// state is the replay with the two in id order (docs/lingo.md: "sessions with the very same
/// `studied_at` by their id"), whichever took the learner's lock first.
#[tokio::test]
async fn sessions_sent_at_once_with_the_same_studied_at_apply_in_id_order() {
    let app = spawn_app().await;
    let at = now_seconds() - Duration::days(2);
    for n in 0..5 {
        let learner = format!("tie-{n}");
        post_ok(
            &app,
            &learner,
            &session_at(Some(at - Duration::days(3)), &[("ph-es-001", "good")]),
        )
        .await;
        let first = session_at(Some(at), &[("ph-es-001", "again"), ("ph-es-002", "easy")]);
        let second = session_at(Some(at), &[("ph-es-001", "easy"), ("ph-es-002", "again")]);
        let responses = join_all([
            app.post_session(&token(&learner), &first),
            app.post_session(&token(&learner), &second),
        ])
        .await;
        for response in responses {
            assert_eq!(response.status(), 201);
        }
        assert_agrees_with_the_whole_log(&app, &learner, "a tie sent at once").await;
    }
}

/// The contract: "the order in which sessions arrive never changes the result". Two sessions
/// with the very same `studied_at` (two devices, times to the second) end alike in either
/// arrival order: they are ordered by their answers, not by their ids, which the service makes
/// on arrival (UUIDv7).
#[tokio::test]
async fn two_sessions_with_the_same_studied_at_end_alike_in_either_arrival_order() {
    let app = spawn_app().await;
    let at = now_seconds() - Duration::days(2);
    let first = session_at(Some(at), &[("ph-es-001", "again")]);
    let second = session_at(Some(at), &[("ph-es-001", "easy")]);
    for body in [&first, &second] {
        post_ok(&app, "tie-ab", body).await;
    }
    for body in [&second, &first] {
        post_ok(&app, "tie-ba", body).await;
    }
    assert_eq!(
        stored_states(&app, "tie-ba").await,
        stored_states(&app, "tie-ab").await
    );
}

/// Everything a session can have written: the learner's sessions, log, totals, states (with
/// `updated_at` and `checkpoint_at`) and checkpoints, as text.
async fn everything_of(app: &TestApp, learner: &str) -> Vec<String> {
    let mut admin = app.admin().await;
    let mut all = Vec::new();
    for statement in [
        "SELECT s::text FROM lingo.study_sessions s WHERE learner_id = $1 ORDER BY id",
        "SELECT r::text FROM lingo.phrase_review_sessions r WHERE learner_id = $1 \
         ORDER BY studied_at, session_id",
        "SELECT t::text FROM lingo.learner_language_totals t WHERE learner_id = $1",
        "SELECT l::text FROM lingo.learners l WHERE learner_id = $1",
        "SELECT s::text FROM lingo.phrase_states s WHERE learner_id = $1 ORDER BY phrase_id",
        "SELECT c::text FROM lingo.phrase_checkpoints c WHERE learner_id = $1 \
         ORDER BY phrase_id, cut",
    ] {
        let rows: Vec<String> = sqlx::query_scalar(statement)
            .bind(learner)
            .fetch_all(&mut admin)
            .await
            .unwrap();
        all.extend(rows);
    }
    all
}

/// An idempotent replay of an in-order session that wrote checkpoints, after a late session and
/// another in-order one changed them, answers the first response and writes nothing at all: no
/// state (not even its `updated_at`), no checkpoint, no log row.
#[tokio::test]
async fn an_idempotent_replay_after_checkpoints_moved_writes_nothing() {
    let app = spawn_app().await;
    let learner = "idem-ck";
    old_history(&app, &[learner]).await;
    let now = now_seconds();
    let keyed = session_at(
        Some(now - Duration::days(2)),
        &[("ph-es-001", "good"), ("ph-es-002", "hard")],
    )
    .to_string();
    let first = app
        .post_raw(SESSIONS, &token(learner), &keyed, Some("ck-key"))
        .await;
    assert_eq!(first.status(), 201);
    let first: Value = first.json().await.unwrap();
    assert_eq!(cuts(&app, learner, "ph-es-001").await.len(), 1);
    post_ok(
        &app,
        learner,
        &session_at(Some(now - Duration::days(10)), &[("ph-es-001", "again")]),
    )
    .await;
    post_ok(
        &app,
        learner,
        &session_at(
            Some(now - Duration::days(1)),
            &[("ph-es-001", "good"), ("ph-es-002", "good")],
        ),
    )
    .await;
    assert_agrees_with_the_whole_log(&app, learner, "before the replay").await;
    let before = everything_of(&app, learner).await;

    let again = app
        .post_raw(SESSIONS, &token(learner), &keyed, Some("ck-key"))
        .await;
    assert_eq!(again.status(), 201);
    assert_eq!(again.headers()["idempotency-replayed"], "true");
    let again: Value = again.json().await.unwrap();
    assert_eq!(again, first);
    assert_eq!(everything_of(&app, learner).await, before);
}

/// A session timed ahead (up to 60 s) that advances a phrase may cut a checkpoint just after the
/// phrase's last answer, in the future. Sessions before that cut are late for the phrase and
/// their replay removes the checkpoint; none can come between the answer and the cut. Checked
/// with sessions before the cut (sent with a time, and timed on arrival) and between the cut and
/// the newest answer.
#[tokio::test]
async fn a_checkpoint_cut_in_the_future_never_misses_a_session_before_it() {
    let app = spawn_app().await;
    let learner = "ahead";
    old_history(&app, &[learner]).await;
    let now = Utc::now().duration_trunc(Duration::seconds(1)).unwrap();
    // In order and ahead: the first leaves a checkpoint at the settled line; the second one just
    // after the first, 30 s from now.
    let ahead = now + Duration::seconds(30);
    post_ok(
        &app,
        learner,
        &session_at(Some(ahead), &[("ph-es-001", "good")]),
    )
    .await;
    post_ok(
        &app,
        learner,
        &session_at(Some(now + Duration::seconds(45)), &[("ph-es-001", "good")]),
    )
    .await;
    let newest_cut = *cuts(&app, learner, "ph-es-001").await.last().unwrap();
    assert_eq!(newest_cut, ahead + Duration::microseconds(1));
    assert!(newest_cut > Utc::now(), "{newest_cut} is not in the future");
    assert_agrees_with_the_whole_log(&app, learner, "a cut in the future").await;

    for (studied_at, what) in [
        (
            Some(now + Duration::seconds(20)),
            "before the cut, sent ahead",
        ),
        (None, "before the cut, timed on arrival"),
        (
            Some(now + Duration::seconds(38)),
            "between the cut and the newest answer",
        ),
    ] {
        post_ok(
            &app,
            learner,
            &session_at(studied_at, &[("ph-es-001", "hard"), ("ph-es-002", "easy")]),
        )
        .await;
        assert_agrees_with_the_whole_log(&app, learner, what).await;
    }
}

fn analyst() -> String {
    token_with_scope("review-analyst", "lingo:analytics")
}

/// One walk of the phrase-progress export from `since` (or the start) to its end, page by page
/// through `next_cursor`: its rows in order.
async fn export_walk(app: &TestApp, since: Option<&str>) -> Vec<Value> {
    let mut rows = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match (&cursor, since) {
            (Some(cursor), _) => format!("{EXPORT}?limit=3&cursor={cursor}"),
            (None, Some(since)) => format!("{EXPORT}?limit=3&updated_since={since}"),
            (None, None) => format!("{EXPORT}?limit=3"),
        };
        let response = app.get(&path, Some(&analyst())).await;
        assert_eq!(response.status(), 200, "{path}");
        let body: Value = response.json().await.unwrap();
        rows.extend(body["data"].as_array().unwrap().iter().cloned());
        match body["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return rows,
        }
    }
}

fn key_of(row: &Value) -> (String, String) {
    (
        row["learner_id"].as_str().unwrap().to_owned(),
        row["phrase_id"].as_str().unwrap().to_owned(),
    )
}

/// The export is copied incrementally by `updated_at`: an idempotent replay and a session without
/// answers move no state's `updated_at`, a late session moves exactly the states it touches.
#[tokio::test]
async fn the_export_sees_exactly_the_states_a_session_changes() {
    let app = spawn_app().await;
    let learner = "exp-moves";
    let now = now_seconds();
    let four = [
        ("ph-es-001", "good"),
        ("ph-es-002", "hard"),
        ("ph-es-003", "again"),
        ("ph-es-004", "easy"),
    ];
    post_ok(
        &app,
        learner,
        &session_at(Some(now - Duration::days(2)), &four),
    )
    .await;
    let keyed = session_at(Some(now - Duration::days(1)), &four[..2]).to_string();
    let first = app
        .post_raw(SESSIONS, &token(learner), &keyed, Some("exp-key"))
        .await;
    assert_eq!(first.status(), 201);
    app.settle_export_horizon().await;
    assert_eq!(export_walk(&app, None).await.len(), 4);

    let later = (now_seconds() + Duration::seconds(1)).to_rfc3339_opts(SecondsFormat::Secs, true);
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let again = app
        .post_raw(SESSIONS, &token(learner), &keyed, Some("exp-key"))
        .await;
    assert_eq!(again.headers()["idempotency-replayed"], "true");
    let no_answers = json!({"duration_seconds": 60, "phrases_seen": 3, "phrases_correct": 2,
        "language_code": "es"});
    post_ok(&app, learner, &no_answers).await;
    app.settle_export_horizon().await;
    assert_eq!(export_walk(&app, Some(&later)).await, Vec::<Value>::new());

    post_ok(
        &app,
        learner,
        &session_at(Some(now - Duration::days(3)), &[("ph-es-003", "good")]),
    )
    .await;
    app.settle_export_horizon().await;
    let moved = export_walk(&app, Some(&later)).await;
    let keys: Vec<(String, String)> = moved.iter().map(key_of).collect();
    assert_eq!(keys, [(learner.to_owned(), "ph-es-003".to_owned())]);
    assert_eq!(moved[0]["reviews"], 2);
}

/// An analytics tool copies the export page by page (three rows a page) while 48 sessions of six
/// learners are written at once, restarting from the latest `updated_at` it has seen whenever a
/// walk ends: once the writes are over, its copy (the newest row it saw per learner and phrase)
/// is exactly the export read afresh. No row is stamped behind a page it has already passed.
#[tokio::test]
async fn an_export_copied_during_concurrent_writes_misses_no_state() {
    let app = spawn_app().await;
    let now = now_seconds();
    let done = std::sync::atomic::AtomicBool::new(false);
    let app = &app;
    let writers = async {
        let posts = (0..48i64).map(|i| {
            let learner = format!("exp-conc-{}", i % 6);
            let at = now - Duration::hours(1 + (i * 37) % (24 * 25));
            let answers: Vec<(&str, &str)> = (0..1 + i % 5)
                .map(|j| {
                    let phrase = ["ph-es-001", "ph-es-002", "ph-es-003", "ph-es-004"]
                        [((i + j) % 4) as usize];
                    (phrase, if (i + j) % 3 == 0 { "again" } else { "good" })
                })
                .collect();
            let body = session_at(Some(at), &answers);
            async move {
                let response = app.post_session(&token(&learner), &body).await;
                assert_eq!(response.status(), 201);
            }
        });
        join_all(posts).await;
        done.store(true, std::sync::atomic::Ordering::SeqCst);
    };
    let copier = async {
        let mut copy: BTreeMap<(String, String), Value> = BTreeMap::new();
        let mut since: Option<String> = None;
        loop {
            let finished = done.load(std::sync::atomic::Ordering::SeqCst);
            if finished {
                app.settle_export_horizon().await;
            }
            let walk = export_walk(app, since.as_deref()).await;
            let stamps: Vec<&str> = walk
                .iter()
                .map(|r| r["updated_at"].as_str().unwrap())
                .collect();
            assert!(
                stamps.is_sorted(),
                "one walk is in updated_at order: {stamps:?}"
            );
            for row in walk {
                since = Some(row["updated_at"].as_str().unwrap().to_owned());
                copy.insert(key_of(&row), row);
            }
            if finished {
                return copy;
            }
        }
    };
    let ((), copy) = tokio::join!(writers, copier);
    let fresh: BTreeMap<(String, String), Value> = export_walk(app, None)
        .await
        .into_iter()
        .map(|row| (key_of(&row), row))
        .collect();
    assert_eq!(fresh.len(), 6 * 4);
    assert_eq!(copy, fresh);
}

/// A learner's very first sessions, ten at once (the learner row and the language's totals do not
/// exist yet), over overlapping phrases, some late against others: each phrase is started once
/// and every state is the replay of the whole log.
#[tokio::test]
async fn a_new_learners_first_sessions_sent_at_once_start_each_phrase_once() {
    let app = spawn_app().await;
    let learner = "brand-new";
    let now = now_seconds();
    let sessions: Vec<Value> = (0..10i64)
        .map(|i| {
            let at = now - Duration::hours(1 + (i * 53) % 200);
            let answers: Vec<(&str, &str)> = (0..2 + i % 3)
                .map(|j| {
                    let phrase = [
                        "ph-es-001",
                        "ph-es-002",
                        "ph-es-003",
                        "ph-es-004",
                        "ph-es-005",
                    ][((i * 2 + j) % 5) as usize];
                    (phrase, if j == 1 { "hard" } else { "good" })
                })
                .collect();
            session_at(Some(at), &answers)
        })
        .collect();
    let learner_token = token(learner);
    let responses = join_all(
        sessions
            .iter()
            .map(|body| app.post_session(&learner_token, body)),
    )
    .await;
    for response in responses {
        assert_eq!(response.status(), 201);
    }
    assert_agrees_with_the_whole_log(&app, learner, "first sessions at once").await;
    assert_eq!(stored_states(&app, learner).await.len(), 5);
}
