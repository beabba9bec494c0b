//! A phrase whose language the catalogue pipeline corrects takes its learners' states with it
//! (migration 20261129600001; docs/lingo.md, "When the catalogue moves a phrase"): the reads per
//! language, the counts per language, the exports, and sessions answering it at the same moment.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use serde_json::{Value, json};
use shared_auth::testing::{token, token_with_scope};
use sqlx::PgConnection;

use crate::helpers::{
    TestApp, answered_session, post_created, rfc3339, spawn_app_unseeded, stored_states,
};
use crate::search::{add_languages, add_phrase, pipeline};

const MY_PHRASES: &str = "/v1/lingo/me/phrases";
const REVIEWS: &str = "/v1/lingo/me/reviews";
const PROGRESS: &str = "/v1/lingo/me/progress";

pub(crate) async fn run(db: &mut PgConnection, sql: &str) {
    sqlx::raw_sql(sql).execute(db).await.unwrap();
}

pub(crate) async fn get_json(app: &TestApp, path: &str, caller: &str) -> Value {
    let response = app.get(path, Some(caller)).await;
    assert_eq!(response.status(), 200, "{path}");
    response.json().await.unwrap()
}

/// A catalogue of `es-1`, `es-2` and `es-3` in Spanish, and Portuguese as a language, written
/// as the pipeline writes it.
pub(crate) async fn spanish_catalogue(app: &TestApp) {
    let mut db = pipeline(app).await;
    add_languages(&mut db).await;
    run(
        &mut db,
        "INSERT INTO languages (code, name) VALUES ('pt', 'Portuguese')",
    )
    .await;
    add_phrase(&mut db, "es-1", "es", "Bom dia", &[("en", "Good morning")]).await;
    add_phrase(&mut db, "es-2", "es", "Gracias", &[]).await;
    add_phrase(&mut db, "es-3", "es", "Adiós", &[]).await;
}

/// The pipeline's correction: `phrase` is a phrase of `language`.
async fn move_phrase(app: &TestApp, phrase: &str, language: &str) {
    sqlx::query("UPDATE phrases SET language_code = $2 WHERE id = $1")
        .bind(phrase)
        .bind(language)
        .execute(&mut pipeline(app).await)
        .await
        .unwrap();
}

/// The phrase ids of a list of phrase progress (`data`).
pub(crate) fn phrase_ids(body: &Value) -> Vec<String> {
    body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["phrase"]["id"].as_str().unwrap().to_owned())
        .collect()
}

/// `/me/phrases` of `learner`, with `query` (`?language=pt`, or empty).
async fn my_phrases(app: &TestApp, learner: &str, query: &str) -> Vec<String> {
    let body = get_json(app, &format!("{MY_PHRASES}?limit=100{query}"), learner).await;
    phrase_ids(&body)
}

/// `/me/reviews` of `learner` with `query`: the phrase ids and `due_total`.
pub(crate) async fn my_reviews(app: &TestApp, learner: &str, query: &str) -> (Vec<String>, i64) {
    let body = get_json(app, &format!("{REVIEWS}?limit=100{query}"), learner).await;
    (phrase_ids(&body), body["due_total"].as_i64().unwrap())
}

/// `/me/progress` of `learner`: its rows by language, and its totals.
pub(crate) async fn my_progress(app: &TestApp, learner: &str) -> (Vec<Value>, Value) {
    let body = get_json(app, PROGRESS, learner).await;
    (
        body["data"].as_array().unwrap().clone(),
        body["totals"].clone(),
    )
}

/// The fields of a progress row that come from the states and the sessions.
pub(crate) fn counted(row: &Value) -> Value {
    json!({
        "language_code": row["language_code"], "sessions": row["sessions"], "xp": row["xp"],
        "phrases_started": row["phrases_started"], "phrases_due": row["phrases_due"],
        "first_studied_at": row["first_studied_at"].is_string(),
    })
}

