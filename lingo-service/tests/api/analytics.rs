//! `GET /analytics/progress`: scope check and keyset paging.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};
use shared_auth::testing::{token, token_with_scope};

use crate::helpers::{assert_problem, assert_timestamp, key_set, keys, session, spawn_app};

const EXPORT: &str = "/v1/lingo/analytics/progress";

#[tokio::test]
async fn the_export_pages_through_every_learner_exactly_once() {
    let app = spawn_app().await;
    let mut expected = BTreeSet::new();
    for n in 0..7 {
        let learner = format!("export-{n}");
        let languages: &[&str] = if n % 2 == 0 { &["es", "fr"] } else { &["de"] };
        for language in languages {
            let response = app
                .post_session(&token(&learner), &session(language, 60, 5, n % 6))
                .await;
            assert_eq!(response.status(), 201);
            expected.insert((learner.clone(), (*language).to_owned()));
        }
    }
    assert_eq!(expected.len(), 11);
    app.settle_export_horizon().await;

    let analyst = token_with_scope("analytics-tool", "lingo:analytics");
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &cursor {
            Some(cursor) => format!("{EXPORT}?limit=3&cursor={cursor}"),
            None => format!("{EXPORT}?limit=3"),
        };
        let response = app.get(&path, Some(&analyst)).await;
        assert_eq!(response.status(), 200);
        let body: Value = response.json().await.unwrap();
        assert_eq!(keys(&body), key_set(&["data", "count", "next_cursor"]));
        let data = body["data"].as_array().unwrap();
        assert_eq!(body["count"], data.len());
        for row in data {
            assert_eq!(
                keys(row),
                key_set(&[
                    "learner_id",
                    "language_code",
                    "sessions",
                    "total_duration_seconds",
                    "phrases_seen",
                    "phrases_correct",
                    "accuracy",
                    "xp",
                    "phrases_started",
                    "phrases_due",
                    "first_studied_at",
                    "last_studied_at",
                    "updated_at",
                ])
            );
            assert_timestamp(&row["updated_at"]);
            assert_eq!(row["sessions"], 1);
            seen.push((
                row["learner_id"].as_str().unwrap().to_owned(),
                row["language_code"].as_str().unwrap().to_owned(),
            ));
        }
        pages += 1;
        match body["next_cursor"].as_str() {
            Some(next) => {
                assert_eq!(data.len(), 3, "only the last page is short");
                cursor = Some(next.to_owned());
            }
            None => break,
        }
    }
    assert_eq!(pages, 4);
    assert_eq!(seen.len(), expected.len(), "no row twice");
    assert_eq!(seen.into_iter().collect::<BTreeSet<_>>(), expected);

    // updated_since keeps only rows updated at or after it.
    let future = (chrono::Utc::now() + chrono::Duration::hours(1))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let body: Value = app
        .get(&format!("{EXPORT}?updated_since={future}"), Some(&analyst))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (body["count"].as_i64(), body["next_cursor"].as_str()),
        (Some(0), None)
    );
    let body: Value = app
        .get(
            &format!("{EXPORT}?updated_since=2000-01-01T00:00:00Z&limit=100"),
            Some(&analyst),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["count"], 11);
}

