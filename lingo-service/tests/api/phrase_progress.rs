//! Phrase progress (docs/lingo.md, "Phrase progress"): answers in study sessions, `studied_at`,
//! the FSRS-6 states against the Python reference, late and concurrent sessions, the three reads.

use chrono::{DateTime, Duration, DurationRound, SubsecRound, Utc};
use futures_util::future::join_all;
use serde::Deserialize;
use serde_json::{Value, json};
use shared_auth::testing::{token, token_with_scope};

use crate::helpers::{
    TestApp, answered_session as answered, assert_problem, assert_timestamp, error_fields, key_set,
    keys, move_into_the_past, now_seconds, phrase_item_keys, post_created as post_ok, rfc3339,
    spawn_app, stored_states,
};

const SESSIONS: &str = "/v1/lingo/me/study-sessions";
const MY_PHRASES: &str = "/v1/lingo/me/phrases";
const REVIEWS: &str = "/v1/lingo/me/reviews";
const EXPORT: &str = "/v1/lingo/analytics/phrase-progress";

async fn get_json(app: &TestApp, path: &str, learner: &str) -> Value {
    let response = app.get(path, Some(learner)).await;
    assert_eq!(response.status(), 200, "{path}");
    assert_eq!(
        response.headers()["cache-control"],
        "private, no-store",
        "{path}"
    );
    response.json().await.unwrap()
}

/// Every phrase progress of `learner`, read page by page through `next_cursor`.
async fn all_my_phrases(app: &TestApp, learner: &str, query: &str) -> Vec<Value> {
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(cursor) => format!("{MY_PHRASES}?limit=7&cursor={cursor}"),
            None => format!("{MY_PHRASES}?limit=7{query}"),
        };
        let body = get_json(app, &path, learner).await;
        assert_eq!(keys(&body), key_set(&["data", "count", "next_cursor"]));
        let data = body["data"].as_array().unwrap();
        assert_eq!(body["count"], data.len());
        all.extend(data.iter().cloned());
        match body["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return all,
        }
    }
}

/// Every answer in the review log (one row per session, its answers in arrays).
async fn logged_answers(app: &TestApp) -> i64 {
    let mut admin = app.admin().await;
    sqlx::query_scalar(
        "SELECT coalesce(sum(cardinality(phrase_ids)), 0)::bigint \
         FROM lingo.phrase_review_sessions",
    )
    .fetch_one(&mut admin)
    .await
    .unwrap()
}

/// Sessions, answers in the review log, and phrase states.
async fn counts(app: &TestApp) -> (i64, i64, i64) {
    (
        app.count("study_sessions").await,
        logged_answers(app).await,
        app.count("phrase_states").await,
    )
}

/// Review-log rows whose session is missing, another learner's, another time's or of another
/// answer count, and sessions with answers but no log row: there is no foreign key from the
/// review log to its sessions (migrations 20261127400001 and 20261128100001), the statement that
/// writes a session writes its answers.
async fn answers_without_their_session(app: &TestApp) -> i64 {
    let mut admin = app.admin().await;
    sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM lingo.phrase_review_sessions r WHERE NOT EXISTS ( \
           SELECT 1 FROM lingo.study_sessions s WHERE s.id = r.session_id \
             AND s.learner_id = r.learner_id AND s.studied_at = r.studied_at \
             AND s.answer_count = cardinality(r.phrase_ids))) \
         + (SELECT count(*) FROM lingo.study_sessions s WHERE s.answer_count > 0 \
             AND NOT EXISTS (SELECT 1 FROM lingo.phrase_review_sessions r \
               WHERE r.learner_id = s.learner_id AND r.studied_at = s.studied_at \
                 AND r.session_id = s.id))",
    )
    .fetch_one(&mut admin)
    .await
    .unwrap()
}

#[tokio::test]
async fn every_refusal_names_its_code_and_field_and_stores_nothing() {
    let app = spawn_app().await;
    let learner = token("strict");
    let now = now_seconds();
    let ok = answered(
        "es",
        None,
        &[("ph-es-001", true, None), ("ph-es-002", false, None)],
    );

    // (body, status, code, fields)
    let mut too_many = answered("es", None, &vec![("ph-es-001", true, None); 1001]);
    too_many["phrases_seen"] = json!(1001);
    let mut seen_off = ok.clone();
    seen_off["phrases_seen"] = json!(3);
    let mut both_off = ok.clone();
    both_off["phrases_seen"] = json!(1);
    both_off["phrases_correct"] = json!(0);
    let mut empty_answers = ok.clone();
    empty_answers["answers"] = json!([]);
    let mut unknown_field = ok.clone();
    unknown_field["answers"][0]["learner_id"] = json!("x");
    let mut bad_grade = ok.clone();
    bad_grade["answers"][0]["grade"] = json!("perfect");
    let with_at = |at: &str| {
        let mut body = ok.clone();
        body["studied_at"] = json!(at);
        body
    };
    let cases: Vec<(Value, &str, Vec<&str>)> = vec![
        (
            answered("es", None, &[("ph-es-001", true, Some("again"))]),
            "validation_failed",
            vec!["answers[0].grade"],
        ),
        (
            answered(
                "es",
                None,
                &[
                    ("ph-es-001", true, Some("easy")),
                    ("ph-es-002", false, Some("hard")),
                    ("ph-es-003", false, Some("good")),
                ],
            ),
            "validation_failed",
            vec!["answers[1].grade", "answers[2].grade"],
        ),
        (too_many, "validation_failed", vec!["answers"]),
        (
            unknown_field,
            "validation_failed",
            vec!["answers[0].learner_id"],
        ),
        (bad_grade, "validation_failed", vec!["answers[0].grade"]),
        (seen_off, "answers_mismatch", vec!["phrases_seen"]),
        (
            both_off,
            "answers_mismatch",
            vec!["phrases_seen", "phrases_correct"],
        ),
        (
            empty_answers,
            "answers_mismatch",
            vec!["phrases_seen", "phrases_correct"],
        ),
        (
            answered(
                "es",
                None,
                &[
                    ("ph-es-001", true, None),
                    ("ph-es-002", true, None),
                    ("no-such-phrase", true, None),
                    ("ph-fr-001", true, None),
                ],
            ),
            "unknown_phrase",
            // Every bad answer is named, as every bad field of a 422 is.
            vec!["answers[2].phrase_id", "answers[3].phrase_id"],
        ),
        (
            answered(
                "es",
                None,
                &[("ph-es-001", true, None), ("ph-fr-001", false, None)],
            ),
            "unknown_phrase",
            vec!["answers[1].phrase_id"],
        ),
        (
            answered("es", None, &[("ph-es-001\u{0}", true, None)]),
            "unknown_phrase",
            vec!["answers[0].phrase_id"],
        ),
        (
            with_at(&rfc3339(now - Duration::days(30) - Duration::minutes(1))),
            "invalid_studied_at",
            vec!["studied_at"],
        ),
        (
            with_at(&rfc3339(now + Duration::minutes(2))),
            "invalid_studied_at",
            vec!["studied_at"],
        ),
        (
            with_at("2026-11-27"),
            "invalid_studied_at",
            vec!["studied_at"],
        ),
        (
            with_at("last tuesday"),
            "invalid_studied_at",
            vec!["studied_at"],
        ),
    ];
    for (body, code, fields) in cases {
        let response = app.post_session(&learner, &body).await;
        let problem = assert_problem(response, 422, code).await;
        if !fields.is_empty() {
            assert_eq!(error_fields(&problem), fields, "{problem}");
        }
    }
    assert_eq!(
        counts(&app).await,
        (0, 0, 0),
        "a refused session stores nothing"
    );

    // The edges of the window are accepted.
    for at in [
        now - Duration::days(30) + Duration::minutes(1),
        now + Duration::seconds(50),
    ] {
        let created = post_ok(&app, &learner, &with_at(&rfc3339(at))).await;
        assert_eq!(created["studied_at"], rfc3339(at));
        assert_eq!(created["answer_count"], 2);
    }
}

