//! An outside check of the reads of the contract (docs/lingo.md) (`/me/phrases`, `/me/reviews`,
//! `/me/progress`, `/analytics/phrase-progress`, `GET /phrases?q=`) at the edges the rest of the
//! suite does not already hold: query values of every shape, retrievability against the FSRS-6
//! forgetting curve, streaks across midnight and filled by a late session, search lengths in
//! code points.

use chrono::{DateTime, Duration, DurationRound, Utc};
use serde_json::{Value, json};
use shared_auth::testing::{token, token_with_scope};

use crate::helpers::{
    TestApp, answered_session, assert_problem, key_set, keys, post_created as post_ok, rfc3339,
    spawn_app, spawn_app_unseeded,
};
use crate::search::{add_languages, add_phrase, pipeline};

const SESSIONS: &str = "/v1/lingo/me/study-sessions";
const MY_PHRASES: &str = "/v1/lingo/me/phrases";
const REVIEWS: &str = "/v1/lingo/me/reviews";
const EXPORT: &str = "/v1/lingo/analytics/phrase-progress";

fn today() -> DateTime<Utc> {
    Utc::now().duration_trunc(Duration::days(1)).expect("day")
}

fn answered(language: &str, at: Option<DateTime<Utc>>, answers: &[(&str, bool)]) -> Value {
    let ungraded: Vec<(&str, bool, Option<&str>)> = answers
        .iter()
        .map(|&(phrase, correct)| (phrase, correct, None))
        .collect();
    answered_session(language, at, &ungraded)
}

async fn get_ok(app: &TestApp, path: &str, learner: &str) -> Value {
    let response = app.get(path, Some(learner)).await;
    assert_eq!(response.status(), 200, "{path}");
    response.json().await.unwrap()
}

async fn bad_query(app: &TestApp, path: &str, learner: &str, code: &str) {
    let response = app.get(path, Some(learner)).await;
    assert_eq!(response.status(), 400, "{path}");
    assert_problem(response, 400, code).await;
}

/// `due` is a boolean, `limit` 1..=100 ("A value out of range or not an integer is 400
/// `invalid_query` (not clamped)"), `offset` is not a parameter of this cursor-only list, and
/// `cursor` with `offset` is 400 either way.
#[tokio::test]
async fn my_phrases_query_values_of_every_shape() {
    let app = spawn_app().await;
    let learner = token("review-query");
    let old = today() - Duration::days(20) + Duration::hours(1);
    post_ok(
        &app,
        &learner,
        &answered("es", Some(old), &[("ph-es-001", true)]),
    )
    .await;
    post_ok(
        &app,
        &learner,
        &answered("es", None, &[("ph-es-002", true)]),
    )
    .await;

    let all = get_ok(&app, MY_PHRASES, &learner).await;
    assert_eq!(all["count"], 2);
    assert_eq!(
        get_ok(&app, &format!("{MY_PHRASES}?due=false"), &learner).await["count"],
        2
    );
    let due = get_ok(&app, &format!("{MY_PHRASES}?due=true"), &learner).await;
    assert_eq!(due["count"], 1);
    assert_eq!(due["data"][0]["phrase"]["id"], "ph-es-001");
    for query in [
        "due=1",
        "due=yes",
        "due=",
        "due=TRUE",
        "limit=0",
        "limit=101",
        "limit=abc",
        "limit=",
        "limit=1.0",
        "limit=-1",
        "limit=1e1",
        "offset=0",
        "offset=5",
    ] {
        bad_query(
            &app,
            &format!("{MY_PHRASES}?{query}"),
            &learner,
            "invalid_query",
        )
        .await;
    }
    let first = get_ok(&app, &format!("{MY_PHRASES}?limit=1"), &learner).await;
    let cursor = first["next_cursor"].as_str().unwrap();
    bad_query(
        &app,
        &format!("{MY_PHRASES}?cursor={cursor}&offset=0"),
        &learner,
        "invalid_query",
    )
    .await;
    for bad in ["x", "eyJ4IjoxfQ", &format!("{cursor}x")] {
        bad_query(
            &app,
            &format!("{MY_PHRASES}?cursor={bad}"),
            &learner,
            "invalid_cursor",
        )
        .await;
    }
    // A cursor of the catalogue is another list's.
    let catalogue = get_ok(&app, "/v1/lingo/phrases?limit=1", &learner).await;
    let other = catalogue["next_cursor"].as_str().unwrap();
    bad_query(
        &app,
        &format!("{MY_PHRASES}?cursor={other}"),
        &learner,
        "invalid_cursor",
    )
    .await;
    for language in ["xx", "", "ES"] {
        let page = get_ok(&app, &format!("{MY_PHRASES}?language={language}"), &learner).await;
        assert_eq!(page["count"], 0, "language={language}");
        assert_eq!(page["next_cursor"], Value::Null);
    }
    assert_eq!(
        get_ok(&app, &format!("{MY_PHRASES}?limit=100"), &learner).await["count"],
        2
    );
}

