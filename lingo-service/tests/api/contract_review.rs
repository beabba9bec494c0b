//! An outside check of `POST /me/study-sessions` against the contract (docs/lingo.md, docs/conventions.md), sentence
//! by sentence: the edges of the input the rest of the suite does not already hold (integers
//! written otherwise, `answers` empty / null / exactly 1,000, strictly typed answers, every bad
//! field listed, `studied_at` offsets, precision and formats, odd phrase ids, idempotency with
//! answers and after refusals, the 128 KiB limit to the byte, request ids, tokens at the service).

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use reqwest::header::{CONTENT_TYPE, HeaderValue};
use serde_json::{Value, json};
use shared_auth::testing::{default_claims, token, token_with_claims, token_with_scope};

use crate::helpers::{
    TestApp, answered_session, assert_problem, assert_timestamp, error_fields, now_seconds,
    post_created as created, rfc3339, spawn_app,
};

const SESSIONS: &str = "/v1/lingo/me/study-sessions";

/// A session whose counts are those of `answers` (`(phrase_id, correct)`), all in Spanish.
fn answered(answers: &[(&str, bool)]) -> Value {
    let ungraded: Vec<(&str, bool, Option<&str>)> = answers
        .iter()
        .map(|&(phrase, correct)| (phrase, correct, None))
        .collect();
    answered_session("es", None, &ungraded)
}

async fn post(app: &TestApp, learner: &str, body: &str, key: Option<&str>) -> reqwest::Response {
    app.post_raw(SESSIONS, learner, body, key).await
}

async fn refused(app: &TestApp, learner: &str, body: &str, code: &str) -> Value {
    let response = post(app, learner, body, None).await;
    assert_eq!(response.status(), 422, "{body}");
    assert_problem(response, 422, code).await
}

/// "The three counts are JSON integers (not floats, not strings)": an exponent, a value past
/// i64/u64, a boolean, each named by its field, and nothing stored.
#[tokio::test]
async fn counts_written_with_an_exponent_past_64_bits_or_as_booleans_are_refused_by_field() {
    let app = spawn_app().await;
    let learner = token("review-numbers");
    let template = r#"{"duration_seconds": D, "phrases_seen": S, "phrases_correct": C, "language_code": "es"}"#;
    let body = |d: &str, s: &str, c: &str| template.replace('D', d).replace('S', s).replace('C', c);
    let cases = [
        (body("1e2", "5", "4"), "duration_seconds"),
        (body("60", "5E0", "4"), "phrases_seen"),
        (body("60", "5", "4.0"), "phrases_correct"),
        (body("60", "99999999999999999999", "4"), "phrases_seen"),
        (body("18446744073709551616", "5", "4"), "duration_seconds"),
        (body("60", "5", "true"), "phrases_correct"),
        (body("60", "[5]", "4"), "phrases_seen"),
    ];
    for (body, field) in cases {
        let problem = refused(&app, &learner, &body, "validation_failed").await;
        assert!(
            error_fields(&problem).contains(&field.to_owned()),
            "{body}: {problem}"
        );
    }
    assert_eq!(app.count("study_sessions").await, 0);
}

/// "an optional field sent as `null` is the same as one left out" (docs/lingo.md), and an empty
/// `answers` with zero counts is a valid session with answers (its counts are theirs).
#[tokio::test]
async fn null_optionals_are_absent_and_an_empty_answer_list_with_zero_counts_is_recorded() {
    let app = spawn_app().await;
    let learner = token("review-nulls");
    let with_nulls = json!({"duration_seconds": 60, "phrases_seen": 3, "phrases_correct": 2,
        "language_code": "es", "answers": null, "studied_at": null});
    let session = created(&app, &learner, &with_nulls).await;
    assert_eq!(session["answer_count"], 0);
    assert_eq!(session["studied_at"], session["created_at"]);
    assert_eq!(session["xp_awarded"], 12);

    let empty = json!({"duration_seconds": 60, "phrases_seen": 0, "phrases_correct": 0,
        "language_code": "es", "answers": []});
    let session = created(&app, &learner, &empty).await;
    assert_eq!(session["answer_count"], 0);
    assert_eq!(session["xp_awarded"], 0, "0 when phrases_seen is 0");

    let mut null_grade = answered(&[("ph-es-001", true), ("ph-es-002", false)]);
    null_grade["answers"][0]["grade"] = Value::Null;
    null_grade["answers"][1]["grade"] = Value::Null;
    let session = created(&app, &learner, &null_grade).await;
    assert_eq!(session["answer_count"], 2);
    let phrases: Value = app
        .get("/v1/lingo/me/phrases", Some(&learner))
        .await
        .json()
        .await
        .unwrap();
    let grades: Vec<(&str, &str)> = phrases["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["phrase"]["id"].as_str().unwrap(),
                p["last_grade"].as_str().unwrap(),
            )
        })
        .collect();
    let mut grades = grades;
    grades.sort();
    assert_eq!(grades, [("ph-es-001", "good"), ("ph-es-002", "again")]);
}