#[tokio::test]
async fn the_export_needs_the_analytics_scope_and_a_good_cursor() {
    let app = spawn_app().await;
    let response = app.get(EXPORT, Some(&token("demo-learner"))).await;
    let challenge = response.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(challenge.contains("insufficient_scope") && challenge.contains("lingo:analytics"));
    assert_problem(response, 403, "insufficient_scope").await;
    let response = app
        .get(
            EXPORT,
            Some(&token_with_scope("x", "lingo:other news:analytics")),
        )
        .await;
    assert_problem(response, 403, "insufficient_scope").await;
    assert_problem(app.get(EXPORT, None).await, 401, "missing_token").await;

    let analyst = token_with_scope("tool", "openid lingo:analytics");
    let response = app.get(EXPORT, Some(&analyst)).await;
    assert_eq!(response.status(), 200);
    // Every learner's progress: never stored by a shared cache, and neither are its refusals.
    assert_eq!(response.headers()["cache-control"], "private, no-store");
    let refused = app.get(&format!("{EXPORT}?limit=0"), Some(&analyst)).await;
    assert_eq!(refused.headers()["cache-control"], "private, no-store");
    // The last one is well formed but names a time before PostgreSQL's earliest timestamptz:
    // {"u":-210866803200000001,"l":"a","c":"es"}.
    let before_postgres = "eyJ1IjotMjEwODY2ODAzMjAwMDAwMDAxLCJsIjoiYSIsImMiOiJlcyJ9";
    for cursor in ["garbage!", "eyJ4IjoxfQ", "bm90IGpzb24", before_postgres] {
        let response = app
            .get(&format!("{EXPORT}?cursor={cursor}"), Some(&analyst))
            .await;
        assert_problem(response, 400, "invalid_cursor").await;
    }
    // An empty cursor is the same as none.
    let response = app.get(&format!("{EXPORT}?cursor="), Some(&analyst)).await;
    assert_eq!(response.status(), 200);
    for query in [
        "updated_since=yesterday",
        "limit=0",
        "limit=101",
        // Cursor paging only: an offset is refused, not ignored.
        "offset=0",
        "offset=5&limit=2",
    ] {
        let response = app.get(&format!("{EXPORT}?{query}"), Some(&analyst)).await;
        assert_problem(response, 400, "invalid_query").await;
    }
}

#[tokio::test]
async fn a_cursor_continues_its_own_updated_since_only() {
    let app = spawn_app().await;
    for learner in ["since-a", "since-b"] {
        let response = app
            .post_session(&token(learner), &session("es", 60, 5, 5))
            .await;
        assert_eq!(response.status(), 201);
    }
    app.settle_export_horizon().await;
    let analyst = token_with_scope("tool", "lingo:analytics");
    let since = "updated_since=2000-01-01T00:00:00Z";
    let first: Value = app
        .get(&format!("{EXPORT}?limit=1&{since}"), Some(&analyst))
        .await
        .json()
        .await
        .unwrap();
    let cursor = first["next_cursor"].as_str().unwrap();

    for query in [
        format!("cursor={cursor}"),
        format!("cursor={cursor}&{since}"),
        format!("cursor={cursor}&updated_since=2000-01-01T01:00:00%2B01:00"),
    ] {
        let response = app.get(&format!("{EXPORT}?{query}"), Some(&analyst)).await;
        assert_eq!(response.status(), 200, "{query}");
    }
    for other in ["2001-01-01T00:00:00Z", "2000-01-01T00:00:00.000001Z"] {
        let query = format!("cursor={cursor}&updated_since={other}");
        let response = app.get(&format!("{EXPORT}?{query}"), Some(&analyst)).await;
        assert_problem(response, 400, "invalid_cursor").await;
    }
    let response = app
        .get(
            &format!("{EXPORT}?cursor={cursor}&offset=0"),
            Some(&analyst),
        )
        .await;
    assert_problem(response, 400, "invalid_query").await;
}

