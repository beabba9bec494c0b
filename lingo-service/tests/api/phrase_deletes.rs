//! A phrase the catalogue pipeline deletes takes its learners' states with it (migration
//! 20261129700001; docs/lingo.md, "When the catalogue deletes a phrase"): the due counts, the
//! phrases started, the exports and the checkpoints, while the review log keeps the answers; and
//! sessions answering it at the same moment.

use chrono::{DateTime, TimeDelta, Utc};
use serde_json::{Value, json};
use shared_auth::testing::{token, token_with_scope};

use crate::helpers::{
    TestApp, answered_session, assert_problem, move_into_the_past, post_created, rfc3339,
    spawn_app_unseeded, stored_states,
};
use crate::phrase_moves::{
    assert_counts_follow_the_states, catalogue_write_during_a_session, counted, database_second,
    due_days_of, exported, get_json, my_progress, my_reviews, run,
    session_during_an_open_catalogue_write, spanish_catalogue,
    three_learners_of_the_spanish_catalogue, uncommitted_state,
};
use crate::search::pipeline;

const PHRASE_PROGRESS: &str = "/v1/lingo/analytics/phrase-progress";
const PROGRESS_EXPORT: &str = "/v1/lingo/analytics/progress";

/// The pipeline's delete of `phrase`, in a statement and transaction of its own.
async fn delete_phrase(app: &TestApp, phrase: &str) {
    sqlx::query("DELETE FROM phrases WHERE id = $1")
        .bind(phrase)
        .execute(&mut pipeline(app).await)
        .await
        .unwrap();
}

/// How many rows of `table` (a learner's table of `lingo`) belong to `learner` and `phrase`.
async fn rows_of(app: &TestApp, table: &str, learner: &str, phrase: &str) -> i64 {
    sqlx::query_scalar(&format!(
        "SELECT count(*) FROM lingo.{table} WHERE learner_id = $1 AND phrase_id = $2"
    ))
    .bind(learner)
    .bind(phrase)
    .fetch_one(&mut app.admin().await)
    .await
    .unwrap()
}

/// Every count kept from the states is exact (see [`assert_counts_follow_the_states`]) and no
/// state or checkpoint is left without its phrase.
async fn assert_nothing_left_of_deleted_phrases(app: &TestApp) {
    assert_counts_follow_the_states(app).await;
    let orphans: Vec<String> = sqlx::query_scalar(
        "SELECT 'state ' || learner_id || ' ' || phrase_id FROM lingo.phrase_states \
          WHERE phrase_id NOT IN (SELECT id FROM lingo.phrases) \
         UNION ALL \
         SELECT 'checkpoint ' || learner_id || ' ' || phrase_id FROM lingo.phrase_checkpoints \
          WHERE phrase_id NOT IN (SELECT id FROM lingo.phrases)",
    )
    .fetch_all(&mut app.admin().await)
    .await
    .unwrap();
    assert_eq!(orphans, Vec::<String>::new(), "left without their phrase");
}

/// The rows of the phrase-progress export from its start: `learner phrase`.
async fn exported_states(app: &TestApp) -> Vec<String> {
    app.settle_export_horizon().await;
    let analyst = token_with_scope("analyst", "lingo:analytics");
    let body = get_json(app, &format!("{PHRASE_PROGRESS}?limit=100"), &analyst).await;
    let mut rows: Vec<String> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| format!("{} {}", row["learner_id"], row["phrase_id"]))
        .collect();
    rows.sort();
    rows
}

/// Learner `deleter` answers `es-1` and `es-2` right forty days before `now` (posted 25 days
/// before, then moved back) and again five days before, `second` (whether each answer was
/// right): the second session keeps a checkpoint of both phrases, their first answers being
/// settled.
async fn deleter_answered_40_and_5_days_ago(app: &TestApp, now: DateTime<Utc>, second: [bool; 2]) {
    let learner = token("deleter");
    let day = |days: i64| now - TimeDelta::days(days);
    let first = [("es-1", true, None), ("es-2", true, None)];
    post_created(
        app,
        &learner,
        &answered_session("es", Some(day(25)), &first),
    )
    .await;
    move_into_the_past(app, &["deleter"], 15).await;
    let second = [("es-1", second[0], None), ("es-2", second[1], None)];
    post_created(
        app,
        &learner,
        &answered_session("es", Some(day(5)), &second),
    )
    .await;
}