/// Every count kept from the states (due days, phrases started) equals a count of the states,
/// and every state has its phrase's language.
pub(crate) async fn assert_counts_follow_the_states(app: &TestApp) {
    let mut admin = app.admin().await;
    let wrong: Vec<String> = sqlx::query_scalar(
        "SELECT 'due day ' || concat_ws(' ', learner_id, language_code, due_day) FROM ( \
           SELECT learner_id, language_code, due_day, phrases FROM lingo.phrase_due_days \
           EXCEPT ALL \
           SELECT learner_id, language_code, (due_at AT TIME ZONE 'UTC')::date, count(*)::int \
             FROM lingo.phrase_states GROUP BY 1, 2, 3) d \
         UNION ALL \
         SELECT 'started ' || concat_ws(' ', t.learner_id, t.language_code) \
           FROM lingo.learner_language_totals t \
          WHERE t.phrases_started <> (SELECT count(*) FROM lingo.phrase_states s \
                 WHERE s.learner_id = t.learner_id AND s.language_code = t.language_code) \
         UNION ALL \
         SELECT 'state ' || concat_ws(' ', s.learner_id, s.phrase_id) \
           FROM lingo.phrase_states s JOIN lingo.phrases p ON p.id = s.phrase_id \
          WHERE s.language_code <> p.language_code",
    )
    .fetch_all(&mut admin)
    .await
    .unwrap();
    assert_eq!(wrong, Vec::<String>::new(), "counts that differ");
    let missing_days: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT learner_id, language_code, (due_at AT TIME ZONE 'UTC')::date \
           FROM lingo.phrase_states GROUP BY 1, 2, 3 \
           EXCEPT SELECT learner_id, language_code, due_day FROM lingo.phrase_due_days) m",
    )
    .fetch_one(&mut admin)
    .await
    .unwrap();
    assert_eq!(missing_days, 0, "due days without their row");
}

/// The database's clock, to the second below: an `updated_since` before what comes next.
pub(crate) async fn database_second(app: &TestApp) -> DateTime<Utc> {
    let now: DateTime<Utc> = sqlx::query_scalar("SELECT date_trunc('second', clock_timestamp())")
        .fetch_one(&mut app.admin().await)
        .await
        .unwrap();
    // The next second, so that nothing written before this call is in it.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    now + TimeDelta::seconds(1)
}