/// "`retrievability` is the predicted probability (0..1) that the learner recalls the phrase at
/// the time of the request (the FSRS-6 forgetting curve)": one `good` first answer 9 days and 23
/// hours ago has the initial stability w2 and, counted in whole days as the reference's
/// `get_card_retrievability` does, R = (1 + F·9/S)^(-w20), F = 0.9^(-1/w20) - 1.
#[tokio::test]
async fn retrievability_follows_the_fsrs6_forgetting_curve_at_the_request_time() {
    let app = spawn_app().await;
    let learner = token("review-curve");
    let at = Utc::now().duration_trunc(Duration::seconds(1)).unwrap() - Duration::days(10)
        + Duration::hours(1);
    post_ok(
        &app,
        &learner,
        &answered("es", Some(at), &[("ph-es-003", true)]),
    )
    .await;
    let page = get_ok(&app, MY_PHRASES, &learner).await;
    let progress = &page["data"][0];
    let stability = progress["stability_days"].as_f64().unwrap();
    assert!(
        (stability - 2.3065).abs() < 1e-4,
        "w2 = 2.3065, got {stability}"
    );
    let decay = 0.1542f64;
    let factor = 0.9f64.powf(-1.0 / decay) - 1.0;
    let expected = (1.0 + factor * 9.0 / stability).powf(-decay);
    let got = progress["retrievability"].as_f64().unwrap();
    assert!(
        (got - expected).abs() < 1e-6,
        "expected {expected}, got {got}"
    );
    assert!(got > 0.0 && got < 1.0);
    // Interval round(S) = 2 days after the answer.
    assert_eq!(progress["due_at"], rfc3339(at + Duration::days(2)));
    assert_eq!(progress["lapses"], 0);
    assert_eq!(progress["reviews"], 1);
    assert_eq!(progress["correct"], 1);
    assert_eq!(progress["last_grade"], "good");
}

/// "A phrase's state is the result of all its answers in time order", `lapses` "the answers
/// graded `again` after the first answer", `first_reviewed_at` / `last_reviewed_at` / `last_grade`
/// by `studied_at`: late sessions that become the first answers change all of them.
#[tokio::test]
async fn late_sessions_move_first_reviewed_at_last_grade_and_what_counts_as_a_lapse() {
    let app = spawn_app().await;
    let learner = token("review-late-first");
    let base = Utc::now().duration_trunc(Duration::seconds(1)).unwrap();
    let progress = async |app: &TestApp| get_ok(app, MY_PHRASES, &learner).await["data"][0].clone();

    post_ok(
        &app,
        &learner,
        &answered("es", Some(base - Duration::days(1)), &[("ph-es-009", true)]),
    )
    .await;
    // An `again` before it: the phrase's first answer, so no lapse; the latest grade stays good.
    post_ok(
        &app,
        &learner,
        &answered(
            "es",
            Some(base - Duration::days(5)),
            &[("ph-es-009", false)],
        ),
    )
    .await;
    let state = progress(&app).await;
    assert_eq!(
        state["first_reviewed_at"],
        rfc3339(base - Duration::days(5))
    );
    assert_eq!(state["last_reviewed_at"], rfc3339(base - Duration::days(1)));
    assert_eq!(state["last_grade"], "good");
    assert_eq!(
        (state["reviews"].as_i64(), state["correct"].as_i64()),
        (Some(2), Some(1))
    );
    assert_eq!(state["lapses"], 0, "{state}");
    // An earlier `good` makes that `again` a lapse.
    post_ok(
        &app,
        &learner,
        &answered(
            "es",
            Some(base - Duration::days(10)),
            &[("ph-es-009", true)],
        ),
    )
    .await;
    let state = progress(&app).await;
    assert_eq!(
        state["first_reviewed_at"],
        rfc3339(base - Duration::days(10))
    );
    assert_eq!(state["lapses"], 1, "{state}");
    assert_eq!(state["reviews"], 3);
    assert_eq!(state["last_grade"], "good");
}