/// A learner with stored states takes the other path of the phrase check: it is counted in the
/// statement that reads those states, after the session's own statement, which must then be
/// rolled back with everything else.
#[tokio::test]
async fn unknown_phrases_beside_stored_states_name_their_answers_and_store_nothing() {
    let app = spawn_app().await;
    let learner = token("known-and-unknown");
    let first = answered(
        "es",
        None,
        &[("ph-es-001", true, None), ("ph-es-002", false, None)],
    );
    post_ok(&app, &learner, &first).await;
    let before = counts(&app).await;
    let states_before = get_json(&app, MY_PHRASES, &learner).await;

    let cases = [
        (
            vec![
                ("ph-es-001", true, None),
                ("no-such-phrase", true, None),
                ("ph-es-002", true, None),
            ],
            vec!["answers[1].phrase_id"],
        ),
        (
            vec![("ph-es-002", true, None), ("ph-fr-001", true, None)],
            vec!["answers[1].phrase_id"],
        ),
        (
            vec![("ph-es-003", true, None), ("ph-fr-001", false, None)],
            vec!["answers[1].phrase_id"],
        ),
        (
            vec![
                ("ph-fr-001", true, None),
                ("ph-es-001", true, None),
                ("no-such-phrase", false, None),
                ("ph-fr-001", true, None),
            ],
            vec![
                "answers[0].phrase_id",
                "answers[2].phrase_id",
                "answers[3].phrase_id",
            ],
        ),
    ];
    for (answers, fields) in cases {
        let body = answered("es", None, &answers);
        let response = app.post_session(&learner, &body).await;
        let problem = assert_problem(response, 422, "unknown_phrase").await;
        assert_eq!(error_fields(&problem), fields, "{problem}");
    }
    assert_eq!(
        counts(&app).await,
        before,
        "a refused session stores nothing"
    );
    assert_eq!(get_json(&app, MY_PHRASES, &learner).await, states_before);
}

#[tokio::test]
async fn a_session_reports_studied_at_and_answer_count_and_streaks_follow_it() {
    let app = spawn_app().await;
    let learner = token("offline");
    let today = now_seconds()
        .duration_trunc(Duration::days(1))
        .expect("day");
    // Without answers: studied_at is created_at and nothing is answered.
    let plain = post_ok(
        &app,
        &learner,
        &json!({"duration_seconds": 60, "phrases_seen": 3, "phrases_correct": 2, "language_code": "es"}),
    )
    .await;
    assert_eq!(plain["studied_at"], plain["created_at"]);
    assert_eq!(plain["answer_count"], 0);

    // Offline sessions 3 and 2 days ago (sent now): the streak runs over their days.
    let three_days_ago = today - Duration::days(3) + Duration::hours(10);
    let two_days_ago = today - Duration::days(2) + Duration::hours(23);
    for at in [three_days_ago, two_days_ago] {
        let created = post_ok(
            &app,
            &learner,
            &answered("es", Some(at), &[("ph-es-010", true, None)]),
        )
        .await;
        assert_eq!(created["studied_at"], rfc3339(at));
        assert_ne!(created["created_at"], created["studied_at"]);
        let location = format!("{SESSIONS}/{}", created["id"].as_str().unwrap());
        let shown = get_json(&app, &location, &learner).await;
        assert_eq!(shown["studied_at"], rfc3339(at));
        assert_eq!(shown["answer_count"], 1);
    }
    let progress = get_json(&app, "/v1/lingo/me/progress", &learner).await;
    assert_eq!(
        progress["data"][0]["first_studied_at"],
        rfc3339(three_days_ago)
    );
    assert_eq!(progress["longest_streak_days"], 2);
    assert_eq!(
        progress["current_streak_days"], 1,
        "today only: the run of 2 ended 2 days ago"
    );
    assert_eq!(progress["totals"]["phrases_started"], 1);
    assert_eq!(progress["data"][0]["phrases_started"], 1);
    // Answered 2 days ago with stability of a few days: due again only later.
    assert_eq!(progress["totals"]["phrases_due"], 0);
}

#[derive(Deserialize)]
struct Vectors {
    cases: Vec<Case>,
    learners: Vec<LearnerHistory>,
}

/// A learner's sessions, the order to post them in, and the reference's final states
/// (tests/fsrs/make_vectors.py, `learner`).
#[derive(Deserialize)]
struct LearnerHistory {
    name: String,
    sessions: Vec<HistorySession>,
    post_order: Vec<usize>,
    states: Vec<FinalState>,
}

#[derive(Deserialize)]
struct HistorySession {
    at: DateTime<Utc>,
    language: String,
    answers: Vec<HistoryAnswer>,
}

#[derive(Deserialize)]
struct HistoryAnswer {
    phrase: String,
    grade: u8,
    /// Whether the grade is sent, or left to its default (`again` when wrong, `good` when right).
    sent: bool,
}

#[derive(Deserialize)]
struct FinalState {
    phrase: String,
    stability: f64,
    difficulty: f64,
    due: DateTime<Utc>,
    interval_unrounded: f64,
    reviews: usize,
    correct: usize,
    lapses: usize,
    first: DateTime<Utc>,
    last: DateTime<Utc>,
    last_grade: String,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    answers: Vec<Answer>,
}

#[derive(Deserialize)]
struct Answer {
    grade: u8,
    at: DateTime<Utc>,
    stability: f64,
    difficulty: f64,
    due: DateTime<Utc>,
    interval_unrounded: f64,
}

const GRADES: [&str; 4] = ["again", "hard", "good", "easy"];

fn close(got: &Value, expected: f64) -> bool {
    let got = got.as_f64().unwrap();
    (got - expected).abs() <= 1e-4 * expected.abs()
}

/// The reference's histories that fit in the 30 days `studied_at` allows, posted through HTTP
/// (answers with the same time in one session), read back with `GET /me/phrases`.
#[tokio::test]
async fn states_match_the_python_reference_through_http() {
    let app = spawn_app().await;
    let learner = token("reference");
    let vectors: Vectors = serde_json::from_str(include_str!("../fsrs/vectors.json")).unwrap();
    let fits = |case: &&Case| {
        let span = case.answers.last().unwrap().at - case.answers[0].at;
        span <= Duration::days(29)
    };
    let cases: Vec<&Case> = vectors.cases.iter().filter(fits).collect();
    assert!(cases.len() >= 20, "{} cases fit", cases.len());
    assert!(cases.iter().any(|c| c.answers.len() >= 5));
    let start = now_seconds() - Duration::days(29) - Duration::hours(1);
    let mut expected = std::collections::BTreeMap::new();
    for (n, case) in cases.iter().enumerate() {
        assert!(n < 48, "one Spanish phrase per case");
        let phrase = format!("ph-es-{:03}", n + 1);
        let shift = start - case.answers[0].at;
        let mut i = 0;
        while i < case.answers.len() {
            let at = case.answers[i].at;
            let same: Vec<(&str, bool, Option<&str>)> = case.answers[i..]
                .iter()
                .take_while(|a| a.at == at)
                .map(|a| {
                    (
                        phrase.as_str(),
                        a.grade != 1,
                        Some(GRADES[usize::from(a.grade) - 1]),
                    )
                })
                .collect();
            i += same.len();
            post_ok(&app, &learner, &answered("es", Some(at + shift), &same)).await;
        }
        expected.insert(phrase, (*case, shift));
    }

    let all = all_my_phrases(&app, &learner, "").await;
    assert_eq!(all.len(), expected.len());
    for progress in &all {
        let (case, shift) = expected[progress["phrase"]["id"].as_str().unwrap()];
        let last = case.answers.last().unwrap();
        let what = &case.name;
        assert!(
            close(&progress["stability_days"], last.stability),
            "{what}: {progress}"
        );
        assert!(
            close(&progress["difficulty"], last.difficulty),
            "{what}: {progress}"
        );
        let due: DateTime<Utc> = progress["due_at"].as_str().unwrap().parse().unwrap();
        let off = (due - (last.due + shift)).num_seconds().abs();
        let boundary = (last.interval_unrounded.fract() - 0.5).abs() < 0.01;
        assert!(off == 0 || (boundary && off == 86_400), "{what}: due {due}");
        assert_eq!(progress["reviews"], case.answers.len(), "{what}");
        let correct = case.answers.iter().filter(|a| a.grade != 1).count();
        assert_eq!(progress["correct"], correct, "{what}");
        let lapses = case.answers.iter().skip(1).filter(|a| a.grade == 1).count();
        assert_eq!(progress["lapses"], lapses, "{what}");
        assert_eq!(progress["last_grade"], GRADES[usize::from(last.grade) - 1]);
        assert_eq!(
            progress["first_reviewed_at"],
            rfc3339(case.answers[0].at + shift)
        );
        assert_eq!(progress["last_reviewed_at"], rfc3339(last.at + shift));
    }
}