#[tokio::test]
async fn a_deleted_phrase_leaves_no_due_count_started_phrase_export_row_or_checkpoint() {
    let app = spawn_app_unseeded().await;
    spanish_catalogue(&app).await;
    let learner = token("deleter");
    // Wrong answers make both phrases due again by now (a page with no due phrase answers
    // `due_total` 0 without counting).
    let now = Utc::now();
    deleter_answered_40_and_5_days_ago(&app, now, [false, false]).await;
    let five_days_ago = now - TimeDelta::days(5);
    let other = answered_session("es", Some(five_days_ago), &[("es-2", true, None)]);
    post_created(&app, &token("bystander"), &other).await;
    assert_eq!(
        rows_of(&app, "phrase_checkpoints", "deleter", "es-1").await,
        1
    );
    let (listed_due, due_total) = my_reviews(&app, &learner, "").await;
    assert_eq!(listed_due.len(), 2, "{listed_due:?}");
    assert_eq!(due_total, listed_due.len() as i64);
    let (_, totals_before) = my_progress(&app, &learner).await;
    let since = database_second(&app).await;

    delete_phrase(&app, "es-1").await;

    // Nothing counts it any more: the due count is that of the phrases listed.
    let (listed_due, due_total) = my_reviews(&app, &learner, "").await;
    assert!(!listed_due.contains(&"es-1".to_owned()));
    assert_eq!(due_total, listed_due.len() as i64, "due_total");
    let (rows, totals) = my_progress(&app, &learner).await;
    let rows: Vec<Value> = rows.iter().map(counted).collect();
    let due = listed_due.len();
    assert_eq!(
        rows,
        [
            json!({"language_code": "es", "sessions": 2, "xp": totals_before["xp"],
                "phrases_started": 1, "phrases_due": due, "first_studied_at": true})
        ]
    );
    assert_eq!(totals["phrases_started"], 1);
    assert_eq!(totals["phrases_due"], due);
    // The history stays: the sessions, their XP and their review-log rows.
    assert_eq!(totals["sessions"], totals_before["sessions"]);
    assert_eq!(totals["xp"], totals_before["xp"]);
    assert_eq!(app.count("phrase_review_sessions").await, 3);
    assert_eq!(
        rows_of(&app, "phrase_checkpoints", "deleter", "es-1").await,
        0
    );
    assert_eq!(
        rows_of(&app, "phrase_checkpoints", "deleter", "es-2").await,
        1
    );
    assert_nothing_left_of_deleted_phrases(&app).await;

    // The states export no longer has it; the progress export shows the learner's row again,
    // with its new counts, and no other.
    assert_eq!(
        exported_states(&app).await,
        [r#""bystander" "es-2""#, r#""deleter" "es-2""#]
    );
    let analyst = token_with_scope("analyst", "lingo:analytics");
    let since = rfc3339(since);
    let progress = get_json(
        &app,
        &format!("{PROGRESS_EXPORT}?updated_since={since}"),
        &analyst,
    )
    .await;
    let progress: Vec<Value> = progress["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            json!([
                row["learner_id"],
                row["phrases_started"],
                row["phrases_due"]
            ])
        })
        .collect();
    assert_eq!(progress, [json!(["deleter", 1, due])]);
}