/// "`answers`: up to 1,000": exactly 1,000 is a session, counted with the XP rules ("XP and levels
/// stay as above"), its level raised, every answer applied.
#[tokio::test]
async fn exactly_a_thousand_answers_are_recorded_with_their_xp_and_level() {
    let app = spawn_app().await;
    let learner = token("review-thousand");
    let ids: Vec<String> = (1..=1000)
        .map(|i| format!("ph-es-{:03}", (i % 20) + 1))
        .collect();
    let answers: Vec<(&str, bool)> = ids.iter().map(|id| (id.as_str(), true)).collect();
    let body = answered(&answers);
    let session = created(&app, &learner, &body).await;
    assert_eq!(session["answer_count"], 1000);
    assert_eq!(session["phrases_seen"], 1000);
    assert_eq!(session["xp_awarded"], 10 + 1000 + 5);
    assert_eq!(session["total_xp"], 1015);
    assert_eq!(session["level"], 7, "750 <= 1015 < 1125");
    assert_eq!(session["leveled_up"], true);

    let id = session["id"].as_str().unwrap();
    let shown: Value = app
        .get(&format!("{SESSIONS}/{id}"), Some(&learner))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(shown["answer_count"], 1000);
    let phrases: Value = app
        .get("/v1/lingo/me/phrases?limit=100", Some(&learner))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(phrases["count"], 20);
    let reviews: i64 = phrases["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["reviews"].as_i64().unwrap())
        .sum();
    assert_eq!(reviews, 1000);
}

/// `grade` is one of four lower-case words, `correct` a JSON boolean, `phrase_id` a string: each
/// other spelling is 422 `validation_failed` naming the answer's field.
#[tokio::test]
async fn answers_are_typed_strictly_and_each_bad_one_is_named() {
    let app = spawn_app().await;
    let learner = token("review-typed");
    let base = answered(&[("ph-es-001", true), ("ph-es-002", false)]);
    let with = |index: usize, field: &str, value: Value| {
        let mut body = base.clone();
        body["answers"][index][field] = value;
        body.to_string()
    };
    let without = |index: usize, field: &str| {
        let mut body = base.clone();
        body["answers"][index]
            .as_object_mut()
            .unwrap()
            .remove(field);
        body.to_string()
    };
    let cases = [
        (with(0, "grade", json!("Good")), "answers[0].grade"),
        (with(0, "grade", json!("GOOD")), "answers[0].grade"),
        (with(1, "grade", json!("")), "answers[1].grade"),
        (with(0, "grade", json!(3)), "answers[0].grade"),
        (with(0, "correct", json!("true")), "answers[0].correct"),
        (with(1, "correct", json!(0)), "answers[1].correct"),
        (without(1, "correct"), "answers[1].correct"),
        (without(0, "phrase_id"), "answers[0].phrase_id"),
        (with(1, "phrase_id", json!(1)), "answers[1].phrase_id"),
        (with(0, "phrase_id", Value::Null), "answers[0].phrase_id"),
    ];
    for (body, field) in cases {
        let problem = refused(&app, &learner, &body, "validation_failed").await;
        assert!(
            error_fields(&problem).contains(&field.to_owned()),
            "{body}: {problem}"
        );
    }
    let mut not_a_list = base.clone();
    not_a_list["answers"] = json!({"phrase_id": "ph-es-001", "correct": true});
    let problem = refused(&app, &learner, &not_a_list.to_string(), "validation_failed").await;
    assert!(
        error_fields(&problem)[0].starts_with("answers"),
        "{problem}"
    );
    assert_eq!(app.count("study_sessions").await, 0);
}

/// "`errors` is present on 422 validation failures, one entry per bad field" and "A 422 about
/// ranges lists every bad field": range errors and a contradicting grade, all in one answer.
#[tokio::test]
async fn every_bad_field_of_one_body_is_listed() {
    let app = spawn_app().await;
    let learner = token("review-all-fields");
    let body = json!({
        "duration_seconds": 0, "phrases_seen": 2, "phrases_correct": 3, "language_code": "es",
        "answers": [
            {"phrase_id": "ph-es-001", "correct": true, "grade": "again"},
            {"phrase_id": "ph-es-002", "correct": false, "grade": "easy"},
        ],
    });
    let problem = refused(&app, &learner, &body.to_string(), "validation_failed").await;
    assert_eq!(
        error_fields(&problem),
        [
            "duration_seconds",
            "phrases_correct",
            "answers[0].grade",
            "answers[1].grade"
        ]
    );
    // A duplicated key is a malformed object, not the last value silently winning.
    let duplicated = r#"{"duration_seconds": 60, "duration_seconds": 61, "phrases_seen": 0,
                         "phrases_correct": 0, "language_code": "es"}"#;
    refused(&app, &learner, duplicated, "validation_failed").await;
    assert_eq!(app.count("study_sessions").await, 0);
}