/// Whole learner histories of the reference (several phrases and languages, sessions across UTC
/// midnight, a phrase several times in one session, grades sent or defaulted, times to the
/// microsecond), posted in time order, reversed or shuffled: every phrase ends in the state the
/// reference computes from its answers in time order.
#[tokio::test]
async fn learner_histories_match_the_python_reference_in_any_arrival_order() {
    let app = spawn_app().await;
    let vectors: Vectors = serde_json::from_str(include_str!("../fsrs/vectors.json")).unwrap();
    assert!(vectors.learners.len() >= 6);
    // Whole days, so that sessions keep their time of day (and their midnights): the histories
    // lie within days 0..=27 of their first day, moved to end by yesterday.
    let first_day = vectors
        .learners
        .iter()
        .flat_map(|history| &history.sessions)
        .map(|session| session.at.date_naive())
        .min()
        .unwrap();
    let shift = (Utc::now().date_naive() - Duration::days(29)) - first_day;
    for history in &vectors.learners {
        let what = &history.name;
        let learner = token(&format!("reference-{}", what.replace([' ', '#'], "")));
        assert_eq!(history.post_order.len(), history.sessions.len());
        for &i in &history.post_order {
            let session = &history.sessions[i];
            assert!(
                session.at.date_naive() - first_day < Duration::days(28),
                "{what}"
            );
            let answers: Vec<Value> = session
                .answers
                .iter()
                .map(|a| {
                    let mut answer = json!({"phrase_id": a.phrase, "correct": a.grade != 1});
                    if a.sent {
                        answer["grade"] = json!(GRADES[usize::from(a.grade) - 1]);
                    }
                    answer
                })
                .collect();
            let studied_at =
                (session.at + shift).to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
            let body = json!({
                "duration_seconds": 60,
                "phrases_seen": answers.len(),
                "phrases_correct": session.answers.iter().filter(|a| a.grade != 1).count(),
                "language_code": session.language,
                "studied_at": studied_at,
                "answers": answers,
            });
            post_ok(&app, &learner, &body).await;
        }
        let all = all_my_phrases(&app, &learner, "").await;
        assert_eq!(all.len(), history.states.len(), "{what}");
        for expected in &history.states {
            let what = format!("{what} {}", expected.phrase);
            let progress = all
                .iter()
                .find(|p| p["phrase"]["id"] == expected.phrase.as_str())
                .unwrap_or_else(|| panic!("{what}: missing"));
            assert!(
                close(&progress["stability_days"], expected.stability),
                "{what}: {progress}"
            );
            assert!(
                close(&progress["difficulty"], expected.difficulty),
                "{what}: {progress}"
            );
            let due: DateTime<Utc> = progress["due_at"].as_str().unwrap().parse().unwrap();
            let off = (due - (expected.due + shift).trunc_subsecs(0))
                .num_seconds()
                .abs();
            let boundary = (expected.interval_unrounded.fract() - 0.5).abs() < 0.01;
            assert!(off == 0 || (boundary && off == 86_400), "{what}: due {due}");
            assert_eq!(progress["reviews"], expected.reviews, "{what}");
            assert_eq!(progress["correct"], expected.correct, "{what}");
            assert_eq!(progress["lapses"], expected.lapses, "{what}");
            assert_eq!(
                progress["last_grade"],
                expected.last_grade.as_str(),
                "{what}"
            );
            assert_eq!(
                progress["first_reviewed_at"],
                rfc3339(expected.first + shift),
                "{what}"
            );
            assert_eq!(
                progress["last_reviewed_at"],
                rfc3339(expected.last + shift),
                "{what}"
            );
        }
    }
}

/// An answer: phrase id, correct, grade.
type AnswerSpec = (&'static str, bool, Option<&'static str>);

/// Sessions of one learner over three weeks, several touching the same phrases, one with a
/// phrase twice: `(days before now, answers)`.
fn history() -> Vec<(i64, Vec<AnswerSpec>)> {
    vec![
        (
            21,
            vec![
                ("ph-es-001", true, None),
                ("ph-es-002", false, None),
                ("ph-es-003", true, Some("easy")),
            ],
        ),
        (
            20,
            vec![("ph-es-002", true, Some("hard")), ("ph-es-002", true, None)],
        ),
        (
            15,
            vec![
                ("ph-es-001", false, None),
                ("ph-es-004", true, None),
                ("ph-es-003", true, None),
            ],
        ),
        (15, vec![("ph-es-001", true, Some("hard"))]),
        (
            9,
            vec![
                ("ph-es-002", true, Some("easy")),
                ("ph-es-004", false, None),
                ("ph-es-005", true, None),
            ],
        ),
        (
            4,
            vec![
                ("ph-es-001", true, None),
                ("ph-es-003", false, None),
                ("ph-es-005", true, Some("easy")),
            ],
        ),
        (
            1,
            vec![("ph-es-004", true, None), ("ph-es-002", true, None)],
        ),
    ]
}

fn history_sessions(now: DateTime<Utc>) -> Vec<Value> {
    history()
        .iter()
        .enumerate()
        .map(|(i, (days, answers))| {
            // Distinct times even on the same day.
            let at = now - Duration::days(*days) + Duration::minutes(i as i64);
            answered("es", Some(at), answers)
        })
        .collect()
}

/// The answers of `GET /me/phrases` without what depends on the moment of the request.
fn states(all: &[Value]) -> Vec<Value> {
    all.iter()
        .map(|p| {
            let mut p = p.clone();
            p.as_object_mut().unwrap().remove("retrievability");
            p
        })
        .collect()
}