#[tokio::test]
async fn a_moved_phrase_is_listed_due_and_counted_in_its_new_language() {
    let app = spawn_app_unseeded().await;
    spanish_catalogue(&app).await;
    let learner = token("mover");
    // Twenty days ago: both phrases are due now.
    let long_ago = Utc::now() - TimeDelta::days(20);
    let answers = [("es-1", true, None), ("es-2", true, None)];
    post_created(
        &app,
        &learner,
        &answered_session("es", Some(long_ago), &answers),
    )
    .await;
    let since = database_second(&app).await;

    move_phrase(&app, "es-1", "pt").await;

    assert_eq!(my_phrases(&app, &learner, "&language=pt").await, ["es-1"]);
    assert_eq!(my_phrases(&app, &learner, "&language=es").await, ["es-2"]);
    let mut all = my_phrases(&app, &learner, "").await;
    all.sort();
    assert_eq!(all, ["es-1", "es-2"]);
    let moved = get_json(&app, &format!("{MY_PHRASES}?language=pt"), &learner).await;
    assert_eq!(moved["data"][0]["phrase"]["language_code"], "pt");
    assert_eq!(moved["data"][0]["reviews"], 1, "the state moves as it was");

    assert_eq!(
        my_reviews(&app, &learner, "&language=pt").await,
        (vec!["es-1".to_owned()], 1)
    );
    assert_eq!(
        my_reviews(&app, &learner, "&language=es").await,
        (vec!["es-2".to_owned()], 1)
    );
    assert_eq!(my_reviews(&app, &learner, "").await.1, 2);

    // The session stays with Spanish; Portuguese gets a row of its phrase alone.
    let (rows, totals) = my_progress(&app, &learner).await;
    let rows: Vec<Value> = rows.iter().map(counted).collect();
    assert_eq!(
        rows,
        [
            json!({"language_code": "es", "sessions": 1, "xp": 12, "phrases_started": 1,
                   "phrases_due": 1, "first_studied_at": true}),
            json!({"language_code": "pt", "sessions": 0, "xp": 0, "phrases_started": 1,
                   "phrases_due": 1, "first_studied_at": false}),
        ]
    );
    let pt = my_progress(&app, &learner).await.0.remove(1);
    assert_eq!(pt["accuracy"], Value::Null);
    assert_eq!(pt["last_studied_at"], Value::Null);
    assert_eq!(totals["phrases_started"], 2);
    assert_eq!(totals["phrases_due"], 2);
    assert_eq!(totals["sessions"], 1);
    assert_counts_follow_the_states(&app).await;

    // Both exports show what moved again, and only that.
    app.settle_export_horizon().await;
    let analyst = token_with_scope("analyst", "lingo:analytics");
    let since = rfc3339(since);
    let states = get_json(
        &app,
        &format!("/v1/lingo/analytics/phrase-progress?updated_since={since}"),
        &analyst,
    )
    .await;
    let states: Vec<(Value, Value)> = states["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| (row["phrase_id"].clone(), row["language_code"].clone()))
        .collect();
    assert_eq!(states, [(json!("es-1"), json!("pt"))]);
    let progress = get_json(
        &app,
        &format!("/v1/lingo/analytics/progress?updated_since={since}"),
        &analyst,
    )
    .await;
    let mut progress: Vec<(Value, Value)> = progress["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| (row["language_code"].clone(), row["phrases_started"].clone()))
        .collect();
    progress.sort_by_key(|(language, _)| language.to_string());
    assert_eq!(progress, [(json!("es"), json!(1)), (json!("pt"), json!(1))]);

    // Studied in its new language it counts there, once; its old language refuses it.
    let today = [("es-1", true, None), ("es-3", true, None)];
    let wrong = app
        .post_session(&learner, &answered_session("es", None, &today))
        .await;
    assert_eq!(wrong.status(), 422);
    let pt_session = answered_session("pt", None, &[("es-1", false, None)]);
    post_created(&app, &learner, &pt_session).await;
    let (rows, _) = my_progress(&app, &learner).await;
    assert_eq!(rows[1]["sessions"], 1);
    assert_eq!(rows[1]["phrases_started"], 1);
    assert!(rows[1]["first_studied_at"].is_string());

    // Moved back, it takes the state back; the Portuguese row stays, with its session.
    move_phrase(&app, "es-1", "es").await;
    let (rows, totals) = my_progress(&app, &learner).await;
    assert_eq!(rows[0]["phrases_started"], 2);
    assert_eq!(rows[1]["phrases_started"], 0);
    assert_eq!(rows[1]["sessions"], 1);
    assert_eq!(totals["phrases_started"], 2);
    assert_eq!(my_phrases(&app, &learner, "&language=pt").await.len(), 0);
    assert_counts_follow_the_states(&app).await;
}

/// Learners `one` (`es-1`, `es-2`), `two` (`es-2`, `es-3`) and `three` (`es-3`), each with one
/// session 20 days ago, so every phrase they answered is due.
pub(crate) async fn three_learners_of_the_spanish_catalogue(app: &TestApp) {
    let long_ago = Utc::now() - TimeDelta::days(20);
    for (learner, answers) in [
        ("one", vec![("es-1", true, None), ("es-2", false, None)]),
        ("two", vec![("es-2", true, None), ("es-3", true, None)]),
        ("three", vec![("es-3", true, None)]),
    ] {
        let body = answered_session("es", Some(long_ago), &answers);
        post_created(app, &token(learner), &body).await;
    }
}

/// An update of `phrases` that changes no language, or moves several phrases of several
/// learners at once, keeps every count exact; a text edit does not touch the states.
#[tokio::test]
async fn one_statement_moving_several_phrases_of_several_learners_keeps_every_count() {
    let app = spawn_app_unseeded().await;
    spanish_catalogue(&app).await;
    three_learners_of_the_spanish_catalogue(&app).await;
    let before: DateTime<Utc> = sqlx::query_scalar("SELECT max(updated_at) FROM phrase_states")
        .fetch_one(&mut app.admin().await)
        .await
        .unwrap();
    run(
        &mut pipeline(&app).await,
        "UPDATE phrases SET text = text || '!'",
    )
    .await;
    let after: DateTime<Utc> =
        sqlx::query_scalar("SELECT max(updated_at) FROM lingo.phrase_states")
            .fetch_one(&mut app.admin().await)
            .await
            .unwrap();
    assert_eq!(before, after, "a text edit moved no state");

    run(
        &mut pipeline(&app).await,
        "UPDATE phrases SET language_code = 'pt' WHERE id IN ('es-2', 'es-3')",
    )
    .await;
    assert_counts_follow_the_states(&app).await;
    for (learner, pt) in [("one", 1), ("two", 2), ("three", 1)] {
        let (rows, totals) = my_progress(&app, &token(learner)).await;
        let pt_row = rows
            .iter()
            .find(|row| row["language_code"] == "pt")
            .unwrap();
        assert_eq!(pt_row["phrases_started"], pt, "{learner}");
        assert_eq!(pt_row["phrases_due"], pt, "{learner}");
        assert_eq!(
            totals["phrases_due"], totals["phrases_started"],
            "{learner}"
        );
    }
}

/// A late session in the new language replays the phrase through its answers of sessions in the
/// old one too: the state equals that of a learner who answered the same at the same times,
/// every session in the new language and in time order.
#[tokio::test]
async fn a_late_session_after_a_move_replays_the_answers_given_before_it() {
    let app = spawn_app_unseeded().await;
    spanish_catalogue(&app).await;
    let now = Utc::now();
    let day = |days: i64| now - TimeDelta::days(days);
    let mover = token("mover");
    for (days, correct) in [(20, true), (12, false)] {
        let body = answered_session("es", Some(day(days)), &[("es-1", correct, None)]);
        post_created(&app, &mover, &body).await;
    }
    move_phrase(&app, "es-1", "pt").await;
    // In time order, then late: between the two Spanish ones.
    for (days, grade) in [(4, "easy"), (16, "hard")] {
        let body = answered_session("pt", Some(day(days)), &[("es-1", true, Some(grade))]);
        post_created(&app, &mover, &body).await;
    }

    let reference = token("reference");
    let in_order = [
        (20, true, None),
        (16, true, Some("hard")),
        (12, false, None),
        (4, true, Some("easy")),
    ];
    for (days, correct, grade) in in_order {
        let body = answered_session("pt", Some(day(days)), &[("es-1", correct, grade)]);
        post_created(&app, &reference, &body).await;
    }
    let moved = stored_states(&app, "mover").await;
    assert_eq!(moved.len(), 1);
    assert!(
        moved[0].contains(" 4 3 1 "),
        "four answers, one lapse: {}",
        moved[0]
    );
    assert_eq!(moved, stored_states(&app, "reference").await);
    assert_counts_follow_the_states(&app).await;
}

/// How many backends of this test's database wait for a lock.
async fn waiting_for_locks(admin: &mut PgConnection) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity \
         WHERE datname = current_database() AND wait_event_type = 'Lock'",
    )
    .fetch_one(admin)
    .await
    .unwrap()
}