/// "`studied_at`: when the session happened (RFC 3339)"; "Timestamps are RFC 3339 in UTC with a
/// `Z`": another offset is the same instant, answered in UTC; fractions are not shown.
#[tokio::test]
async fn studied_at_with_an_offset_or_a_fraction_is_answered_in_utc_whole_seconds() {
    let app = spawn_app().await;
    let learner = token("review-offsets");
    let at = now_seconds() - Duration::hours(5);
    let plus_two = at
        .with_timezone(&chrono::FixedOffset::east_opt(2 * 3600).unwrap())
        .to_rfc3339_opts(SecondsFormat::Secs, false);
    assert!(plus_two.ends_with("+02:00"));
    let minus_nine_thirty = at
        .with_timezone(&chrono::FixedOffset::west_opt(9 * 3600 + 1800).unwrap())
        .to_rfc3339_opts(SecondsFormat::Micros, false);
    let fraction = format!("{}.999999Z", rfc3339(at).trim_end_matches('Z'));
    for sent in [plus_two, minus_nine_thirty, fraction] {
        let mut body = answered(&[("ph-es-001", true)]);
        body["studied_at"] = json!(sent);
        let session = created(&app, &learner, &body).await;
        assert_eq!(session["studied_at"], rfc3339(at), "{sent}");
        let id = session["id"].as_str().unwrap();
        let shown: Value = app
            .get(&format!("{SESSIONS}/{id}"), Some(&learner))
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(shown["studied_at"], rfc3339(at), "{sent}");
        assert_timestamp(&shown["created_at"]);
    }
    let phrases: Value = app
        .get("/v1/lingo/me/phrases", Some(&learner))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(phrases["data"][0]["first_reviewed_at"], rfc3339(at));
    assert_eq!(phrases["data"][0]["last_reviewed_at"], rfc3339(at));
}

/// RFC 3339 (section 5.6, NOTE) allows a lower-case `t` and `z`; what is not RFC 3339 (no offset,
/// a five-digit year, a date only, a number) is 422 `invalid_studied_at` or, for a value that is
/// not even a string, `validation_failed`, both naming `studied_at`.
#[tokio::test]
async fn studied_at_formats_at_the_edges_of_rfc_3339() {
    let app = spawn_app().await;
    let learner = token("review-formats");
    let at = now_seconds() - Duration::hours(1);
    let utc = rfc3339(at);
    let with_at = |value: Value| {
        let mut body = answered(&[("ph-es-001", true)]);
        body["studied_at"] = value;
        body
    };
    let lower = utc.replace('T', "t").replace('Z', "z");
    let session = created(&app, &learner, &with_at(json!(lower))).await;
    assert_eq!(
        session["studied_at"], utc,
        "lower-case t and z are RFC 3339"
    );

    let no_offset = utc.trim_end_matches('Z').to_owned();
    let year_10000 = format!("10000{}", &utc[4..]);
    for bad in [
        no_offset.as_str(),
        year_10000.as_str(),
        &utc[..10],
        "",
        "2026-02-30T10:00:00Z",
        "9999-12-31T23:59:59Z",
        "0000-01-01T00:00:00Z",
        "2026-11-27T10:00:00+24:00",
    ] {
        let problem = refused(
            &app,
            &learner,
            &with_at(json!(bad)).to_string(),
            "invalid_studied_at",
        )
        .await;
        assert_eq!(error_fields(&problem), ["studied_at"], "{bad}");
    }
    let problem = refused(
        &app,
        &learner,
        &with_at(json!(at.timestamp())).to_string(),
        "validation_failed",
    )
    .await;
    assert_eq!(error_fields(&problem), ["studied_at"]);
    assert_eq!(app.count("study_sessions").await, 1);
}

/// "at most 60 s in the future": close to both edges of the window, with the margin a loaded
/// machine needs (the service's clock reads later than the test's).
#[tokio::test]
async fn studied_at_close_to_both_edges_of_the_window() {
    let app = spawn_app().await;
    let learner = token("review-window");
    let with_at = |at: DateTime<Utc>| {
        let mut body = answered(&[("ph-es-001", true)]);
        body["studied_at"] = json!(rfc3339(at));
        body
    };
    let now = now_seconds();
    let ahead = created(&app, &learner, &with_at(now + Duration::seconds(59))).await;
    assert_eq!(ahead["studied_at"], rfc3339(now + Duration::seconds(59)));
    let old = now - Duration::days(30) + Duration::seconds(20);
    let session = created(&app, &learner, &with_at(old)).await;
    assert_eq!(session["studied_at"], rfc3339(old));
    for at in [
        Utc::now() + Duration::seconds(66),
        Utc::now() - Duration::days(30) - Duration::seconds(1),
        Utc::now() - Duration::days(365 * 100),
    ] {
        let problem = refused(
            &app,
            &learner,
            &with_at(at).to_string(),
            "invalid_studied_at",
        )
        .await;
        assert_eq!(error_fields(&problem), ["studied_at"]);
    }
}