/// A session stamps `updated_at` before its transaction commits, so two learners' writes can
/// commit out of stamp order. A copier that continues from the largest `updated_at` it saw (as
/// docs/lingo.md tells it to) must still get every change: no page reaches past a write that is
/// still in progress.
#[tokio::test]
async fn an_incremental_copy_misses_no_session_that_commits_late() {
    let app = spawn_app().await;
    let analyst = token_with_scope("analytics-tool", "lingo:analytics");
    let late = token("late-learner");
    let response = app.post_session(&late, &session("es", 60, 5, 5)).await;
    assert_eq!(response.status(), 201);

    // Hold the late learner's totals row: their next session is stamped, then waits to commit.
    let mut admin = app.admin().await;
    for statement in [
        "BEGIN",
        "SELECT 1 FROM learner_language_totals WHERE learner_id = 'late-learner' FOR UPDATE",
    ] {
        sqlx::query(statement).execute(&mut admin).await.unwrap();
    }
    let second_session = session("es", 60, 5, 5);
    let late_session = app.post_session(&late, &second_session);
    let meanwhile = async {
        wait_for_a_lock_waiter(&mut admin).await;
        // Another learner's session, committed before the late one and stamped in a later second
        // (timestamps are serialized in whole seconds, and a copier resumes at the second it saw).
        next_second().await;
        let response = app
            .post_session(&token("early-learner"), &session("de", 60, 5, 5))
            .await;
        assert_eq!(response.status(), 201);
        let first_run = copy_since(&app, &analyst, None).await;
        sqlx::query("COMMIT").execute(&mut admin).await.unwrap();
        first_run
    };
    let (response, first_run) = tokio::join!(late_session, meanwhile);
    assert_eq!(response.status(), 201);

    let resume_at = first_run.values().map(|(at, _)| *at).max();
    let second_run = copy_since(&app, &analyst, resume_at).await;
    let mut copy = first_run;
    copy.extend(second_run);
    let sessions: BTreeMap<_, _> = copy
        .into_iter()
        .map(|(key, (_, sessions))| (key, sessions))
        .collect();
    let expected = BTreeMap::from([
        (("early-learner".to_owned(), "de".to_owned()), 1),
        (("late-learner".to_owned(), "es".to_owned()), 2),
    ]);
    let copied: BTreeMap<_, _> = sessions
        .into_iter()
        .filter(|((learner, _), _)| ["early-learner", "late-learner"].contains(&learner.as_str()))
        .collect();
    assert_eq!(copied, expected);
}

/// Waits until a session of this test's database is blocked by another.
async fn wait_for_a_lock_waiter(admin: &mut sqlx::PgConnection) {
    for _ in 0..1000 {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND cardinality(pg_blocking_pids(pid)) > 0",
        )
        .fetch_one(&mut *admin)
        .await
        .unwrap();
        if waiting > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no statement ever waited for the held row");
}

/// Sleeps into the next whole second, and a little past it.
async fn next_second() {
    let into_second = Utc::now().timestamp_subsec_millis();
    tokio::time::sleep(Duration::from_millis(u64::from(
        1050 - into_second.min(1000),
    )))
    .await;
}

/// Every row of the export changed at or after `since`, paged to the end: (learner, language) to
/// (updated_at, sessions).
async fn copy_since(
    app: &crate::helpers::TestApp,
    analyst: &str,
    since: Option<DateTime<Utc>>,
) -> BTreeMap<(String, String), (DateTime<Utc>, i64)> {
    let mut rows = BTreeMap::new();
    let mut query = match since {
        Some(since) => format!(
            "updated_since={}",
            since.to_rfc3339_opts(SecondsFormat::AutoSi, true)
        ),
        None => String::new(),
    };
    loop {
        let body: Value = app
            .get(&format!("{EXPORT}?limit=2&{query}"), Some(analyst))
            .await
            .json()
            .await
            .unwrap();
        for row in body["data"].as_array().unwrap() {
            let key = (
                row["learner_id"].as_str().unwrap().to_owned(),
                row["language_code"].as_str().unwrap().to_owned(),
            );
            let updated_at = row["updated_at"].as_str().unwrap().parse().unwrap();
            rows.insert(key, (updated_at, row["sessions"].as_i64().unwrap()));
        }
        match body["next_cursor"].as_str() {
            Some(next) => query = format!("cursor={next}"),
            None => return rows,
        }
    }
}