/// Waits until `count` backends of this test's database wait for a lock.
pub(crate) async fn until_waiting(app: &TestApp, count: i64) {
    let mut admin = app.admin().await;
    for _ in 0..1000 {
        if waiting_for_locks(&mut admin).await >= count {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("fewer than {count} transactions waited for a lock within 10 s");
}

/// Posts, in the background, `learner`'s Spanish session answering `answers`; gives its status.
pub(crate) fn post_session_in_background(
    app: &TestApp,
    learner: &str,
    answers: &[(&str, bool, Option<&str>)],
) -> tokio::task::JoinHandle<u16> {
    let client = app.client.clone();
    let url = app.url("/v1/lingo/me/study-sessions");
    let body = answered_session("es", None, answers);
    let learner = token(learner);
    tokio::spawn(async move {
        let response = client.post(url).bearer_auth(learner).json(&body).send();
        response.await.unwrap().status().as_u16()
    })
}

/// The pipeline runs `catalogue` (a move or a delete of `phrase`) in a transaction that stays
/// open; meanwhile `learner` posts a Spanish session answering `phrase` and `es-2`, which waits
/// for it; the pipeline commits. Returns the session's status.
pub(crate) async fn session_during_an_open_catalogue_write(
    app: &TestApp,
    learner: &str,
    phrase: &str,
    catalogue: &str,
) -> u16 {
    let mut writer = pipeline(app).await;
    run(&mut writer, "BEGIN").await;
    run(&mut writer, catalogue).await;
    let posting =
        post_session_in_background(app, learner, &[("es-2", true, None), (phrase, true, None)]);
    until_waiting(app, 1).await;
    run(&mut writer, "COMMIT").await;
    posting.await.unwrap()
}

/// `learner`'s session answering `es-1` during an open move of it to Portuguese.
async fn session_during_an_open_move(app: &TestApp, learner: &str) -> u16 {
    let moving = "UPDATE phrases SET language_code = 'pt' WHERE id = 'es-1'";
    session_during_an_open_catalogue_write(app, learner, "es-1", moving).await
}

/// A session that arrives while a move of its phrase is uncommitted waits for it and is then
/// refused, whether the learner answers the phrase for the first time (the session's lock on the
/// phrase waits) or had a state of it (the move holds the learner's row lock).
#[tokio::test]
async fn a_session_answering_a_phrase_being_moved_waits_and_is_refused() {
    let app = spawn_app_unseeded().await;
    spanish_catalogue(&app).await;
    let earlier = answered_session("es", None, &[("es-1", true, None)]);
    post_created(&app, &token("known"), &earlier).await;

    assert_eq!(session_during_an_open_move(&app, "first-time").await, 422);
    move_phrase(&app, "es-1", "es").await;
    assert_eq!(session_during_an_open_move(&app, "known").await, 422);
    assert_eq!(stored_states(&app, "first-time").await.len(), 0);
    assert_eq!(stored_states(&app, "known").await.len(), 1);
    assert_counts_follow_the_states(&app).await;
}

/// Holds `learner`'s session posting `answers` (in Spanish) between its check of the phrases and
/// its write, by `holder`, a statement of a superuser's transaction that locks a row the write
/// waits for; runs the pipeline's `catalogue` statement once the session waits, and rolls the
/// holder back once the statement waits too (for the session). Returns the session's status, after
/// the statement has run.
pub(crate) async fn catalogue_write_during_a_session(
    app: &TestApp,
    learner: &str,
    answers: &[(&str, bool, Option<&str>)],
    holder: &str,
    catalogue: String,
) -> u16 {
    let mut admin = app.admin().await;
    run(&mut admin, "BEGIN").await;
    run(&mut admin, holder).await;
    let posting = post_session_in_background(app, learner, answers);
    until_waiting(app, 1).await;
    let writing = {
        let mut writer = pipeline(app).await;
        tokio::spawn(async move {
            sqlx::query(&catalogue).execute(&mut writer).await.unwrap();
        })
    };
    until_waiting(app, 2).await;
    run(&mut admin, "ROLLBACK").await;
    let status = posting.await.unwrap();
    writing.await.unwrap();
    status
}

/// A row lock of `learner`'s due days, which a session of a phrase they answered before waits for.
pub(crate) fn due_days_of(learner: &str) -> String {
    format!("SELECT 1 FROM lingo.phrase_due_days WHERE learner_id = '{learner}' FOR UPDATE")
}

/// An uncommitted state of `learner` for `phrase`, which a session answering it for the first
/// time (inserting the same key) waits for.
pub(crate) fn uncommitted_state(learner: &str, phrase: &str) -> String {
    format!(
        "INSERT INTO lingo.phrase_states (learner_id, phrase_id, language_code, stability, \
           difficulty, due_at, reviews, correct, lapses, first_reviewed_at, last_reviewed_at, \
           last_grade, updated_at) \
         VALUES ('{learner}', '{phrase}', 'es', 1, 5, now(), 1, 1, 0, now(), now(), 3, now())"
    )
}

/// A session that has checked its phrases and is writing their states when the pipeline moves
/// one of them: the move waits for the session and then moves what it wrote. The session is
/// held between its check and its write by a row its write waits for: `phrase_states` of the
/// phrase (a first answer: an uncommitted insert of the same key) or a due day (a known phrase:
/// its update of the day's count), held by a superuser's transaction that is then rolled back.
#[tokio::test]
async fn a_move_during_a_session_waits_for_it_and_moves_its_states() {
    let app = spawn_app_unseeded().await;
    spanish_catalogue(&app).await;
    let long_ago = Utc::now() - TimeDelta::days(20);
    let earlier = answered_session("es", Some(long_ago), &[("es-1", true, None)]);
    post_created(&app, &token("known"), &earlier).await;

    for (learner, holder) in [
        ("first-time", uncommitted_state("first-time", "es-1")),
        ("known", due_days_of("known")),
    ] {
        let moving = "UPDATE phrases SET language_code = 'pt' WHERE id = 'es-1'".to_owned();
        let answers = [("es-1", true, None)];
        let status =
            catalogue_write_during_a_session(&app, learner, &answers, &holder, moving).await;
        assert_eq!(status, 201, "{learner}");

        let mut states = app.admin().await;
        let moved: (String, i32) = sqlx::query_as(
            "SELECT language_code, reviews FROM lingo.phrase_states \
             WHERE learner_id = $1 AND phrase_id = 'es-1'",
        )
        .bind(learner)
        .fetch_one(&mut states)
        .await
        .unwrap();
        let reviews = if learner == "known" { 2 } else { 1 };
        assert_eq!(moved, ("pt".to_owned(), reviews), "{learner}");
        assert_counts_follow_the_states(&app).await;
        move_phrase(&app, "es-1", "es").await;
    }
}

/// A move of two phrases in one statement while a session of a learner holds their row lock and
/// waits for one of them: the learner has a state of `es-2` (so the move's trigger waits for the
/// learner) and answers `es-1` for the first time (so the session waits for the phrase, held
/// here by the pipeline's `FOR UPDATE` before its move). PostgreSQL breaks the cycle by rolling
/// back the session's transaction, which waited first (`deadlock_detected`). The service runs it
/// again rather than answer 500: it then waits for the move, and is refused like any session
/// after it (422, nothing written), while the move commits.
#[tokio::test]
async fn a_session_in_a_deadlock_with_a_move_is_run_again_not_a_500() {
    let app = spawn_app_unseeded().await;
    spanish_catalogue(&app).await;
    let earlier = answered_session("es", None, &[("es-2", true, None)]);
    post_created(&app, &token("learner"), &earlier).await;

    let mut mover = pipeline(&app).await;
    run(&mut mover, "BEGIN").await;
    run(
        &mut mover,
        "SELECT 1 FROM phrases WHERE id = 'es-1' FOR UPDATE",
    )
    .await;
    let answers = [("es-1", true, None), ("es-2", true, None)];
    let posting = post_session_in_background(&app, "learner", &answers);
    until_waiting(&app, 1).await;
    let moving = tokio::spawn(async move {
        for statement in [
            "UPDATE phrases SET language_code = 'pt' WHERE id IN ('es-1', 'es-2')",
            "COMMIT",
        ] {
            sqlx::query(statement).execute(&mut mover).await.unwrap();
        }
    });

    assert_eq!(posting.await.unwrap(), 422);
    moving.await.unwrap();
    let states = stored_states(&app, "learner").await;
    assert_eq!(states.len(), 1, "es-2 only: {states:?}");
    assert_counts_follow_the_states(&app).await;
}

/// The rows of an export (`path`, `/analytics/...`) changed since `since`: each one's key (the
/// phrase, or the language), `language_code` and `updated_at`, in export order.
pub(crate) async fn exported(
    app: &TestApp,
    path: &str,
    key: &str,
    since: &str,
) -> Vec<(String, String)> {
    let analyst = token_with_scope("analyst", "lingo:analytics");
    let since = since.replace('+', "%2B");
    let body = get_json(
        app,
        &format!("{path}?limit=100&updated_since={since}"),
        &analyst,
    )
    .await;
    body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            let key = format!(
                "{} {} {}",
                row["learner_id"], row[key], row["language_code"]
            );
            (key, row["updated_at"].as_str().unwrap().to_owned())
        })
        .collect()
}