/// A leap second is RFC 3339 (`time-second` is `00-58, 59, 60`), and "Streaks ... count a session
/// on the UTC day of its `studied_at`": `23:59:60Z` of a day is either refused as
/// `invalid_studied_at` or stored within that day, never moved to midnight of the next.
#[tokio::test]
async fn a_leap_second_studied_at_stays_on_its_utc_day() {
    let app = spawn_app().await;
    let learner = token("review-leap");
    let yesterday = (Utc::now() - Duration::days(1))
        .format("%Y-%m-%d")
        .to_string();
    let mut body = answered(&[("ph-es-001", true)]);
    body["studied_at"] = json!(format!("{yesterday}T23:59:60Z"));
    let response = app.post_session(&learner, &body).await;
    if response.status() == 201 {
        let session: Value = response.json().await.unwrap();
        assert_timestamp(&session["studied_at"]);
        let text = session["studied_at"].as_str().unwrap();
        assert!(
            text.starts_with(&yesterday),
            "sent {yesterday}T23:59:60Z, stored {text}"
        );
    } else {
        let problem = assert_problem(response, 422, "invalid_studied_at").await;
        assert_eq!(error_fields(&problem), ["studied_at"]);
    }
}

/// "`errors` is present on 422 validation failures, one entry per bad field" (section 1), and
/// docs/lingo.md: "a field missing, mistyped, out of range, or not accepted ...; `errors` names
/// each". A body with several such fields names every one of them, not only the first.
#[tokio::test]
async fn several_missing_mistyped_or_unknown_fields_are_all_named() {
    let app = spawn_app().await;
    let learner = token("review-each-field");
    let cases: [(&str, &[&str]); 6] = [
        (
            "{}",
            &[
                "duration_seconds",
                "phrases_seen",
                "phrases_correct",
                "language_code",
            ],
        ),
        (
            r#"{"duration_seconds": 60, "language_code": "es"}"#,
            &["phrases_seen", "phrases_correct"],
        ),
        (
            r#"{"duration_seconds": "60", "phrases_seen": "1", "phrases_correct": 0, "language_code": 5}"#,
            &["duration_seconds", "phrases_seen", "language_code"],
        ),
        // A mistyped field and values out of range, named together (`phrases_correct` as on a
        // body of the right shape: it exceeds `phrases_seen`).
        (
            r#"{"duration_seconds": "60", "phrases_seen": -1, "phrases_correct": 0, "language_code": "es"}"#,
            &["duration_seconds", "phrases_seen", "phrases_correct"],
        ),
        // A rule that reads a field the client got wrong is not judged on a stand-in for it:
        // `phrases_seen` mistyped names no `phrases_correct` error.
        (
            r#"{"duration_seconds": 0, "phrases_seen": "5", "phrases_correct": 3, "language_code": "es"}"#,
            &["duration_seconds", "phrases_seen"],
        ),
        (
            r#"{"duration_seconds": 60, "phrases_seen": 1, "phrases_correct": 1, "language_code": "es",
                "learner_id": "x", "mood": "ok"}"#,
            &["learner_id", "mood"],
        ),
    ];
    for (body, expected) in cases {
        let problem = refused(&app, &learner, body, "validation_failed").await;
        let mut got = error_fields(&problem);
        got.sort();
        let mut expected: Vec<String> = expected.iter().map(|f| (*f).to_owned()).collect();
        expected.sort();
        assert_eq!(got, expected, "{body}: {problem}");
    }
}

/// "every `phrase_id` must be a phrase whose `language_code` is the session's (422
/// `unknown_phrase`, `errors[].field` like `answers[3].phrase_id`)": ids are opaque, so a path,
/// another case, trailing space, an escape, a very long id or an empty one are no phrase.
#[tokio::test]
async fn odd_phrase_ids_are_unknown_phrases_named_by_their_index() {
    let app = spawn_app().await;
    let learner = token("review-odd-ids");
    let long = "p".repeat(20_000);
    for odd in [
        "PH-ES-001",
        "ph-es-001 ",
        " ph-es-001",
        "../ph-es-001",
        "ph-es-001%00",
        "ph-es-%",
        "ph-es-00_",
        "ツ",
        "",
        long.as_str(),
        "ph-en-001",
    ] {
        let body = answered(&[("ph-es-002", true), (odd, true)]);
        let problem = refused(&app, &learner, &body.to_string(), "unknown_phrase").await;
        assert_eq!(error_fields(&problem), ["answers[1].phrase_id"], "{odd:?}");
    }
    assert_eq!(app.count("study_sessions").await, 0);
}

