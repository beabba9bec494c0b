//! `GET /me/recommendations`.

use serde_json::Value;
use shared_auth::testing::token;

use crate::helpers::{
    assert_problem, assert_timestamp, cursor_page_keys, key_set, keys, phrase_item_keys, spawn_app,
};

#[tokio::test]
async fn the_demo_learner_gets_paged_recommendations_best_first() {
    let app = spawn_app().await;
    let learner = token("demo-learner");
    let body: Value = app
        .get("/v1/lingo/me/recommendations?limit=10", Some(&learner))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(keys(&body), cursor_page_keys());
    assert_eq!(
        (body["count"].as_i64(), body["next_offset"].as_i64()),
        (Some(10), Some(10))
    );
    for item in body["data"].as_array().unwrap() {
        assert_eq!(keys(item), key_set(&["phrase", "score", "generated_at"]));
        assert_eq!(keys(&item["phrase"]), phrase_item_keys());
        assert!(["es", "fr"].contains(&item["phrase"]["language_code"].as_str().unwrap()));
        assert_eq!(item["phrase"]["translation_count"], 5);
        assert!(item["score"].is_f64());
        assert_timestamp(&item["generated_at"]);
    }

    // All pages together: every stored recommendation once, by score descending.
    let mut scores = Vec::new();
    let mut offset = 0;
    loop {
        let page: Value = app
            .get(
                &format!("/v1/lingo/me/recommendations?limit=7&offset={offset}"),
                Some(&learner),
            )
            .await
            .json()
            .await
            .unwrap();
        scores.extend(
            page["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["score"].as_f64().unwrap()),
        );
        match page["next_offset"].as_i64() {
            Some(next) => offset = next,
            None => break,
        }
    }
    let mut admin = app.admin().await;
    let stored: Vec<f64> = sqlx::query_scalar(
        "SELECT score FROM lingo.phrase_recommendations WHERE learner_id = 'demo-learner' \
         ORDER BY score DESC",
    )
    .fetch_all(&mut admin)
    .await
    .unwrap();
    assert!(!stored.is_empty());
    assert_eq!(scores, stored);

    // Generic seeded learners have some too; an unknown learner has none.
    let body: Value = app
        .get("/v1/lingo/me/recommendations", Some(&token("learner-001")))
        .await
        .json()
        .await
        .unwrap();
    assert!(body["count"].as_i64().unwrap() > 0);
    let body: Value = app
        .get("/v1/lingo/me/recommendations", Some(&token("nobody")))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (body["count"].as_i64(), body["next_offset"].as_i64()),
        (Some(0), None)
    );

    assert_problem(
        app.get("/v1/lingo/me/recommendations", None).await,
        401,
        "missing_token",
    )
    .await;
    let response = app
        .get("/v1/lingo/me/recommendations?offset=x", Some(&learner))
        .await;
    assert_problem(response, 400, "invalid_query").await;
}
