//! `GET /me/progress` and `GET /me/xp`.

use serde_json::{Value, json};
use shared_auth::testing::token;

use crate::helpers::{assert_problem, assert_timestamp, key_set, keys, session, spawn_app};

fn counter_keys() -> Vec<&'static str> {
    vec![
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
    ]
}

#[tokio::test]
async fn a_learner_without_sessions_gets_zeros_not_404() {
    let app = spawn_app().await;
    let response = app
        .get("/v1/lingo/me/progress", Some(&token("newbie")))
        .await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body,
        json!({
            "learner_id": "newbie",
            "data": [],
            "count": 0,
            "totals": {
                "sessions": 0, "total_duration_seconds": 0, "phrases_seen": 0,
                "phrases_correct": 0, "accuracy": null, "xp": 0,
                "phrases_started": 0, "phrases_due": 0,
                "first_studied_at": null, "last_studied_at": null
            },
            "current_streak_days": 0,
            "longest_streak_days": 0
        })
    );

    let body: Value = app
        .get("/v1/lingo/me/xp", Some(&token("newbie")))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        body,
        json!({
            "learner_id": "newbie", "total_xp": 0, "level": 1, "level_floor_xp": 0,
            "next_level_xp": 60, "xp_to_next_level": 60, "max_level": 25, "by_language": []
        })
    );

    for path in ["/v1/lingo/me/progress", "/v1/lingo/me/xp"] {
        assert_problem(app.get(path, None).await, 401, "missing_token").await;
    }
}

#[tokio::test]
async fn progress_counts_per_language_and_streaks_over_utc_days() {
    let app = spawn_app().await;
    let learner = token("streaker");
    // (language, duration, seen, correct) -> xp 25, 10, 0, 20
    for (language, duration, seen, correct) in [
        ("es", 300, 10, 10),
        ("es", 200, 4, 0),
        ("fr", 100, 0, 0),
        ("fr", 50, 5, 5),
    ] {
        let response = app
            .post_session(&learner, &session(language, duration, seen, correct))
            .await;
        assert_eq!(response.status(), 201);
    }

    let body: Value = app
        .get("/v1/lingo/me/progress", Some(&learner))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        keys(&body),
        key_set(&[
            "learner_id",
            "data",
            "count",
            "totals",
            "current_streak_days",
            "longest_streak_days"
        ])
    );
    assert_eq!(body["learner_id"], "streaker");
    assert_eq!(body["count"], 2);
    let data = body["data"].as_array().unwrap();
    let mut language_keys = counter_keys();
    language_keys.push("language_code");
    for language in data {
        assert_eq!(keys(language), key_set(&language_keys));
        assert_timestamp(&language["first_studied_at"]);
        assert_timestamp(&language["last_studied_at"]);
    }
    let es = &data[0];
    assert_eq!(es["language_code"], "es");
    assert_eq!(
        (
            es["sessions"].as_i64(),
            es["total_duration_seconds"].as_i64()
        ),
        (Some(2), Some(500))
    );
    assert_eq!(
        (es["phrases_seen"].as_i64(), es["phrases_correct"].as_i64()),
        (Some(14), Some(10))
    );
    assert_eq!(es["accuracy"].as_f64(), Some(10.0 / 14.0));
    assert_eq!(es["xp"], 35);
    let fr = &data[1];
    assert_eq!(fr["language_code"], "fr");
    assert_eq!(
        (fr["sessions"].as_i64(), fr["xp"].as_i64()),
        (Some(2), Some(20))
    );
    assert_eq!(fr["accuracy"].as_f64(), Some(1.0));

    let totals = &body["totals"];
    assert_eq!(keys(totals), key_set(&counter_keys()));
    assert_eq!(totals["sessions"], 4);
    assert_eq!(totals["total_duration_seconds"], 650);
    assert_eq!(totals["phrases_seen"], 19);
    assert_eq!(totals["phrases_correct"], 15);
    assert_eq!(totals["accuracy"].as_f64(), Some(15.0 / 19.0));
    assert_eq!(totals["xp"], 55);
    assert_timestamp(&totals["first_studied_at"]);
    // All sessions are today: a one-day streak.
    assert_eq!(
        (
            body["current_streak_days"].as_i64(),
            body["longest_streak_days"].as_i64()
        ),
        (Some(1), Some(1))
    );

    // Move sessions onto earlier UTC days (streaks follow `studied_at`): yesterday, 2 days ago,
    // then a gap, 5 and 6 days ago.
    let mut admin = app.admin().await;
    sqlx::query(
        "WITH ordered AS (SELECT id, row_number() OVER (ORDER BY created_at) AS n \
                          FROM lingo.study_sessions WHERE learner_id = 'streaker') \
         UPDATE lingo.study_sessions s \
         SET studied_at = date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' \
                          + interval '12 hours' \
                          - (CASE o.n WHEN 1 THEN 6 WHEN 2 THEN 5 WHEN 3 THEN 2 ELSE 1 END) \
                            * interval '1 day' \
         FROM ordered o WHERE o.id = s.id",
    )
    .execute(&mut admin)
    .await
    .unwrap();
    let body: Value = app
        .get("/v1/lingo/me/progress", Some(&learner))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        body["current_streak_days"], 2,
        "yesterday and the day before"
    );
    assert_eq!(body["longest_streak_days"], 2);
}

#[tokio::test]
async fn xp_reports_level_floor_next_and_per_language() {
    let app = spawn_app().await;
    let learner = token("xp-learner");
    for (language, seen) in [("es", 10), ("es", 10), ("de", 6), ("fr", 0)] {
        let response = app
            .post_session(&learner, &session(language, 60, seen, seen))
            .await;
        assert_eq!(response.status(), 201);
    }
    let body: Value = app
        .get("/v1/lingo/me/xp", Some(&learner))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        body,
        json!({
            "learner_id": "xp-learner",
            "total_xp": 71,
            "level": 2,
            "level_floor_xp": 60,
            "next_level_xp": 120,
            "xp_to_next_level": 49,
            "max_level": 25,
            "by_language": [
                {"language_code": "de", "xp": 21, "level": 1},
                {"language_code": "es", "xp": 50, "level": 1},
                {"language_code": "fr", "xp": 0, "level": 1}
            ]
        })
    );

    // At the top level there is no next level.
    let mut admin = app.admin().await;
    sqlx::query(
        "UPDATE lingo.learner_language_totals SET xp = 30500 \
         WHERE learner_id = 'xp-learner' AND language_code = 'es'",
    )
    .execute(&mut admin)
    .await
    .unwrap();
    let body: Value = app
        .get("/v1/lingo/me/xp", Some(&learner))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["total_xp"], 30521);
    assert_eq!(body["level"], 25);
    assert_eq!(body["level_floor_xp"], 30000);
    assert_eq!(body["next_level_xp"], Value::Null);
    assert_eq!(body["xp_to_next_level"], 0);
    assert_eq!(body["by_language"][1]["level"], 25);
}