/// `updated_since` keeps the rows updated at or after the instant as written, however many
/// fraction digits it has: rows are stamped to the microsecond, and a bound a nanosecond (or
/// less, in a tenth digit) after a row's stamp must not return it, nor one just before lose it.
/// A cursor continues the bound as written too: another instant is another list.
#[tokio::test]
async fn updated_since_compares_as_written_past_the_microsecond() {
    let app = spawn_app().await;
    let answered = json!({"duration_seconds": 60, "phrases_seen": 1, "phrases_correct": 1,
        "language_code": "es", "answers": [{"phrase_id": "ph-es-001", "correct": true}]});
    // A second learner, so that the exports have a second page for a cursor.
    for learner in ["precise", "precise-too"] {
        let response = app.post_session(&token(learner), &answered).await;
        assert_eq!(response.status(), 201);
    }
    app.settle_export_horizon().await;
    let analyst = token_with_scope("tool", "lingo:analytics");
    let exports = [
        (EXPORT, "learner_language_totals"),
        ("/v1/lingo/analytics/phrase-progress", "phrase_states"),
    ];
    for (export, table) in exports {
        let stamped: DateTime<Utc> = sqlx::query_scalar(&format!(
            "SELECT updated_at FROM lingo.{table} WHERE learner_id = 'precise'"
        ))
        .fetch_one(&mut app.admin().await)
        .await
        .unwrap();
        let micros = stamped.to_rfc3339_opts(SecondsFormat::Micros, true);
        let (whole, fraction) = micros.trim_end_matches('Z').split_once('.').unwrap();
        let before = (stamped - chrono::Duration::nanoseconds(1))
            .to_rfc3339_opts(SecondsFormat::Nanos, true);
        for (since, returned) in [
            (micros.clone(), true),
            (format!("{whole}.{fraction}000000Z"), true),
            (before, true),
            (format!("{whole}.{fraction}001Z"), false),
            (format!("{whole}.{fraction}0001Z"), false),
            (format!("{whole}.{fraction}0000000001Z"), false),
        ] {
            let path = format!("{export}?updated_since={since}");
            let body: Value = app.get(&path, Some(&analyst)).await.json().await.unwrap();
            let learners: Vec<&str> = body["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|row| row["learner_id"].as_str().unwrap())
                .collect();
            assert_eq!(learners.contains(&"precise"), returned, "{path}: {body}");
        }

        let since = "updated_since=2000-01-01T00:00:00.0000000001Z";
        let first: Value = app
            .get(&format!("{export}?limit=1&{since}"), Some(&analyst))
            .await
            .json()
            .await
            .unwrap();
        let cursor = first["next_cursor"].as_str().unwrap();
        let same = app
            .get(&format!("{export}?cursor={cursor}&{since}"), Some(&analyst))
            .await;
        assert_eq!(same.status(), 200);
        let other = "updated_since=2000-01-01T00:00:00Z";
        let response = app
            .get(&format!("{export}?cursor={cursor}&{other}"), Some(&analyst))
            .await;
        assert_problem(response, 400, "invalid_cursor").await;
    }
}

/// A cursor has its own list's fields and no others: one forged with the fields of both exports
/// (`{"t":"phrase-progress","u":0,"l":"a","p":"x","c":"es"}`) or with one more
/// (`{"u":0,"l":"a","c":"es","x":1}`, `{"t":"phrase-progress","u":0,"l":"a","p":"x","x":1}`)
/// does not decode as either; nor does a cursor of `/me/phrases` with one more field.
#[tokio::test]
async fn a_cursor_with_fields_of_another_list_is_refused() {
    let app = spawn_app().await;
    let analyst = token_with_scope("tool", "lingo:analytics");
    let both = "eyJ0IjoicGhyYXNlLXByb2dyZXNzIiwidSI6MCwibCI6ImEiLCJwIjoieCIsImMiOiJlcyJ9";
    let progress_and_more = "eyJ1IjowLCJsIjoiYSIsImMiOiJlcyIsIngiOjF9";
    let states_and_more = "eyJ0IjoicGhyYXNlLXByb2dyZXNzIiwidSI6MCwibCI6ImEiLCJwIjoieCIsIngiOjF9";
    for export in [EXPORT, "/v1/lingo/analytics/phrase-progress"] {
        for cursor in [both, progress_and_more, states_and_more] {
            let response = app
                .get(&format!("{export}?cursor={cursor}"), Some(&analyst))
                .await;
            assert_problem(response, 400, "invalid_cursor").await;
        }
    }
    // The same for `/me/phrases`: `{"t":"me-phrases","d":0,"p":"x","x":1}`.
    let mine = "eyJ0IjoibWUtcGhyYXNlcyIsImQiOjAsInAiOiJ4IiwieCI6MX0";
    let response = app
        .get(
            &format!("/v1/lingo/me/phrases?cursor={mine}"),
            Some(&token("a")),
        )
        .await;
    assert_problem(response, 400, "invalid_cursor").await;
}