/// `/me/reviews`: nothing due is an empty answer with `due_total` 0, `limit` rules as for every
/// list, `due_total` counts beyond `limit`, `language` filters both.
#[tokio::test]
async fn reviews_with_nothing_due_limits_and_languages() {
    let app = spawn_app().await;
    let learner = token("review-reviews");
    let empty = get_ok(&app, REVIEWS, &learner).await;
    assert_eq!(empty, json!({"data": [], "count": 0, "due_total": 0}));
    let old = today() - Duration::days(20);
    let es: Vec<(&str, bool)> = ["ph-es-005", "ph-es-004", "ph-es-006"]
        .iter()
        .map(|id| (*id, true))
        .collect();
    post_ok(&app, &learner, &answered("es", Some(old), &es)).await;
    post_ok(
        &app,
        &learner,
        &answered("fr", Some(old), &[("ph-fr-001", false)]),
    )
    .await;
    post_ok(
        &app,
        &learner,
        &answered("es", None, &[("ph-es-007", true)]),
    )
    .await;

    let all = get_ok(&app, REVIEWS, &learner).await;
    assert_eq!(all["due_total"], 4);
    let one = get_ok(&app, &format!("{REVIEWS}?limit=1"), &learner).await;
    assert_eq!(one["count"], 1);
    assert_eq!(one["due_total"], 4);
    let es = get_ok(&app, &format!("{REVIEWS}?language=es"), &learner).await;
    assert_eq!(es["due_total"], 3);
    let ids: Vec<&str> = es["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["phrase"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["ph-es-004", "ph-es-005", "ph-es-006"],
        "same due_at: by id"
    );
    let none = get_ok(&app, &format!("{REVIEWS}?language=xx"), &learner).await;
    assert_eq!(none, json!({"data": [], "count": 0, "due_total": 0}));
    // Not paged: trying to page is told so, not answered page 1 again.
    for query in [
        "limit=0",
        "limit=101",
        "limit=abc",
        "limit=",
        "limit=2.0",
        "offset=1",
        "offset=0",
        "cursor=abc",
    ] {
        bad_query(
            &app,
            &format!("{REVIEWS}?{query}"),
            &learner,
            "invalid_query",
        )
        .await;
    }
    assert_eq!(
        get_ok(&app, &format!("{REVIEWS}?limit=100"), &learner).await["count"],
        4
    );
}