#[tokio::test]
async fn the_order_sessions_arrive_in_never_changes_the_states() {
    let app = spawn_app().await;
    let now = now_seconds() - Duration::hours(1);
    let sessions = history_sessions(now);
    let (in_order, reversed, shuffled) = (token("in-order"), token("reversed"), token("shuffled"));
    for session in &sessions {
        post_ok(&app, &in_order, session).await;
    }
    for session in sessions.iter().rev() {
        post_ok(&app, &reversed, session).await;
    }
    for i in [3, 0, 6, 1, 5, 2, 4] {
        post_ok(&app, &shuffled, &sessions[i]).await;
    }
    let expected = all_my_phrases(&app, &in_order, "").await;
    assert_eq!(expected.len(), 5);
    assert_eq!(all_my_phrases(&app, &reversed, "").await, expected);
    assert_eq!(
        states(&all_my_phrases(&app, &shuffled, "").await),
        states(&expected)
    );

    // ph-es-001: good, again, hard (same day), good -> 4 answers, 1 lapse.
    let first = expected
        .iter()
        .find(|p| p["phrase"]["id"] == "ph-es-001")
        .unwrap();
    assert_eq!(
        (
            first["reviews"].as_i64(),
            first["lapses"].as_i64(),
            first["correct"].as_i64()
        ),
        (Some(4), Some(1), Some(3))
    );
    assert_eq!(first["last_grade"], "good");
    // Ordered by due date, then id.
    let order: Vec<(String, String)> = expected
        .iter()
        .map(|p| {
            (
                p["due_at"].as_str().unwrap().to_owned(),
                p["phrase"]["id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(order, sorted);

    for learner in [&in_order, &reversed] {
        let progress = get_json(&app, "/v1/lingo/me/progress", learner).await;
        assert_eq!(progress["totals"]["phrases_started"], 5);
        assert_eq!(progress["totals"]["phrases_seen"], 17);
    }
}

#[tokio::test]
async fn concurrent_sessions_of_one_learner_count_every_answer_once() {
    let app = spawn_app().await;
    let learner = token("busy");
    let now = now_seconds() - Duration::hours(1);
    let phrases = [
        "ph-es-001",
        "ph-es-002",
        "ph-es-003",
        "ph-es-004",
        "ph-es-005",
    ];
    // 20 sessions on 20 different days, all touching the same five phrases, sent at once.
    let sessions: Vec<Value> = (0..20i64)
        .map(|i| {
            let answers: Vec<(&str, bool, Option<&str>)> = phrases
                .iter()
                .enumerate()
                .map(|(j, phrase)| (*phrase, !(i as usize + j).is_multiple_of(4), None))
                .collect();
            answered("es", Some(now - Duration::days(20 - i)), &answers)
        })
        .collect();
    let responses = join_all(sessions.iter().map(|body| app.post_session(&learner, body))).await;
    for response in responses {
        assert_eq!(response.status(), 201);
    }
    let all = all_my_phrases(&app, &learner, "").await;
    assert_eq!(all.len(), 5);
    for progress in &all {
        assert_eq!(progress["reviews"], 20, "{progress}");
        assert_eq!(progress["correct"], 15, "{progress}");
    }
    assert_eq!(logged_answers(&app).await, 100);
    assert_eq!(app.count("phrase_review_sessions").await, 20);
    assert_eq!(answers_without_their_session(&app).await, 0);
    let progress = get_json(&app, "/v1/lingo/me/progress", &learner).await;
    assert_eq!(progress["totals"]["phrases_seen"], 100);
    assert_eq!(progress["totals"]["sessions"], 20);
    assert_eq!(progress["totals"]["phrases_started"], 5);

    // The same sessions one by one in time order give the same states.
    let calm = token("calm");
    for body in &sessions {
        post_ok(&app, &calm, body).await;
    }
    assert_eq!(states(&all_my_phrases(&app, &calm, "").await), states(&all));
}

/// `due_at` is shown to the second, and the lists are ordered by it, then by phrase id, as a
/// client sees them: two sessions within one second (an app's `studied_at` to the microsecond)
/// make phrases due in the same second, which then come by id, whichever was answered first.
#[tokio::test]
async fn phrases_due_in_the_same_second_come_by_id() {
    let app = spawn_app().await;
    let learner = token("same-second");
    let second = now_seconds() - Duration::days(3);
    // ph-es-001 answered 0.7 s into the second, ph-es-002 0.2 s: both `good`, due in 2 days.
    for (phrase, micros) in [("ph-es-001", 700_000), ("ph-es-002", 200_000)] {
        let at = second + Duration::microseconds(micros);
        let mut body = answered("es", None, &[(phrase, true, None)]);
        body["studied_at"] = json!(at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true));
        post_ok(&app, &learner, &body).await;
    }
    let due = rfc3339(second + Duration::days(2));
    let ids = |list: &[Value]| -> Vec<String> {
        list.iter()
            .map(|p| {
                assert_eq!(p["due_at"], due.as_str(), "{p}");
                p["phrase"]["id"].as_str().unwrap().to_owned()
            })
            .collect()
    };
    let by_id = vec!["ph-es-001".to_owned(), "ph-es-002".to_owned()];
    // Page by page (limit 7 in all_my_phrases, then one by one through the cursor).
    assert_eq!(ids(&all_my_phrases(&app, &learner, "").await), by_id);
    let first = get_json(&app, &format!("{MY_PHRASES}?limit=1"), &learner).await;
    let cursor = first["next_cursor"].as_str().unwrap();
    let second_page = get_json(
        &app,
        &format!("{MY_PHRASES}?limit=1&cursor={cursor}"),
        &learner,
    )
    .await;
    let pages: Vec<Value> = [first, second_page]
        .iter()
        .flat_map(|page| page["data"].as_array().unwrap().clone())
        .collect();
    assert_eq!(ids(&pages), by_id);
    let reviews = get_json(&app, REVIEWS, &learner).await;
    assert_eq!(reviews["due_total"], 2);
    assert_eq!(ids(reviews["data"].as_array().unwrap()), by_id);
}

#[tokio::test]
async fn a_replayed_session_with_answers_writes_nothing_twice() {
    let app = spawn_app().await;
    let learner = token("replayer");
    let body = answered(
        "es",
        Some(now_seconds() - Duration::days(3)),
        &[
            ("ph-es-001", true, None),
            ("ph-es-002", false, None),
            ("ph-es-001", true, Some("easy")),
        ],
    )
    .to_string();
    let first = app.post_raw(SESSIONS, &learner, &body, Some("key-1")).await;
    assert_eq!(first.status(), 201);
    let first: Value = first.json().await.unwrap();
    let before = all_my_phrases(&app, &learner, "").await;
    let counted = counts(&app).await;
    assert_eq!(counted, (1, 3, 2));
    assert_eq!(app.count("phrase_review_sessions").await, 1);

    let again = app.post_raw(SESSIONS, &learner, &body, Some("key-1")).await;
    assert_eq!(again.status(), 201);
    assert_eq!(again.headers()["idempotency-replayed"], "true");
    let again: Value = again.json().await.unwrap();
    assert_eq!(again, first);
    assert_eq!(counts(&app).await, counted);
    assert_eq!(app.count("phrase_review_sessions").await, 1);
    assert_eq!(answers_without_their_session(&app).await, 0);
    assert_eq!(all_my_phrases(&app, &learner, "").await, before);
    let progress = get_json(&app, "/v1/lingo/me/progress", &learner).await;
    assert_eq!(progress["totals"]["phrases_seen"], 3);
    assert_eq!(progress["totals"]["phrases_started"], 2);
}

#[tokio::test]
async fn my_phrases_pages_by_cursor_with_its_filters_and_reviews_show_what_is_due() {
    let app = spawn_app().await;
    let learner = token("pager");
    let now = now_seconds();
    // Ten Spanish phrases answered 25 days ago (due now), five French ones answered today.
    let spanish: Vec<String> = (1..=10).map(|n| format!("ph-es-{n:03}")).collect();
    let answers: Vec<(&str, bool, Option<&str>)> =
        spanish.iter().map(|p| (p.as_str(), true, None)).collect();
    post_ok(
        &app,
        &learner,
        &answered("es", Some(now - Duration::days(25)), &answers),
    )
    .await;
    let french: Vec<String> = (1..=5).map(|n| format!("ph-fr-{n:03}")).collect();
    let answers: Vec<(&str, bool, Option<&str>)> =
        french.iter().map(|p| (p.as_str(), false, None)).collect();
    post_ok(&app, &learner, &answered("fr", None, &answers)).await;

    let all = all_my_phrases(&app, &learner, "").await;
    assert_eq!(all.len(), 15);
    let progress_keys = key_set(&[
        "phrase",
        "reviews",
        "correct",
        "lapses",
        "first_reviewed_at",
        "last_reviewed_at",
        "last_grade",
        "stability_days",
        "difficulty",
        "due_at",
        "retrievability",
    ]);
    for progress in &all {
        assert_eq!(keys(progress), progress_keys);
        assert_timestamp(&progress["due_at"]);
        let r = progress["retrievability"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&r));
        assert_eq!(keys(&progress["phrase"]), phrase_item_keys());
    }
    // The overdue Spanish phrases first, in id order (same due date), then the French ones.
    let ids: Vec<&str> = all
        .iter()
        .map(|p| p["phrase"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        &ids[..10],
        spanish.iter().map(String::as_str).collect::<Vec<_>>()
    );
    // A Spanish phrase answered 25 days ago with stability ~2.3 days is long overdue.
    assert!(all[0]["retrievability"].as_f64().unwrap() < 0.9);
    assert_eq!(all[14]["retrievability"], 1.0, "answered today");

    let due = all_my_phrases(&app, &learner, "&due=true").await;
    assert_eq!(due.len(), 10);
    let french_only = all_my_phrases(&app, &learner, "&language=fr").await;
    assert_eq!(french_only.len(), 5);
    assert!(
        french_only
            .iter()
            .all(|p| p["phrase"]["language_code"] == "fr" && p["lapses"] == 0)
    );
    assert!(
        all_my_phrases(&app, &learner, "&language=xx")
            .await
            .is_empty()
    );
    assert!(
        all_my_phrases(&app, &learner, "&language=fr&due=true")
            .await
            .is_empty()
    );

    // A cursor keeps its filters; other filters with it, offsets and bad values are refused.
    let page = get_json(&app, &format!("{MY_PHRASES}?language=es&limit=3"), &learner).await;
    let cursor = page["next_cursor"].as_str().unwrap().to_owned();
    let next = get_json(
        &app,
        &format!("{MY_PHRASES}?cursor={cursor}&language=es"),
        &learner,
    )
    .await;
    assert_eq!(next["count"], 7);
    assert_eq!(next["data"][0]["phrase"]["id"], "ph-es-004");
    let analyst = token_with_scope("analyst", "lingo:analytics");
    let export = get_json(&app, &format!("{EXPORT}?limit=1"), &analyst).await;
    let foreign = export["next_cursor"].as_str().unwrap().to_owned();
    for (query, code) in [
        (format!("cursor={cursor}&language=fr"), "invalid_cursor"),
        (format!("cursor={cursor}&due=true"), "invalid_cursor"),
        (format!("cursor={foreign}"), "invalid_cursor"),
        ("cursor=bm9wZQ".to_owned(), "invalid_cursor"),
        (format!("cursor={cursor}&offset=0"), "invalid_query"),
        ("offset=3".to_owned(), "invalid_query"),
        ("limit=0".to_owned(), "invalid_query"),
        ("limit=101".to_owned(), "invalid_query"),
        ("due=maybe".to_owned(), "invalid_query"),
    ] {
        let response = app
            .get(&format!("{MY_PHRASES}?{query}"), Some(&learner))
            .await;
        assert_problem(response, 400, code).await;
    }

    let reviews = get_json(&app, &format!("{REVIEWS}?limit=4"), &learner).await;
    assert_eq!(keys(&reviews), key_set(&["data", "count", "due_total"]));
    assert_eq!(
        (reviews["count"].as_i64(), reviews["due_total"].as_i64()),
        (Some(4), Some(10))
    );
    assert_eq!(reviews["data"][0], due[0]);
    let reviews = get_json(&app, &format!("{REVIEWS}?language=fr"), &learner).await;
    assert_eq!(
        (reviews["count"].as_i64(), reviews["due_total"].as_i64()),
        (Some(0), Some(0))
    );
    assert_problem(
        app.get(&format!("{REVIEWS}?limit=0"), Some(&learner)).await,
        400,
        "invalid_query",
    )
    .await;
    for path in [MY_PHRASES, REVIEWS] {
        assert_problem(app.get(path, None).await, 401, "missing_token").await;
    }

    let progress = get_json(&app, "/v1/lingo/me/progress", &learner).await;
    assert_eq!(progress["totals"]["phrases_started"], 15);
    assert_eq!(progress["totals"]["phrases_due"], 10);
    let by_language: Vec<(String, i64, i64)> = progress["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["language_code"].as_str().unwrap().to_owned(),
                l["phrases_started"].as_i64().unwrap(),
                l["phrases_due"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        by_language,
        [("es".to_owned(), 10, 10), ("fr".to_owned(), 5, 0)]
    );
}

#[tokio::test]
async fn the_phrase_progress_export_pages_every_state_once_and_needs_its_scope() {
    let app = spawn_app().await;
    for (n, learner) in ["exp-a", "exp-b", "exp-c"].iter().enumerate() {
        let phrases: Vec<String> = (1..=n + 2).map(|i| format!("ph-de-{i:03}")).collect();
        let answers: Vec<(&str, bool, Option<&str>)> =
            phrases.iter().map(|p| (p.as_str(), true, None)).collect();
        post_ok(&app, &token(learner), &answered("de", None, &answers)).await;
    }
    app.settle_export_horizon().await;
    let analyst = token_with_scope("analyst", "lingo:analytics");
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(cursor) => format!("{EXPORT}?limit=2&cursor={cursor}"),
            None => format!("{EXPORT}?limit=2"),
        };
        let body = get_json(&app, &path, &analyst).await;
        for row in body["data"].as_array().unwrap() {
            assert_eq!(
                keys(row),
                key_set(&[
                    "learner_id",
                    "phrase_id",
                    "language_code",
                    "reviews",
                    "correct",
                    "lapses",
                    "last_reviewed_at",
                    "last_grade",
                    "stability_days",
                    "difficulty",
                    "due_at",
                    "updated_at",
                ])
            );
            seen.push((
                row["learner_id"].as_str().unwrap().to_owned(),
                row["phrase_id"].as_str().unwrap().to_owned(),
            ));
        }
        match body["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen.len(), 2 + 3 + 4);
    let mut unique = seen.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), seen.len());

    // Incremental: nothing changed after the latest update but a new answer.
    let later = rfc3339(now_seconds() + Duration::seconds(1));
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    post_ok(
        &app,
        &token("exp-a"),
        &answered("de", None, &[("ph-de-001", false, None)]),
    )
    .await;
    app.settle_export_horizon().await;
    let body = get_json(&app, &format!("{EXPORT}?updated_since={later}"), &analyst).await;
    assert_eq!(body["count"], 1, "{body}");
    assert_eq!(body["data"][0]["learner_id"], "exp-a");
    assert_eq!(body["data"][0]["lapses"], 1);

    let response = app.get(EXPORT, Some(&token("exp-a"))).await;
    assert_problem(response, 403, "insufficient_scope").await;
    let response = app.get(&format!("{EXPORT}?offset=1"), Some(&analyst)).await;
    assert_problem(response, 400, "invalid_query").await;
}

/// Many learners' states, so that the planner would rather scan the table if no index fit.
async fn fill_states(app: &TestApp) {
    let mut admin = app.admin().await;
    sqlx::query(
        "INSERT INTO lingo.phrase_states (learner_id, phrase_id, language_code, stability, \
           difficulty, due_at, reviews, correct, lapses, first_reviewed_at, last_reviewed_at, \
           last_grade, updated_at) \
         SELECT 'bulk-' || l, p.id, p.language_code, 1 + (l % 50), 5, \
           now() - interval '10 days' + (l % 30) * interval '1 day', 3, 2, 1, \
           now() - interval '40 days', now() - interval '10 days', 3, now() \
         FROM generate_series(1, 400) AS l CROSS JOIN lingo.phrases p",
    )
    .execute(&mut admin)
    .await
    .unwrap();
    sqlx::query("ANALYZE lingo.phrase_states")
        .execute(&mut admin)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_learners_reads_use_an_index_on_the_learner_never_a_scan_of_all_states() {
    let app = spawn_app().await;
    fill_states(&app).await;
    assert!(app.count("phrase_states").await >= 100_000);
    let mut admin = app.admin().await;
    sqlx::query("SET search_path = lingo")
        .execute(&mut admin)
        .await
        .unwrap();
    let plans = lingo_service::store::phrase_progress::explain_learner_reads(
        &mut admin,
        "bulk-7",
        "es",
        Utc::now(),
    )
    .await
    .unwrap();
    assert_eq!(plans.len(), 8);
    for plan in &plans {
        assert!(!plan.contains("Seq Scan on phrase_states"), "{plan}");
        assert!(plan.contains("phrase_states_language_due_idx"), "{plan}");
    }
    // One plan for every learner and time: the reads hide their values from the planner, so a
    // learner the statistics do not know, another language and another month are planned (and
    // estimated) exactly alike, and PostgreSQL's plan cache keeps the generic plan for all.
    let elsewhere = lingo_service::store::phrase_progress::explain_learner_reads(
        &mut admin,
        "nobody",
        "fr",
        Utc::now() - Duration::days(40),
    )
    .await
    .unwrap();
    assert_eq!(plans, elsewhere);
}

/// `GET /analytics/progress` counts each row's `phrases_due` as `GET /me/progress` does, from
/// the due days (and today's phrases on one side of the time), not state by state: a page of
/// 100 learners with 8,000 phrases due each counted 800,000 states (129 ms on the bench cluster).
/// The counts agree with plain SQL for every row.
#[tokio::test]
async fn the_progress_export_counts_due_phrases_by_day_not_state_by_state() {
    let app = spawn_app().await;
    fill_states(&app).await;
    let mut admin = app.admin().await;
    sqlx::raw_sql(
        "INSERT INTO lingo.learner_language_totals (learner_id, language_code, sessions, \
           total_duration_seconds, phrases_seen, phrases_correct, xp, first_studied_at, \
           last_studied_at, updated_at, phrases_started) \
         SELECT learner_id, language_code, 1, 60, 1, 1, 11, min(first_reviewed_at), \
           max(last_reviewed_at), now() - interval '1 minute', count(*) \
         FROM lingo.phrase_states GROUP BY learner_id, language_code; \
         ANALYZE lingo.learner_language_totals, lingo.phrase_due_days;",
    )
    .execute(&mut admin)
    .await
    .unwrap();

    sqlx::query("SET search_path = lingo")
        .execute(&mut admin)
        .await
        .unwrap();
    let plan = lingo_service::store::progress::explain_export_page(&mut admin, Utc::now())
        .await
        .unwrap();
    assert!(plan.contains("phrase_due_days"), "{plan}");
    assert!(!plan.contains("Seq Scan on phrase_states"), "{plan}");

    let expected: std::collections::HashMap<(String, String), i64> = sqlx::query_as(
        "SELECT learner_id, language_code, count(*) FILTER (WHERE due_at <= now()) \
         FROM lingo.phrase_states GROUP BY learner_id, language_code",
    )
    .fetch_all(&mut admin)
    .await
    .unwrap()
    .into_iter()
    .map(|(learner, language, due): (String, String, i64)| ((learner, language), due))
    .collect();
    assert!(expected.values().any(|due| *due > 0) && expected.values().any(|due| *due == 0));
    app.settle_export_horizon().await;
    let analyst = token_with_scope("analyst", "lingo:analytics");
    let (mut cursor, mut seen) = (None::<String>, 0);
    loop {
        let path = match &cursor {
            Some(cursor) => format!("/v1/lingo/analytics/progress?limit=100&cursor={cursor}"),
            None => "/v1/lingo/analytics/progress?limit=100".to_owned(),
        };
        let response = app.get(&path, Some(&analyst)).await;
        assert_eq!(response.status(), 200);
        let body: Value = response.json().await.unwrap();
        for row in body["data"].as_array().unwrap() {
            let key = (
                row["learner_id"].as_str().unwrap().to_owned(),
                row["language_code"].as_str().unwrap().to_owned(),
            );
            assert_eq!(row["phrases_due"].as_i64(), Some(expected[&key]), "{row}");
            seen += 1;
        }
        cursor = body["next_cursor"].as_str().map(str::to_owned);
        if cursor.is_none() {
            break;
        }
    }
    assert_eq!(seen, expected.len());
}

/// The due counts and pages at chosen times of one day, against plain counts and orderings of
/// `phrase_states`: today's phrases are counted on either side of the time (before noon from the
/// day's start, after it as the day's count less those still to come), and a page over all
/// languages is a merge of per-language scans, which must interleave the languages exactly.
#[tokio::test]
async fn due_counts_and_pages_agree_with_plain_sql_at_every_time_of_day() {
    use lingo_service::domain::phrase_progress::{MyPhrasesCursor, MyPhrasesFilter};
    use lingo_service::store::phrase_progress::{due_by_language, list_for, reviews_for};

    let app = spawn_app().await;
    let learner = "clock";
    // A midnight, three days ago: its states are due the day before it to two days after it.
    let day = Utc::now().duration_trunc(Duration::days(1)).unwrap() - Duration::days(3);
    let mut admin = app.admin().await;
    // Every phrase of three languages (two at each due time, the languages interleaved), one
    // state whose phrase the catalogue no longer has (pages leave it out, counts count it), and
    // the Italian phrases due together early on the day, the Portuguese late: at 06:00 and 13:00
    // the side of the time counted first holds all of that language's day.
    sqlx::query(
        "INSERT INTO lingo.phrase_states (learner_id, phrase_id, language_code, stability, \
           difficulty, due_at, reviews, correct, lapses, first_reviewed_at, last_reviewed_at, \
           last_grade, updated_at) \
         SELECT $1, id, language_code, 2, 5, \
           $2 - interval '1 day' + ((n / 2) * 97 % 4320) * interval '1 minute', 1, 1, 0, \
           $2 - interval '9 days', $2 - interval '2 days', 3, now() \
         FROM (SELECT id, language_code, row_number() OVER (ORDER BY language_code, id) AS n \
               FROM lingo.phrases WHERE language_code IN ('de', 'es', 'fr')) p \
         UNION ALL SELECT $1, 'ph-gone', 'es', 2, 5, $2 + interval '7 hours', 1, 1, 0, \
           $2 - interval '9 days', $2 - interval '2 days', 3, now() \
         UNION ALL SELECT $1, id, language_code, 2, 5, $2 + CASE language_code \
             WHEN 'it' THEN interval '1 hour' ELSE interval '22 hours' END \
             + row_number() OVER (ORDER BY id) * interval '1 minute', 1, 1, 0, \
           $2 - interval '9 days', $2 - interval '2 days', 3, now() \
         FROM lingo.phrases WHERE language_code IN ('it', 'pt')",
    )
    .bind(learner)
    .bind(day)
    .execute(&mut admin)
    .await
    .unwrap();
    // Their totals, as sessions in those languages would have left them: a page reads the
    // learner's languages there.
    sqlx::query(
        "INSERT INTO lingo.learner_language_totals (learner_id, language_code, sessions, \
           total_duration_seconds, phrases_seen, phrases_correct, xp, first_studied_at, \
           last_studied_at, updated_at, phrases_started) \
         SELECT $1, language_code, 1, 60, count(*), count(*), 10, min(first_reviewed_at), \
           max(last_reviewed_at), now(), count(*) \
         FROM lingo.phrase_states WHERE learner_id = $1 GROUP BY language_code",
    )
    .bind(learner)
    .execute(&mut admin)
    .await
    .unwrap();
    let ordered = |due_by: Option<DateTime<Utc>>| {
        sqlx::query_scalar::<_, String>(
            "SELECT s.phrase_id FROM lingo.phrase_states s JOIN lingo.phrases p \
               ON p.id = s.phrase_id WHERE s.learner_id = $1 \
               AND ($2::timestamptz IS NULL OR s.due_at <= $2) ORDER BY s.due_at, s.phrase_id",
        )
        .bind(learner)
        .bind(due_by)
    };
    let every = ordered(None).fetch_all(&mut admin).await.unwrap();
    assert!(every.len() >= 60, "{}", every.len());

    let mut db = lingo_service::db::connect_one(&app.db.url_for("lingo_app"))
        .await
        .unwrap();
    // Every page of the whole list, seven at a time, by cursor.
    let (mut walked, mut cursor) = (Vec::new(), None::<MyPhrasesCursor>);
    let all = MyPhrasesFilter::default();
    loop {
        let page = list_for(&mut db, learner, &all, cursor.as_ref(), Utc::now(), 7)
            .await
            .unwrap();
        walked.extend(page.iter().map(|p| p.phrase.id.clone()));
        match page.last() {
            Some(last) if page.len() == 7 => {
                cursor = Some(MyPhrasesCursor::after(last.due_at, &last.phrase.id, &all));
            }
            _ => break,
        }
    }
    assert_eq!(walked, every);

    // The boundaries of the day and of noon, a due time itself (due at `now` is due), others.
    let a_due_time: DateTime<Utc> = sqlx::query_scalar(
        "SELECT min(due_at) FROM lingo.phrase_states WHERE learner_id = $1 AND due_at > $2",
    )
    .bind(learner)
    .bind(day + Duration::hours(15))
    .fetch_one(&mut admin)
    .await
    .unwrap();
    let offsets = [
        0,
        1,
        3 * 3600 + 7,
        6 * 3600,
        12 * 3600 - 1,
        12 * 3600,
        12 * 3600 + 1,
        13 * 3600,
        86_399,
    ];
    let times = offsets
        .map(|s| day + Duration::seconds(s))
        .into_iter()
        .chain([a_due_time, a_due_time - Duration::seconds(1)]);
    for now in times {
        let due: Vec<(String, i64)> = sqlx::query_as(
            "SELECT language_code, count(*) FROM lingo.phrase_states \
             WHERE learner_id = $1 AND due_at <= $2 GROUP BY 1 ORDER BY 1",
        )
        .bind(learner)
        .bind(now)
        .fetch_all(&mut admin)
        .await
        .unwrap();
        let total: i64 = due.iter().map(|(_, n)| n).sum();
        let (page, due_total) = reviews_for(&mut db, learner, None, now, 20).await.unwrap();
        assert_eq!(due_total, total, "at {now}");
        let expected = ordered(Some(now)).fetch_all(&mut admin).await.unwrap();
        let ids: Vec<String> = page.into_iter().map(|p| p.phrase.id).collect();
        assert_eq!(ids, expected[..expected.len().min(20)], "at {now}");
        let by_language = due_by_language(&mut db, learner, now).await.unwrap();
        for language in ["de", "es", "fr", "it", "pt"] {
            let counted = due
                .iter()
                .find(|(l, _)| l == language)
                .map_or(0, |(_, n)| *n);
            assert_eq!(by_language.get(language).copied().unwrap_or(0), counted);
            let (_, in_language) = reviews_for(&mut db, learner, Some(language), now, 5)
                .await
                .unwrap();
            assert_eq!(in_language, counted, "{language} at {now}");
        }
    }
}

#[tokio::test]
async fn the_demo_learner_has_reviews_after_the_seed() {
    let app = spawn_app().await;
    let app_url = app.db.url_for("lingo_app");
    let recorded = lingo_service::seed_demo_sessions(&app_url).await.unwrap();
    assert!(recorded >= 10, "{recorded}");
    assert_eq!(
        lingo_service::seed_demo_sessions(&app_url).await.unwrap(),
        0,
        "once"
    );
    let demo = token("demo-learner");
    let reviews = get_json(&app, REVIEWS, &demo).await;
    assert!(reviews["due_total"].as_i64().unwrap() > 0, "{reviews}");
    assert!(reviews["count"].as_i64().unwrap() > 0);
    let progress = get_json(&app, "/v1/lingo/me/progress", &demo).await;
    assert!(progress["totals"]["phrases_started"].as_i64().unwrap() >= 6);
    assert!(progress["longest_streak_days"].as_i64().unwrap() >= 2);
}

/// Rows of `phrase_due_days` that differ from a count of `phrase_states` by due day.
async fn due_days_drift(app: &TestApp) -> i64 {
    let mut admin = app.admin().await;
    sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT learner_id, language_code, \
           (due_at AT TIME ZONE 'UTC')::date AS due_day, count(*)::int AS phrases \
           FROM lingo.phrase_states GROUP BY 1, 2, 3) counted \
         FULL JOIN lingo.phrase_due_days kept USING (learner_id, language_code, due_day) \
         WHERE counted.phrases IS DISTINCT FROM kept.phrases",
    )
    .fetch_one(&mut admin)
    .await
    .unwrap()
}

async fn due_now(app: &TestApp, learner: &str, language: Option<&str>) -> i64 {
    let mut admin = app.admin().await;
    sqlx::query_scalar(
        "SELECT count(*) FROM lingo.phrase_states WHERE learner_id = $1 \
           AND ($2::text IS NULL OR language_code = $2) AND due_at <= now()",
    )
    .bind(learner)
    .bind(language)
    .fetch_one(&mut admin)
    .await
    .unwrap()
}

#[tokio::test]
async fn due_counts_per_day_follow_every_write_and_give_the_due_totals() {
    let app = spawn_app().await;
    let learner = "days";
    let bearer = token(learner);
    let now = now_seconds() - Duration::minutes(5);
    // Answers 25 to 1 days ago: some phrases fall due on past days, some today, some later;
    // then late sessions move them again, and concurrent ones update the same days at once.
    for days in [25i64, 20, 14, 9, 4, 1] {
        let grade = if days % 2 == 0 { "again" } else { "good" };
        let answers: Vec<(&str, bool, Option<&str>)> = ["ph-es-001", "ph-es-002", "ph-es-003"]
            .into_iter()
            .map(|p| (p, grade != "again", Some(grade)))
            .chain([("ph-es-004", days > 10, None)])
            .collect();
        post_ok(
            &app,
            &bearer,
            &answered("es", Some(now - Duration::days(days)), &answers),
        )
        .await;
    }
    post_ok(
        &app,
        &bearer,
        &answered(
            "fr",
            Some(now - Duration::days(3)),
            &[("ph-fr-001", false, None)],
        ),
    )
    .await;
    let late: Vec<Value> = [22i64, 12, 2]
        .iter()
        .map(|days| {
            answered(
                "es",
                Some(now - Duration::days(*days)),
                &[
                    ("ph-es-001", true, Some("easy")),
                    ("ph-es-005", false, None),
                ],
            )
        })
        .collect();
    for response in join_all(late.iter().map(|body| app.post_session(&bearer, body))).await {
        assert_eq!(response.status(), 201);
    }
    assert_eq!(due_days_drift(&app).await, 0);
    assert!(app.count("phrase_due_days").await >= 2);

    let reviews = get_json(&app, REVIEWS, &bearer).await;
    let due = due_now(&app, learner, None).await;
    assert!(due >= 2, "{reviews}");
    assert_eq!(reviews["due_total"].as_i64(), Some(due), "{reviews}");
    assert_eq!(reviews["count"].as_i64(), Some(due.min(20)));
    let in_fr = get_json(&app, &format!("{REVIEWS}?language=fr"), &bearer).await;
    assert_eq!(
        in_fr["due_total"].as_i64(),
        Some(due_now(&app, learner, Some("fr")).await)
    );
    let progress = get_json(&app, "/v1/lingo/me/progress", &bearer).await;
    assert_eq!(progress["totals"]["phrases_due"].as_i64(), Some(due));

    // A removal by the owner (the runtime role cannot delete) keeps the counts too.
    let mut admin = app.admin().await;
    sqlx::query("DELETE FROM lingo.phrase_states WHERE phrase_id = 'ph-es-001'")
        .execute(&mut admin)
        .await
        .unwrap();
    assert_eq!(due_days_drift(&app).await, 0);
    sqlx::query("TRUNCATE lingo.phrase_states")
        .execute(&mut admin)
        .await
        .unwrap();
    assert_eq!(app.count("phrase_due_days").await, 0);
}

/// Migration 20261128100001 moves the review log from one row per answer to one row per
/// session: every answer lands once, in its session's row, in `position` order (rows inserted
/// out of order here), and nothing else is kept; after the later migrations the old log is gone.
#[tokio::test]
async fn the_review_log_moves_to_one_row_per_session_without_losing_an_answer() {
    use sqlx::Connection;

    const ONE_ROW_PER_SESSION: i64 = 20261128100001;
    let db = shared_auth::testing::TestDatabase::create().await;
    let mut owner = sqlx::PgConnection::connect(&db.url_for("lingo_owner"))
        .await
        .unwrap();
    let all = sqlx::migrate!("./migrations");
    let mut before = sqlx::migrate!("./migrations");
    before.migrations = all
        .migrations
        .iter()
        .filter(|m| m.version < ONE_ROW_PER_SESSION)
        .cloned()
        .collect::<Vec<_>>()
        .into();
    before.run(&mut owner).await.unwrap();

    let studied = "2026-11-01T10:00:00Z";
    let later = "2026-11-02T10:00:00Z";
    sqlx::raw_sql(&format!(
        "INSERT INTO languages (code, name) VALUES ('es', 'Spanish'); \
         INSERT INTO study_sessions (id, learner_id, language_code, duration_seconds, \
           phrases_seen, phrases_correct, xp_awarded, created_at, studied_at, answer_count) VALUES \
           ('00000000-0000-7000-8000-000000000001', 'ana', 'es', 60, 3, 2, 12, '{studied}', '{studied}', 3), \
           ('00000000-0000-7000-8000-000000000002', 'ana', 'es', 60, 1, 1, 11, '{later}', '{later}', 1), \
           ('00000000-0000-7000-8000-000000000003', 'bo', 'es', 60, 2, 1, 11, '{studied}', '{studied}', 2), \
           ('00000000-0000-7000-8000-000000000004', 'bo', 'es', 60, 5, 5, 15, '{later}', '{later}', 0); \
         INSERT INTO phrase_reviews (learner_id, phrase_id, studied_at, session_id, position, grade) VALUES \
           ('ana', 'p-b', '{studied}', '00000000-0000-7000-8000-000000000001', 2, 3), \
           ('ana', 'p-a', '{studied}', '00000000-0000-7000-8000-000000000001', 0, 1), \
           ('ana', 'p-a', '{studied}', '00000000-0000-7000-8000-000000000001', 1, 4), \
           ('ana', 'p-a', '{later}', '00000000-0000-7000-8000-000000000002', 0, 2), \
           ('bo', 'p-c', '{studied}', '00000000-0000-7000-8000-000000000003', 1, 3), \
           ('bo', 'p-a', '{studied}', '00000000-0000-7000-8000-000000000003', 0, 1);"
    ))
    .execute(&mut owner)
    .await
    .unwrap();

    all.run(&mut owner).await.unwrap();
    // learner, day, session, phrase ids, grades
    type LogRow = (String, String, String, Vec<String>, Vec<i16>);
    let rows: Vec<LogRow> = sqlx::query_as(
        "SELECT learner_id, to_char(studied_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), \
           session_id::text, phrase_ids, grades \
         FROM phrase_review_sessions ORDER BY learner_id, studied_at",
    )
    .fetch_all(&mut owner)
    .await
    .unwrap();
    let strings = |ids: &[&str]| ids.iter().map(|id| id.to_string()).collect::<Vec<_>>();
    let session = |n: u8| format!("00000000-0000-7000-8000-00000000000{n}");
    assert_eq!(
        rows,
        vec![
            (
                "ana".into(),
                "2026-11-01".into(),
                session(1),
                strings(&["p-a", "p-a", "p-b"]),
                vec![1, 4, 3]
            ),
            (
                "ana".into(),
                "2026-11-02".into(),
                session(2),
                strings(&["p-a"]),
                vec![2]
            ),
            (
                "bo".into(),
                "2026-11-01".into(),
                session(3),
                strings(&["p-a", "p-c"]),
                vec![1, 3]
            ),
        ]
    );
    // The view of the new log that the move left in the old table's place, for the previous
    // release's pods, went once those rollouts were over (migration 20261129400001).
    let old_log: Option<String> = sqlx::query_scalar("SELECT to_regclass('phrase_reviews')::text")
        .fetch_one(&mut owner)
        .await
        .unwrap();
    assert_eq!(old_log, None, "the old log is gone");
}

/// What migrations kept for the previous releases' pods only is gone (migration
/// 20261129400001): the old log's view and its function, and the review log's triggers that
/// dropped checkpoints under late sessions, with their function. Nothing but the service writes
/// the review log or removes a checkpoint under a session.
#[tokio::test]
async fn nothing_kept_for_the_previous_releases_is_left() {
    let app = spawn_app().await;
    let mut admin = app.admin().await;
    let left: Vec<String> = sqlx::query_scalar(
        "SELECT tgname::text FROM pg_trigger \
         WHERE tgrelid = 'lingo.phrase_review_sessions'::regclass AND NOT tgisinternal \
         UNION ALL \
         SELECT 'lingo.phrase_reviews' WHERE to_regclass('lingo.phrase_reviews') IS NOT NULL \
         UNION ALL \
         SELECT name FROM unnest(ARRAY['lingo.phrase_reviews_append()', \
           'lingo.phrase_checkpoints_before_late_answers()']) AS f (name) \
         WHERE to_regprocedure(name) IS NOT NULL",
    )
    .fetch_all(&mut admin)
    .await
    .unwrap();
    assert_eq!(left, Vec::<String>::new());
}

/// A late session replays a phrase from its newest checkpoint at or before the session, not from
/// its first answer: the review log before the checkpoint is not read at all (here: learner
/// "ck-a" has that part of its log changed behind the service's back, and still ends exactly
/// where "ck-b", with the same answers and an intact log, ends). And starting from a checkpoint
/// gives exactly what a replay from the first answer gives ("ck-c", its checkpoints removed).
#[tokio::test]
async fn a_late_session_replays_from_a_checkpoint_not_from_the_first_answer() {
    let app = spawn_app().await;
    let learners = ["ck-a", "ck-b", "ck-c"];
    let now = now_seconds();
    let phrases = ["ph-es-001", "ph-es-002", "ph-es-003"];
    let session = |grades: [&'static str; 3]| -> Vec<(&'static str, bool, Option<&'static str>)> {
        phrases
            .iter()
            .zip(grades)
            .map(|(phrase, grade)| (*phrase, grade != "again", Some(grade)))
            .collect()
    };
    let post_all = async |at: DateTime<Utc>, grades: [&'static str; 3]| {
        for learner in learners {
            post_ok(
                &app,
                &token(learner),
                &answered("es", Some(at), &session(grades)),
            )
            .await;
        }
    };
    // A history of four sessions, then moved 60 days back: 88 to 67 days old.
    for (days, grades) in [
        (28, ["good", "again", "easy"]),
        (21, ["hard", "good", "good"]),
        (14, ["good", "good", "again"]),
        (7, ["easy", "again", "good"]),
    ] {
        post_all(now - Duration::days(days), grades).await;
    }
    move_into_the_past(&app, &learners, 60).await;
    assert_eq!(app.count("phrase_checkpoints").await, 0);
    // Two sessions in time order: the first keeps each phrase's state before it at the settled
    // line (31 days ago), the second the state before it too (just after the first).
    post_all(now - Duration::days(20), ["good", "hard", "good"]).await;
    post_all(now - Duration::days(10), ["again", "good", "easy"]).await;
    assert_eq!(app.count("phrase_checkpoints").await, 2 * 3 * 3);

    let mut admin = app.admin().await;
    sqlx::query(
        "UPDATE lingo.phrase_review_sessions \
         SET grades = array_fill(1::smallint, ARRAY[cardinality(grades)]) \
         WHERE learner_id = 'ck-a' AND studied_at < now() - interval '60 days'",
    )
    .execute(&mut admin)
    .await
    .unwrap();
    sqlx::query(
        "WITH gone AS (DELETE FROM lingo.phrase_checkpoints WHERE learner_id = 'ck-c') \
         UPDATE lingo.phrase_states SET checkpoint_at = NULL WHERE learner_id = 'ck-c'",
    )
    .execute(&mut admin)
    .await
    .unwrap();

    // Late sessions: between the two in-order ones (replayed from the newer checkpoint), then
    // before both (from the one at the settled line; the newer one it makes wrong goes).
    for (days, grades) in [
        (15, ["hard", "again", "good"]),
        (25, ["easy", "good", "again"]),
    ] {
        post_all(now - Duration::days(days), grades).await;
        let intact = stored_states(&app, "ck-b").await;
        assert_eq!(stored_states(&app, "ck-a").await, intact, "{days} days ago");
        assert_eq!(stored_states(&app, "ck-c").await, intact, "{days} days ago");
    }
    let reviews: Vec<i32> = sqlx::query_scalar(
        "SELECT reviews FROM lingo.phrase_states WHERE learner_id = 'ck-a' ORDER BY phrase_id",
    )
    .fetch_all(&mut admin)
    .await
    .unwrap();
    assert_eq!(reviews, [8, 8, 8]);
}

/// A small deterministic generator (SplitMix64), so a failing history can be replayed by its seed.
struct Dice(u64);

impl Dice {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n
    }
}