/// One statement deleting several phrases of several learners keeps every count exact, and a
/// delete of a phrase nobody answered stamps no learner's totals.
#[tokio::test]
async fn one_statement_deleting_several_phrases_of_several_learners_keeps_every_count() {
    let app = spawn_app_unseeded().await;
    spanish_catalogue(&app).await;
    three_learners_of_the_spanish_catalogue(&app).await;
    let stamps =
        "SELECT array_agg(updated_at ORDER BY learner_id) FROM lingo.learner_language_totals";
    let before: Vec<DateTime<Utc>> = sqlx::query_scalar(stamps)
        .fetch_one(&mut app.admin().await)
        .await
        .unwrap();
    let mut db = pipeline(&app).await;
    run(
        &mut db,
        "INSERT INTO phrases (id, text, language_code) VALUES ('es-4', 'Hola', 'es')",
    )
    .await;
    run(&mut db, "DELETE FROM phrases WHERE id = 'es-4'").await;
    let after: Vec<DateTime<Utc>> = sqlx::query_scalar(stamps)
        .fetch_one(&mut app.admin().await)
        .await
        .unwrap();
    assert_eq!(
        before, after,
        "an unanswered phrase's delete stamps nothing"
    );

    run(&mut db, "DELETE FROM phrases WHERE id IN ('es-1', 'es-3')").await;
    assert_nothing_left_of_deleted_phrases(&app).await;
    for (learner, started) in [("one", 1), ("two", 1), ("three", 0)] {
        let (rows, totals) = my_progress(&app, &token(learner)).await;
        assert_eq!(rows[0]["phrases_started"], started, "{learner}");
        assert_eq!(
            totals["phrases_due"], started,
            "{learner}: due since long ago"
        );
        assert_eq!(totals["sessions"], 1, "{learner}");
    }
}

/// After the delete, a session answering the phrase is refused and writes nothing; a late
/// session answering another phrase of the same sessions replays that phrase alone, through the
/// review-log rows that also hold the deleted phrase's answers.
#[tokio::test]
async fn sessions_after_a_delete_refuse_the_phrase_and_replay_only_the_others() {
    let app = spawn_app_unseeded().await;
    spanish_catalogue(&app).await;
    let now = Utc::now();
    let day = |days: i64| now - TimeDelta::days(days);
    let learner = token("deleter");
    deleter_answered_40_and_5_days_ago(&app, now, [true, false]).await;
    delete_phrase(&app, "es-1").await;

    let refused = answered_session("es", None, &[("es-2", true, None), ("es-1", true, None)]);
    let response = app.post_session(&learner, &refused).await;
    let problem = assert_problem(response, 422, "unknown_phrase").await;
    assert_eq!(problem["errors"][0]["field"], "answers[1].phrase_id");
    assert_eq!(app.count("study_sessions").await, 2);
    assert_eq!(rows_of(&app, "phrase_states", "deleter", "es-1").await, 0);

    let late = answered_session("es", Some(day(20)), &[("es-2", true, Some("hard"))]);
    post_created(&app, &learner, &late).await;
    let reference = token("reference");
    let first = answered_session("es", Some(day(25)), &[("es-2", true, None)]);
    post_created(&app, &reference, &first).await;
    move_into_the_past(&app, &["reference"], 15).await;
    for (days, correct, grade) in [(20, true, Some("hard")), (5, false, None)] {
        let body = answered_session("es", Some(day(days)), &[("es-2", correct, grade)]);
        post_created(&app, &reference, &body).await;
    }
    let replayed = stored_states(&app, "deleter").await;
    assert_eq!(replayed.len(), 1, "es-2 alone: {replayed:?}");
    assert_eq!(replayed, stored_states(&app, "reference").await);
    assert_nothing_left_of_deleted_phrases(&app).await;
}

/// `learner`'s session answering `phrase` (and `es-2`) during an open delete of it.
async fn session_during_an_open_delete(app: &TestApp, learner: &str, phrase: &str) -> u16 {
    let deleting = format!("DELETE FROM phrases WHERE id = '{phrase}'");
    session_during_an_open_catalogue_write(app, learner, phrase, &deleting).await
}