/// "streaks count consecutive UTC days with a session": 23:59:59Z yesterday and 00:00:00Z today
/// are two days; a late session fills a gap; `phrases_started` / `phrases_due` sum into `totals`.
#[tokio::test]
async fn streaks_cross_midnight_by_the_second_and_a_late_session_fills_a_gap() {
    let app = spawn_app().await;
    let learner = token("review-streaks");
    let today = today();
    for at in [
        today - Duration::days(4) + Duration::hours(12),
        today - Duration::days(2) + Duration::hours(12),
        today - Duration::seconds(1),
        today,
    ] {
        post_ok(
            &app,
            &learner,
            &answered("es", Some(at), &[("ph-es-001", true)]),
        )
        .await;
    }
    let progress = get_ok(&app, "/v1/lingo/me/progress", &learner).await;
    // Days -4, -2, -1 and 0: the second before midnight is yesterday, midnight today.
    assert_eq!(progress["current_streak_days"], 3, "{progress}");
    assert_eq!(progress["longest_streak_days"], 3);
    // The late session of three days ago joins both runs.
    let late = today - Duration::days(3) + Duration::hours(23) + Duration::minutes(59);
    post_ok(
        &app,
        &learner,
        &answered("fr", Some(late), &[("ph-fr-001", false)]),
    )
    .await;
    let progress = get_ok(&app, "/v1/lingo/me/progress", &learner).await;
    assert_eq!(progress["current_streak_days"], 5, "{progress}");
    assert_eq!(progress["longest_streak_days"], 5);
    let totals = &progress["totals"];
    assert_eq!(totals["phrases_started"], 2);
    assert_eq!(
        totals["first_studied_at"],
        rfc3339(today - Duration::days(4) + Duration::hours(12))
    );
    assert_eq!(totals["last_studied_at"], rfc3339(today));
    let started: i64 = progress["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["phrases_started"].as_i64().unwrap())
        .sum();
    let due: i64 = progress["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["phrases_due"].as_i64().unwrap())
        .sum();
    assert_eq!(started, 2);
    assert_eq!(totals["phrases_due"], due);
    let reviews = get_ok(&app, REVIEWS, &learner).await;
    assert_eq!(reviews["due_total"], due);
}

/// A language studied only with `phrases_seen` 0 has a null `accuracy`, and `totals` without
/// `language_code` has every counter key.
#[tokio::test]
async fn accuracy_is_null_where_nothing_was_seen_and_totals_have_every_counter() {
    let app = spawn_app().await;
    let learner = token("review-accuracy");
    let response = app
        .post_session(&learner, &crate::helpers::session("de", 60, 0, 0))
        .await;
    assert_eq!(response.status(), 201);
    let progress = get_ok(&app, "/v1/lingo/me/progress", &learner).await;
    assert_eq!(progress["data"][0]["accuracy"], Value::Null);
    assert_eq!(progress["totals"]["accuracy"], Value::Null);
    let mut language = keys(&progress["data"][0]);
    language.remove("language_code");
    assert_eq!(keys(&progress["totals"]), language);
    assert_eq!(
        language,
        key_set(&[
            "sessions",
            "total_duration_seconds",
            "phrases_seen",
            "phrases_correct",
            "accuracy",
            "xp",
            "phrases_started",
            "phrases_due",
            "first_studied_at",
            "last_studied_at"
        ])
    );
    assert_eq!(progress["current_streak_days"], 1);
}

/// `/analytics/phrase-progress`: the scope, `updated_since` that is not a timestamp, `limit` and
/// `offset` like the other cursor lists.
#[tokio::test]
async fn the_phrase_progress_export_refuses_bad_queries_and_missing_credentials() {
    let app = spawn_app().await;
    let analyst = token_with_scope("analyst", "lingo:analytics");
    let response = app.get(EXPORT, None).await;
    assert_problem(response, 401, "missing_token").await;
    let response = app
        .get(
            EXPORT,
            Some(&format!("{}x", token_with_scope("a", "lingo:analytics"))),
        )
        .await;
    assert_problem(response, 401, "invalid_token").await;
    for query in [
        "updated_since=yesterday",
        "updated_since=2026-11-28",
        "limit=0",
        "limit=101",
        "limit=x",
        "offset=0",
    ] {
        bad_query(
            &app,
            &format!("{EXPORT}?{query}"),
            &analyst,
            "invalid_query",
        )
        .await;
    }
    bad_query(
        &app,
        &format!("{EXPORT}?cursor=nope"),
        &analyst,
        "invalid_cursor",
    )
    .await;
    // An offset other than Z, percent-encoded as a client must, is a timestamp.
    let page = get_ok(
        &app,
        &format!("{EXPORT}?updated_since=2026-01-01T02:00:00%2B02:00&limit=100"),
        &analyst,
    )
    .await;
    assert_eq!(keys(&page), key_set(&["data", "count", "next_cursor"]));
}

/// Section 3.2: "1..=100 characters after trimming" counts characters, not bytes; whitespace only
/// is empty; `q` pages by `offset` and by cursor (but not both); accents of the query are ignored
/// against unaccented text.
#[tokio::test]
async fn search_lengths_count_characters_and_paging_works_with_q() {
    let app = spawn_app_unseeded().await;
    let mut db = pipeline(&app).await;
    add_languages(&mut db).await;
    for i in 0..5 {
        add_phrase(
            &mut db,
            &format!("es-{i}"),
            "es",
            &format!("Cafe numero {i}"),
            &[],
        )
        .await;
    }
    let search = |query: &str| {
        let url = app.url(&format!("/v1/lingo/phrases?{query}"));
        let request = app.client.get(url);
        async move { request.send().await.unwrap() }
    };

    let hundred_emoji = "%F0%9F%98%80".repeat(100);
    let response = search(&format!("q={hundred_emoji}")).await;
    assert_eq!(response.status(), 200, "100 emoji are 100 characters");
    let response = search(&format!("q={hundred_emoji}%F0%9F%98%80")).await;
    assert_problem(response, 400, "invalid_query").await;
    let response = search(&format!("q=%20%20{}%20%20", "a".repeat(100))).await;
    assert_eq!(response.status(), 200, "trimmed first");
    for empty in ["q=", "q=%20%20%20", "q=%09%0A"] {
        let response = search(empty).await;
        assert_problem(response, 400, "invalid_query").await;
    }

    let body: Value = search("q=CAFÉ&limit=2").await.json().await.unwrap();
    assert_eq!(body["count"], 2);
    assert_eq!(body["next_offset"], 2);
    let cursor = body["next_cursor"].as_str().unwrap().to_owned();
    let by_offset: Value = search("q=café&limit=2&offset=2")
        .await
        .json()
        .await
        .unwrap();
    let by_cursor: Value = search(&format!("q=CAFÉ&limit=2&cursor={cursor}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(by_offset["data"], by_cursor["data"]);
    assert_eq!(by_offset["count"], 2);
    let response = search(&format!("q=CAFÉ&limit=2&offset=2&cursor={cursor}")).await;
    assert_problem(response, 400, "invalid_query").await;
    let last: Value = search("q=cafe&limit=2&offset=4")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(last["count"], 1);
    assert_eq!(last["next_offset"], Value::Null);
    assert_eq!(last["next_cursor"], Value::Null);
}

/// "`GET /me/study-sessions/{id}` ... 404 `study_session_not_found` (also for another learner's
/// id)": ids not written as UUIDs, or of another learner, are not found, never 400 or 500.
#[tokio::test]
async fn session_ids_of_any_shape_are_not_found() {
    let app = spawn_app().await;
    let owner = token("review-owner");
    let created = post_ok(&app, &owner, &crate::helpers::session("es", 60, 1, 1)).await;
    let id = created["id"].as_str().unwrap();
    let response = app
        .get(&format!("{SESSIONS}/{id}"), Some(&token("review-stranger")))
        .await;
    assert_problem(response, 404, "study_session_not_found").await;
    for odd in [
        id.to_uppercase(),
        id.replace('-', ""),
        format!("{{{id}}}"),
        "00000000-0000-0000-0000-000000000000".to_owned(),
        "not-a-uuid".to_owned(),
        "%20".to_owned(),
    ] {
        let response = app.get(&format!("{SESSIONS}/{odd}"), Some(&owner)).await;
        let status = response.status().as_u16();
        if status == 200 {
            // The same UUID written another way may name the same session.
            let body: Value = response.json().await.unwrap();
            assert_eq!(body["id"], id, "{odd}");
        } else {
            assert_problem(response, 404, "study_session_not_found").await;
        }
    }
}

/// The ids of the first page (limit 100) of an anonymous search.
async fn found(app: &TestApp, q: &str) -> Vec<String> {
    let response = app
        .get(&format!("/v1/lingo/phrases?limit=100&q={q}"), None)
        .await;
    assert_eq!(response.status(), 200, "{q}");
    let body: Value = response.json().await.unwrap();
    body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|phrase| phrase["id"].as_str().unwrap().to_owned())
        .collect()
}

/// A catalogue of texts whose words are joined by punctuation other than spaces and hyphens.
async fn punctuated_catalogue() -> TestApp {
    let app = spawn_app_unseeded().await;
    let mut db = pipeline(&app).await;
    add_languages(&mut db).await;
    for (id, text) in [
        ("time", "Um 8.30 Uhr"),
        ("slash", "ja/nein"),
        ("mail", "E-Mail an info@beispiel.de"),
        ("host", "www.bahn.de öffnen"),
        ("price", "Preis: 3,50 Euro"),
        ("elision", "l’été arrive"),
        ("ligature", "ﬁnden Sie"),
        ("eszett", "Ich heiße Anna"),
    ] {
        add_phrase(&mut db, id, "de", text, &[]).await;
    }
    app
}

/// Words split at commas and apostrophes, ligatures and `ß` fold: these hold.
#[tokio::test]
async fn search_words_split_at_commas_and_apostrophes_and_fold_ligatures() {
    let app = punctuated_catalogue().await;
    for (q, id) in [
        ("50", "price"),
        ("3 euro", "price"),
        ("ete", "elision"),
        ("l ete", "elision"),
        ("finden", "ligature"),
        ("heisse anna", "eszett"),
        ("HEISSE", "eszett"),
        ("xyz", ""),
    ] {
        let expected: Vec<String> = if id.is_empty() {
            vec![]
        } else {
            vec![id.to_owned()]
        };
        assert_eq!(found(&app, q).await, expected, "q={q}");
    }
}

/// docs/lingo.md (and the OpenAPI description): "Words are split at spaces and punctuation", and
/// the contract's "every word must match": the words after a `.`, `/` or `@` of a text are words too.
/// PostgreSQL's text-search parser keeps `8.30` (a decimal), `ja/nein` (a path), an e-mail address
/// and a host name as single tokens, so only their first part is found (and that as a prefix).
#[tokio::test]
async fn search_words_split_at_dots_slashes_and_at_signs() {
    let app = punctuated_catalogue().await;
    for (q, id) in [
        ("30", "time"),
        ("8 30 uhr", "time"),
        ("nein", "slash"),
        ("beispiel", "mail"),
        ("bahn", "host"),
        ("bahn offnen", "host"),
    ] {
        assert_eq!(found(&app, q).await, [id], "q={q}");
    }
}

/// "`next_cursor` ... null at the end", "by `due_at` then phrase `id`": 48 phrases due at the
/// same instant are walked to their end at page sizes that end exactly on a page boundary and
/// not, each once, by id, and a full last page says it is the last.
#[tokio::test]
async fn many_phrases_due_at_one_instant_are_walked_to_the_end_by_id() {
    let app = spawn_app().await;
    let learner = token("review-ties");
    let ids: Vec<String> = (1..=48).rev().map(|i| format!("ph-es-{i:03}")).collect();
    let answers: Vec<(&str, bool)> = ids.iter().map(|id| (id.as_str(), true)).collect();
    let at = Utc::now().duration_trunc(Duration::seconds(1)).unwrap() - Duration::days(6);
    post_ok(&app, &learner, &answered("es", Some(at), &answers)).await;
    let mut expected = ids.clone();
    expected.sort();
    for (limit, pages) in [(6, 8), (5, 10), (48, 1), (100, 1)] {
        let mut walked = Vec::new();
        let mut cursor: Option<String> = None;
        let mut count = 0;
        loop {
            let path = match &cursor {
                Some(cursor) => format!("{MY_PHRASES}?limit={limit}&cursor={cursor}"),
                None => format!("{MY_PHRASES}?limit={limit}&due=true&language=es"),
            };
            let page = get_ok(&app, &path, &learner).await;
            count += 1;
            let data = page["data"].as_array().unwrap();
            assert!(!data.is_empty(), "limit {limit}: an empty page {count}");
            walked.extend(
                data.iter()
                    .map(|p| p["phrase"]["id"].as_str().unwrap().to_owned()),
            );
            match page["next_cursor"].as_str() {
                Some(next) => cursor = Some(next.to_owned()),
                None => break,
            }
        }
        assert_eq!(walked, expected, "limit {limit}");
        assert_eq!(count, pages, "limit {limit}");
    }
    let reviews = get_ok(&app, &format!("{REVIEWS}?limit=100"), &learner).await;
    assert_eq!(reviews["due_total"], 48);
    let order: Vec<&str> = reviews["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["phrase"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(order, expected);
}

/// "`PhraseProgress` `{phrase: PhraseItem, ...}`": the phrase of a progress is the catalogue's
/// item for it, `stats` and `translation_count` included.
#[tokio::test]
async fn the_phrase_of_a_progress_is_the_catalogue_item() {
    let app = spawn_app().await;
    let learner = token("review-item");
    let catalogue = get_ok(&app, "/v1/lingo/phrases?language=es&limit=100", &learner).await;
    let items = catalogue["data"].as_array().unwrap();
    let with_stats = items
        .iter()
        .find(|item| !item["stats"].is_null())
        .expect("the seed has stats for some phrases");
    let without_stats = items
        .iter()
        .find(|item| item["stats"].is_null())
        .expect("and none for others");
    let ids = [
        with_stats["id"].as_str().unwrap(),
        without_stats["id"].as_str().unwrap(),
    ];
    post_ok(
        &app,
        &learner,
        &answered("es", None, &[(ids[0], true), (ids[1], false)]),
    )
    .await;
    let mine = get_ok(&app, MY_PHRASES, &learner).await;
    for item in [with_stats, without_stats] {
        let progress = mine["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["phrase"]["id"] == item["id"])
            .unwrap();
        assert_eq!(&progress["phrase"], item);
    }
}

/// "`next_offset` is null when there is nothing after this page" and `next_cursor` "null at the
/// end": a last page that is exactly full says so, by offset and by cursor, for the catalogue and
/// for a learner's sessions.
#[tokio::test]
async fn an_exactly_full_last_page_has_no_next_offset_or_cursor() {
    let app = spawn_app().await;
    let learner = token("review-full-page");
    let es = get_ok(&app, "/v1/lingo/phrases?language=es&limit=100", &learner).await;
    let total = es["count"].as_u64().unwrap();
    assert!(total > 2, "the seed has Spanish phrases");
    let page = get_ok(
        &app,
        &format!("/v1/lingo/phrases?language=es&limit={total}"),
        &learner,
    )
    .await;
    assert_eq!(page["count"], total);
    assert_eq!(page["next_offset"], Value::Null);
    assert_eq!(page["next_cursor"], Value::Null);
    let first = get_ok(
        &app,
        &format!("/v1/lingo/phrases?language=es&limit={}", total - 2),
        &learner,
    )
    .await;
    let cursor = first["next_cursor"].as_str().unwrap();
    let last = get_ok(
        &app,
        &format!("/v1/lingo/phrases?limit=2&cursor={cursor}"),
        &learner,
    )
    .await;
    assert_eq!(last["count"], 2);
    assert_eq!(last["next_cursor"], Value::Null);
    assert_eq!(last["next_offset"], Value::Null);

    for _ in 0..4 {
        post_ok(&app, &learner, &crate::helpers::session("es", 60, 1, 1)).await;
    }
    let sessions = get_ok(&app, &format!("{SESSIONS}?limit=2&offset=2"), &learner).await;
    assert_eq!(sessions["count"], 2);
    assert_eq!(sessions["next_offset"], Value::Null);
    assert_eq!(sessions["next_cursor"], Value::Null);
    let first = get_ok(&app, &format!("{SESSIONS}?limit=2"), &learner).await;
    assert_eq!(first["next_offset"], 2);
    let cursor = first["next_cursor"].as_str().unwrap();
    let last = get_ok(
        &app,
        &format!("{SESSIONS}?limit=2&cursor={cursor}"),
        &learner,
    )
    .await;
    assert_eq!(last["count"], 2);
    assert_eq!(last["next_cursor"], Value::Null);
}