/// Six months of one history, lived through: each "month" a batch of sessions with `studied_at`
/// anywhere in the 29 days before now, then the whole history moved 20 to 40 days into the past
/// (time passing; checkpoints age with it and settle). Three learners get the same sessions:
/// "rnd-a" in the batch's order, "rnd-b" in another order each month, "rnd-c" in the first
/// order but with its checkpoints wiped before every session, so it always replays from the
/// first answer. After every batch all three hold the same states: checkpoints never change a
/// result, whatever the arrival order and however old the history.
#[tokio::test]
async fn checkpoints_never_change_a_state_over_months_of_late_and_in_order_sessions() {
    let app = spawn_app().await;
    let learners = ["rnd-a", "rnd-b", "rnd-c"];
    let phrases = [
        "ph-es-001",
        "ph-es-002",
        "ph-es-003",
        "ph-es-004",
        "ph-es-005",
    ];
    let grades = ["again", "hard", "good", "easy"];
    let mut dice = Dice(20261128);
    let mut admin = app.admin().await;
    for month in 0..6 {
        let now = now_seconds();
        let batch: Vec<Value> = (0..8)
            .map(|_| {
                let at = now - Duration::minutes(dice.below(29 * 24 * 60) as i64 + 1);
                let answers: Vec<(&str, bool, Option<&str>)> = (0..1 + dice.below(6))
                    .map(|_| {
                        let grade = grades[dice.below(4) as usize];
                        let phrase = phrases[dice.below(phrases.len() as u64) as usize];
                        (phrase, grade != "again", Some(grade))
                    })
                    .collect();
                answered("es", Some(at), &answers)
            })
            .collect();
        let mut shuffled: Vec<&Value> = batch.iter().collect();
        for i in (1..shuffled.len()).rev() {
            shuffled.swap(i, dice.below(i as u64 + 1) as usize);
        }
        for (in_order, other_order) in batch.iter().zip(shuffled) {
            post_ok(&app, &token("rnd-a"), in_order).await;
            post_ok(&app, &token("rnd-b"), other_order).await;
            sqlx::query(
                "WITH gone AS (DELETE FROM lingo.phrase_checkpoints WHERE learner_id = 'rnd-c') \
                 UPDATE lingo.phrase_states SET checkpoint_at = NULL WHERE learner_id = 'rnd-c'",
            )
            .execute(&mut admin)
            .await
            .unwrap();
            post_ok(&app, &token("rnd-c"), in_order).await;
        }
        let replayed = stored_states(&app, "rnd-c").await;
        assert_eq!(
            stored_states(&app, "rnd-a").await,
            replayed,
            "month {month}"
        );
        assert_eq!(
            stored_states(&app, "rnd-b").await,
            replayed,
            "month {month}"
        );
        move_into_the_past(&app, &learners, 20 + dice.below(21) as i32).await;
    }
    let checkpoints: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM lingo.phrase_checkpoints WHERE learner_id IN ('rnd-a', 'rnd-b')",
    )
    .fetch_one(&mut admin)
    .await
    .unwrap();
    assert!(checkpoints > 0, "the history never made a checkpoint");
}