/// "A request that failed validation stores nothing": a key first used with a refused body (in
/// validation, or in the transaction: unknown phrase, unknown language, `studied_at`) is free for
/// the corrected body, which is recorded, not answered `idempotency_key_reused`.
#[tokio::test]
async fn a_key_first_sent_with_a_refused_body_is_free_for_the_corrected_one() {
    let app = spawn_app().await;
    let learner = token("review-key-after-refusal");
    let good = answered(&[("ph-es-001", true), ("ph-es-002", false)]);
    let mut mismatch = good.clone();
    mismatch["phrases_seen"] = json!(3);
    let unknown_phrase = answered(&[("ph-es-001", true), ("ph-fr-002", false)]);
    let mut unknown_language = good.clone();
    unknown_language["language_code"] = json!("xx");
    let mut too_old = good.clone();
    too_old["studied_at"] = json!(rfc3339(Utc::now() - Duration::days(40)));
    for (index, (bad, code)) in [
        (mismatch, "answers_mismatch"),
        (unknown_phrase, "unknown_phrase"),
        (unknown_language, "unknown_language"),
        (too_old, "invalid_studied_at"),
    ]
    .into_iter()
    .enumerate()
    {
        let key = format!("fix-me-{index}");
        let response = post(&app, &learner, &bad.to_string(), Some(&key)).await;
        assert_problem(response, 422, code).await;
        let response = post(&app, &learner, &good.to_string(), Some(&key)).await;
        assert_eq!(response.status(), 201, "{code}");
        assert!(response.headers().get("idempotency-replayed").is_none());
    }
    assert_eq!(app.count("study_sessions").await, 4);
}

/// "A repeat with the same key and the same body replays the first response ... and changes
/// nothing": with answers, the same body in another key order and spacing replays and leaves the
/// phrase states as they were; the answers in another order are another body.
#[tokio::test]
async fn a_replay_with_answers_in_another_key_order_changes_no_state() {
    let app = spawn_app().await;
    let learner = token("review-replay-answers");
    let at = rfc3339(now_seconds() - Duration::days(2));
    let body = format!(
        r#"{{"duration_seconds": 90, "phrases_seen": 2, "phrases_correct": 1, "language_code": "es",
             "studied_at": "{at}", "answers": [{{"phrase_id": "ph-es-001", "correct": true, "grade": "easy"}},
             {{"phrase_id": "ph-es-002", "correct": false}}]}}"#
    );
    let reordered = format!(
        r#"{{"answers":[{{"grade":"easy","correct":true,"phrase_id":"ph-es-001"}},{{"correct":false,"phrase_id":"ph-es-002"}}],
             "studied_at":"{at}","language_code":"es","phrases_correct":1,"phrases_seen":2,"duration_seconds":90}}"#
    );
    let first = post(&app, &learner, &body, Some("answers-key")).await;
    assert_eq!(first.status(), 201);
    let location = first.headers()["location"].clone();
    let first_body = first.bytes().await.unwrap();
    let states = crate::helpers::stored_states(&app, "review-replay-answers").await;

    let again = post(&app, &learner, &reordered, Some("answers-key")).await;
    assert_eq!(again.status(), 201);
    assert_eq!(again.headers()["idempotency-replayed"], "true");
    assert_eq!(again.headers()["location"], location);
    assert_eq!(again.bytes().await.unwrap(), first_body);
    assert_eq!(
        crate::helpers::stored_states(&app, "review-replay-answers").await,
        states
    );

    let swapped = format!(
        r#"{{"duration_seconds": 90, "phrases_seen": 2, "phrases_correct": 1, "language_code": "es",
             "studied_at": "{at}", "answers": [{{"phrase_id": "ph-es-002", "correct": false}},
             {{"phrase_id": "ph-es-001", "correct": true, "grade": "easy"}}]}}"#
    );
    let response = post(&app, &learner, &swapped, Some("answers-key")).await;
    assert_problem(response, 422, "idempotency_key_reused").await;
    assert_eq!(app.count("study_sessions").await, 1);
}

/// "Idempotency-Key (optional request header, 1..=255 visible ASCII)": the edges of the header.
#[tokio::test]
async fn idempotency_keys_at_the_edges_of_visible_ascii() {
    let app = spawn_app().await;
    let learner = token("review-keys");
    let body = crate::helpers::session("es", 60, 1, 1).to_string();
    let visible: String = (0x21u8..=0x7E).map(char::from).collect();
    let longest = format!("{visible}{}", "k".repeat(255 - visible.len()));
    for good in [longest.as_str(), "!", "~"] {
        let response = post(&app, &learner, &body, Some(good)).await;
        assert_eq!(response.status(), 201, "{good}");
    }
    let send = |value: HeaderValue, twice: bool| {
        let mut request = app
            .client
            .post(app.url(SESSIONS))
            .bearer_auth(&learner)
            .header(CONTENT_TYPE, "application/json")
            .header("idempotency-key", value.clone());
        if twice {
            request = request.header("idempotency-key", HeaderValue::from_static("other"));
        }
        request.body(body.clone()).send()
    };
    for bad in [
        HeaderValue::from_static(""),
        HeaderValue::from_static("tab\there"),
        HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap(),
        HeaderValue::from_bytes(b"\xff").unwrap(),
    ] {
        let response = send(bad.clone(), false).await.unwrap();
        assert_problem(response, 400, "invalid_idempotency_key").await;
    }
    let response = send(HeaderValue::from_static("one"), true).await.unwrap();
    assert_problem(response, 400, "invalid_idempotency_key").await;
    assert_eq!(app.count("study_sessions").await, 3);
}