/// An incremental reader that runs while a move is not committed yet, and goes on from the
/// newest `updated_at` it saw, still reads the moved rows once the move commits: the move is
/// stamped before it commits, while a session of another learner commits after it, a second
/// later.
#[tokio::test]
async fn an_incremental_export_running_during_a_move_does_not_skip_it() {
    let app = spawn_app_unseeded().await;
    spanish_catalogue(&app).await;
    post_created(
        &app,
        &token("mover"),
        &answered_session("es", None, &[("es-1", true, None)]),
    )
    .await;
    let since = rfc3339(database_second(&app).await);
    let mut mover = pipeline(&app).await;
    run(&mut mover, "BEGIN").await;
    run(
        &mut mover,
        "UPDATE phrases SET language_code = 'pt' WHERE id = 'es-1'",
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    post_created(
        &app,
        &token("later"),
        &answered_session("es", None, &[("es-2", true, None)]),
    )
    .await;
    app.settle_export_horizon().await;

    let exports = [
        (
            "/v1/lingo/analytics/phrase-progress",
            "phrase_id",
            r#""es-1" "pt""#,
        ),
        (
            "/v1/lingo/analytics/progress",
            "language_code",
            r#""pt" "pt""#,
        ),
    ];
    let mut next = Vec::new();
    for (path, key, _) in exports {
        let first = exported(&app, path, key, &since).await;
        next.push(first.last().map_or(since.clone(), |(_, at)| at.clone()));
    }
    run(&mut mover, "COMMIT").await;
    app.settle_export_horizon().await;
    for ((path, key, moved), next) in exports.into_iter().zip(next) {
        let second = exported(&app, path, key, &next).await;
        let moved = format!("\"mover\" {moved}");
        assert!(
            second.iter().any(|(row, _)| *row == moved),
            "{path} from {next}: {second:?}"
        );
    }
}