/// A session that arrives while a delete of its phrase is uncommitted waits for it and is then
/// refused, whether the learner answers the phrase for the first time (the session's lock on the
/// phrase waits) or had a state of it (the delete holds the learner's row lock).
#[tokio::test]
async fn a_session_answering_a_phrase_being_deleted_waits_and_is_refused() {
    let app = spawn_app_unseeded().await;
    spanish_catalogue(&app).await;
    let earlier = answered_session("es", None, &[("es-3", true, None)]);
    post_created(&app, &token("known"), &earlier).await;

    assert_eq!(
        session_during_an_open_delete(&app, "first-time", "es-1").await,
        422
    );
    assert_eq!(
        session_during_an_open_delete(&app, "known", "es-3").await,
        422
    );
    assert_eq!(stored_states(&app, "first-time").await.len(), 0);
    assert_eq!(stored_states(&app, "known").await.len(), 0);
    assert_eq!(app.count("study_sessions").await, 1);
    assert_nothing_left_of_deleted_phrases(&app).await;
}

/// A session that has checked its phrases and is writing their states when the pipeline deletes
/// one of them: the delete waits for the session and then deletes what it wrote. The session is
/// held between its check and its write as in the moves' test (phrase_moves.rs): by an
/// uncommitted state of the phrase (a first answer) or a due day's row lock (a known phrase).
#[tokio::test]
async fn a_delete_during_a_session_waits_for_it_and_deletes_its_states() {
    let app = spawn_app_unseeded().await;
    spanish_catalogue(&app).await;
    let long_ago = Utc::now() - TimeDelta::days(20);
    let earlier = answered_session("es", Some(long_ago), &[("es-1", true, None)]);
    post_created(&app, &token("known"), &earlier).await;

    for (learner, phrase, holder) in [
        (
            "first-time",
            "es-3",
            uncommitted_state("first-time", "es-3"),
        ),
        ("known", "es-1", due_days_of("known")),
    ] {
        let deleting = format!("DELETE FROM phrases WHERE id = '{phrase}'");
        let answers = [(phrase, true, None), ("es-2", true, None)];
        let status =
            catalogue_write_during_a_session(&app, learner, &answers, &holder, deleting).await;
        assert_eq!(status, 201, "{learner}");

        assert_eq!(rows_of(&app, "phrase_states", learner, phrase).await, 0);
        assert_eq!(rows_of(&app, "phrase_states", learner, "es-2").await, 1);
        let (rows, _) = my_progress(&app, &token(learner)).await;
        assert_eq!(rows[0]["phrases_started"], 1, "{learner}: es-2 alone");
        assert_nothing_left_of_deleted_phrases(&app).await;
    }
}

/// An incremental reader of the progress export that runs while a delete is not committed yet,
/// and goes on from the newest `updated_at` it saw, still reads the learner's row once the
/// delete commits: the delete is stamped before it commits, while a session of another learner
/// commits after it, a second later.
#[tokio::test]
async fn an_incremental_export_running_during_a_delete_does_not_skip_it() {
    let app = spawn_app_unseeded().await;
    spanish_catalogue(&app).await;
    let answers = [("es-1", true, None), ("es-2", true, None)];
    post_created(
        &app,
        &token("deleted"),
        &answered_session("es", None, &answers),
    )
    .await;
    let since = rfc3339(database_second(&app).await);
    let mut deleter = pipeline(&app).await;
    run(&mut deleter, "BEGIN").await;
    run(&mut deleter, "DELETE FROM phrases WHERE id = 'es-1'").await;
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    post_created(
        &app,
        &token("later"),
        &answered_session("es", None, &[("es-3", true, None)]),
    )
    .await;
    app.settle_export_horizon().await;
    let first = exported(&app, PROGRESS_EXPORT, "language_code", &since).await;
    let next = first.last().map_or(since.clone(), |(_, at)| at.clone());
    run(&mut deleter, "COMMIT").await;
    app.settle_export_horizon().await;

    let second = exported(&app, PROGRESS_EXPORT, "phrases_started", &next).await;
    let deleted = r#""deleted" 1 "es""#;
    assert!(
        second.iter().any(|(row, _)| row == deleted),
        "from {next}: {second:?}"
    );
}