/// "at most 128 KiB at the services": a body of exactly 131,072 bytes is read, one byte more is
/// 413 `payload_too_large`.
#[tokio::test]
async fn a_body_of_exactly_128_kib_is_accepted_and_one_byte_more_is_413() {
    let app = spawn_app().await;
    let learner = token("review-128k");
    let core = crate::helpers::session("es", 60, 1, 1).to_string();
    let padded = |size: usize| {
        let mut body = String::from("{");
        body.push_str(&" ".repeat(size - core.len()));
        body.push_str(&core[1..]);
        assert_eq!(body.len(), size);
        body
    };
    let response = post(&app, &learner, &padded(128 * 1024), None).await;
    assert_eq!(response.status(), 201);
    let response = post(&app, &learner, &padded(128 * 1024 + 1), None).await;
    assert_problem(response, 413, "payload_too_large").await;
    assert_eq!(app.count("study_sessions").await, 1);
}

/// The same limit when the body comes in chunks without a `Content-Length`.
#[tokio::test]
async fn a_chunked_body_is_held_to_128_kib_to_the_byte() {
    let app = spawn_app().await;
    let learner = token("review-128k-chunked");
    let core = crate::helpers::session("es", 60, 1, 1).to_string();
    let send = |size: usize| {
        let mut body = String::from("{");
        body.push_str(&" ".repeat(size - core.len()));
        body.push_str(&core[1..]);
        assert_eq!(body.len(), size);
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> = body
            .into_bytes()
            .chunks(10_000)
            .map(|chunk| Ok(chunk.to_vec()))
            .collect();
        app.client
            .post(app.url(SESSIONS))
            .bearer_auth(&learner)
            .header(CONTENT_TYPE, "application/json")
            .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
                chunks,
            )))
            .send()
    };
    let response = send(128 * 1024).await.unwrap();
    assert_eq!(response.status(), 201);
    let response = send(128 * 1024 + 1).await.unwrap();
    assert_problem(response, 413, "payload_too_large").await;
    assert_eq!(app.count("study_sessions").await, 1);
}

/// Media types compare case-insensitively and take parameters (RFC 9110 8.3.1):
/// `application/json; charset=utf-8` and `Application/JSON` are JSON.
#[tokio::test]
async fn json_content_types_with_parameters_or_other_case_are_json() {
    let app = spawn_app().await;
    let learner = token("review-media");
    let body = crate::helpers::session("es", 60, 1, 1).to_string();
    for content_type in ["application/json; charset=utf-8", "Application/JSON"] {
        let response = app
            .client
            .post(app.url(SESSIONS))
            .bearer_auth(&learner)
            .header(CONTENT_TYPE, content_type)
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 201, "{content_type}");
    }
}

/// "Every response carries `x-request-id` (taken from the request when it has a sane one, else
/// generated)", and a problem's `request_id` is that id.
#[tokio::test]
async fn request_ids_are_kept_when_sane_and_replaced_otherwise() {
    let app = spawn_app().await;
    let learner = token("review-request-id");
    let send = |id: &str, body: String| {
        app.client
            .post(app.url(SESSIONS))
            .bearer_auth(&learner)
            .header(CONTENT_TYPE, "application/json")
            .header("x-request-id", id)
            .body(body)
            .send()
    };
    let good = crate::helpers::session("es", 60, 1, 1).to_string();
    let longest = format!("client-id.1:2_3-{}", "x".repeat(112));
    assert_eq!(longest.len(), 128);
    for sane in ["client-id.1:2_3", longest.as_str()] {
        let response = send(sane, good.clone()).await.unwrap();
        assert_eq!(response.status(), 201);
        assert_eq!(response.headers()["x-request-id"], sane);
    }

    let bad = crate::helpers::session("es", 0, 1, 1).to_string();
    let response = send("client-id-2", bad.clone()).await.unwrap();
    assert_eq!(response.headers()["x-request-id"], "client-id-2");
    let problem = assert_problem(response, 422, "validation_failed").await;
    assert_eq!(problem["request_id"], "client-id-2");

    // Refusals before the handler (token, size, media type, route) keep the id too.
    let refusals = [
        app.client.get(app.url("/v1/lingo/me/xp")),
        app.client
            .post(app.url(SESSIONS))
            .bearer_auth(&learner)
            .header(CONTENT_TYPE, "application/json")
            .body("x".repeat(200_000)),
        app.client
            .post(app.url(SESSIONS))
            .bearer_auth(&learner)
            .header(CONTENT_TYPE, "text/json")
            .body("{}"),
        app.client.get(app.url("/v1/lingo/me/nothing-here")),
    ];
    for (index, (request, (status, code))) in refusals
        .into_iter()
        .zip([
            (401, "missing_token"),
            (413, "payload_too_large"),
            (415, "unsupported_media_type"),
            (404, "not_found"),
        ])
        .enumerate()
    {
        let id = format!("refused-{index}");
        let response = request.header("x-request-id", &id).send().await.unwrap();
        assert_eq!(response.headers()["x-request-id"], id.as_str());
        let problem = assert_problem(response, status, code).await;
        assert_eq!(problem["request_id"], id.as_str());
    }
    for insane in ["has space", &"x".repeat(129), "a\"b", "<script>"] {
        let response = send(insane, bad.clone()).await.unwrap();
        let id = response.headers()["x-request-id"]
            .to_str()
            .unwrap()
            .to_owned();
        assert_ne!(id, insane);
        assert!(!id.is_empty());
        let problem = assert_problem(response, 422, "validation_failed").await;
        assert_eq!(problem["request_id"], id.as_str());
    }
}

/// Section 2 at the service: `sub` of 1..=255 characters (a 255-character one of multi-byte
/// letters is a learner whose id comes back whole), control characters refused, the outcomes
/// table with its exact `WWW-Authenticate`, and the 60 s leeway.
#[tokio::test]
async fn tokens_at_the_service_follow_the_outcomes_table() {
    let app = spawn_app().await;
    let long_sub = "é".repeat(255);
    let response = app
        .post_session(&token(&long_sub), &crate::helpers::session("es", 60, 3, 3))
        .await;
    assert_eq!(response.status(), 201);
    let xp: Value = app
        .get("/v1/lingo/me/xp", Some(&token(&long_sub)))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(xp["learner_id"], long_sub.as_str());
    assert_eq!(xp["total_xp"], 13);

    let realm = r#"Bearer realm="lingo-news""#;
    let invalid = |claims: Value| token_with_claims(claims);
    let mut expired = default_claims("leeway");
    expired["exp"] = json!(Utc::now().timestamp() - 120);
    let mut within_leeway = default_claims("leeway");
    within_leeway["exp"] = json!(Utc::now().timestamp() - 20);
    let mut early = default_claims("leeway");
    early["nbf"] = json!(Utc::now().timestamp() + 120);
    let mut iss_array = default_claims("iss-array");
    iss_array["iss"] = json!(["lingo-news-dev"]);
    let mut no_sub = default_claims("x");
    no_sub.as_object_mut().unwrap().remove("sub");
    let mut exp_string = default_claims("x");
    exp_string["exp"] = json!(exp_string["exp"].to_string());
    for (what, sub_token) in [
        ("256 characters", token(&"a".repeat(256))),
        ("empty sub", token("")),
        ("control character", token("a\u{1}b")),
        ("expired past the leeway", invalid(expired)),
        ("not yet valid past the leeway", invalid(early)),
        ("iss as an array", invalid(iss_array)),
        ("no sub", invalid(no_sub)),
        ("exp a string", invalid(exp_string)),
    ] {
        let response = app.get("/v1/lingo/me/xp", Some(&sub_token)).await;
        let challenge = response.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(
            challenge.starts_with(&format!(
                r#"{realm}, error="invalid_token", error_description=""#
            )),
            "{what}: {challenge}"
        );
        assert_problem(response, 401, "invalid_token").await;
    }
    let mut future_iat = default_claims("iat");
    future_iat["iat"] = json!(Utc::now().timestamp() + 3600);
    let mut other_audiences = default_claims("aud");
    other_audiences["aud"] = json!(["other", "news"]);
    for (what, claims) in [
        ("issued an hour ahead", future_iat),
        ("no audience of ours", other_audiences),
    ] {
        let response = app.get("/v1/lingo/me/xp", Some(&invalid(claims))).await;
        assert_eq!(response.status(), 401, "{what}");
        assert_problem(response, 401, "invalid_token").await;
    }
    let mut early_within_leeway = default_claims("leeway");
    early_within_leeway["nbf"] = json!(Utc::now().timestamp() + 20);
    let mut audiences = default_claims("leeway");
    audiences["aud"] = json!(["other", "lingo-news"]);
    for (what, claims) in [
        ("expired 20 s ago", within_leeway),
        ("valid in 20 s", early_within_leeway),
        ("our audience among others", audiences),
    ] {
        let response = app.get("/v1/lingo/me/xp", Some(&invalid(claims))).await;
        assert_eq!(response.status(), 200, "{what}");
    }

    let response = app.get("/v1/lingo/me/xp", None).await;
    assert_eq!(response.headers()["www-authenticate"], realm);
    assert_problem(response, 401, "missing_token").await;
    for header in ["Basic YTpi", "Bearer", "Bearer ", "Bearer a b", "bearerx y"] {
        let response = app
            .client
            .get(app.url("/v1/lingo/me/xp"))
            .header("authorization", header)
            .send()
            .await
            .unwrap();
        assert_eq!(
            response.headers()["www-authenticate"],
            format!(r#"{realm}, error="invalid_request""#).as_str(),
            "{header}"
        );
        assert_problem(response, 401, "invalid_authorization_header").await;
    }
    // An optional endpoint fails closed on an invalid token.
    let response = app
        .get("/v1/lingo/languages", Some(&token(&"a".repeat(256))))
        .await;
    assert_problem(response, 401, "invalid_token").await;
    // A needed scope missing: 403 naming it; a longer scope is not the scope.
    for scope in ["lingo:read", "lingo:analytics:read", "LINGO:ANALYTICS"] {
        let response = app
            .get(
                "/v1/lingo/analytics/phrase-progress",
                Some(&token_with_scope("analyst", scope)),
            )
            .await;
        assert_eq!(
            response.headers()["www-authenticate"],
            format!(r#"{realm}, error="insufficient_scope", scope="lingo:analytics""#).as_str(),
            "{scope}"
        );
        assert_problem(response, 403, "insufficient_scope").await;
    }
    let response = app
        .get(
            "/v1/lingo/analytics/phrase-progress",
            Some(&token_with_scope(
                "analyst",
                "openid lingo:analytics profile",
            )),
        )
        .await;
    assert_eq!(response.status(), 200);
}

/// "405 answers carry an `Allow` header and a `detail` that names the allowed methods", on the
/// routes of sections 3 and 3.1.
#[tokio::test]
async fn a_405_on_the_lingo_routes_names_their_methods() {
    let app = spawn_app().await;
    let learner = token("review-405");
    for (method, path, allowed) in [
        (reqwest::Method::DELETE, SESSIONS, vec!["GET", "POST"]),
        (
            reqwest::Method::POST,
            "/v1/lingo/me/study-sessions/0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
            vec!["GET"],
        ),
        (reqwest::Method::POST, "/v1/lingo/me/phrases", vec!["GET"]),
        (reqwest::Method::PUT, "/v1/lingo/me/reviews", vec!["GET"]),
        (
            reqwest::Method::PATCH,
            "/v1/lingo/analytics/phrase-progress",
            vec!["GET"],
        ),
        (reqwest::Method::POST, "/v1/lingo/phrases", vec!["GET"]),
    ] {
        let response = app
            .client
            .request(method.clone(), app.url(path))
            .bearer_auth(&learner)
            .send()
            .await
            .unwrap();
        let allow = response.headers()["allow"].to_str().unwrap().to_owned();
        let problem = assert_problem(response, 405, "method_not_allowed").await;
        let detail = problem["detail"].as_str().unwrap();
        for name in allowed {
            assert!(allow.contains(name), "{method} {path}: Allow {allow}");
            assert!(detail.contains(name), "{method} {path}: {detail}");
        }
    }
}

/// "Level from total XP with these cut-offs (level 1 at 0 XP, level 25 at 30000)", `leveled_up`,
/// and "at level 25 `next_level_xp` is null and `xp_to_next_level` 0", reached through the API:
/// exactly 60 XP is level 2; the largest sessions climb several levels at once, and past 30000
/// the level stays 25 and no longer rises.
#[tokio::test]
async fn levels_at_their_exact_cut_offs_and_the_top_through_the_api() {
    let app = spawn_app().await;
    let learner = token("review-levels");
    let post_counts = async |seen: i64, correct: i64| {
        created(
            &app,
            &learner,
            &crate::helpers::session("es", 60, seen, correct),
        )
        .await
    };
    let first = post_counts(51, 50).await;
    assert_eq!(
        (&first["total_xp"], &first["level"], &first["leveled_up"]),
        (&json!(60), &json!(2), &json!(true))
    );
    // 10 + 10000 + 5 = 10015 each: 10075 (16), 20090 (22), 30105 (25), 40120 (25).
    for (total, level, leveled_up) in [
        (10_075, 16, true),
        (20_090, 22, true),
        (30_105, 25, true),
        (40_120, 25, false),
    ] {
        let session = post_counts(10_000, 10_000).await;
        assert_eq!(session["xp_awarded"], 10_015);
        assert_eq!(session["total_xp"], total);
        assert_eq!(session["level"], level, "{session}");
        assert_eq!(session["leveled_up"], leveled_up, "{session}");
    }
    let xp: Value = app
        .get("/v1/lingo/me/xp", Some(&learner))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        xp,
        json!({"learner_id": "review-levels", "total_xp": 40_120, "level": 25,
               "level_floor_xp": 30_000, "next_level_xp": null, "xp_to_next_level": 0,
               "max_level": 25, "by_language": [{"language_code": "es", "xp": 40_120, "level": 25}]})
    );
}

/// "Identifiers are opaque strings ... rows the services create (study sessions) get UUIDv7".
#[tokio::test]
async fn session_ids_are_uuid_v7() {
    let app = spawn_app().await;
    let learner = token("review-uuid");
    let session = created(&app, &learner, &crate::helpers::session("es", 60, 1, 1)).await;
    let id: uuid::Uuid = session["id"].as_str().unwrap().parse().unwrap();
    assert_eq!(id.get_version_num(), 7, "{id}");
    assert_eq!(id.get_variant(), uuid::Variant::RFC4122);
    assert_eq!(
        session["id"],
        id.hyphenated().to_string(),
        "lower-case, hyphenated"
    );
}
