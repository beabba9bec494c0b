//! `GET /languages`, `GET /phrases`, `GET /phrases/{id}`.

use serde_json::Value;
use shared_auth::testing::token;

use crate::helpers::{
    assert_content_type, assert_problem, cursor_page_keys, key_set, keys, phrase_item_keys,
    spawn_app,
};

#[tokio::test]
async fn languages_are_listed_by_code_unpaged() {
    let app = spawn_app().await;
    let response = app.get("/v1/lingo/languages", None).await;
    assert_eq!(response.status(), 200);
    assert_content_type(response.headers(), "application/json");
    let body: Value = response.json().await.unwrap();
    assert_eq!(keys(&body), key_set(&["data", "count"]));
    let data = body["data"].as_array().unwrap();
    assert_eq!(body["count"], data.len());
    assert!(data.len() >= 5);
    for language in data {
        assert_eq!(keys(language), key_set(&["code", "name"]));
        assert!(language["name"].as_str().is_some_and(|n| !n.is_empty()));
    }
    let codes: Vec<&str> = data.iter().map(|l| l["code"].as_str().unwrap()).collect();
    let mut sorted = codes.clone();
    sorted.sort();
    assert_eq!(codes, sorted);
    assert_eq!(codes, ["de", "en", "es", "fr", "it", "pt"]);
    assert_eq!(data[2]["name"], "Spanish");

    // A valid token changes nothing; an invalid one is refused even on an optional endpoint.
    let with_token = app.get("/v1/lingo/languages", Some(&token("reader"))).await;
    assert_eq!(with_token.json::<Value>().await.unwrap(), body);
    let response = app.get("/v1/lingo/languages", Some("not-a-jwt")).await;
    assert!(
        response.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("invalid_token")
    );
    assert_problem(response, 401, "invalid_token").await;
}

#[tokio::test]
async fn phrases_page_with_stats_and_filters() {
    let app = spawn_app().await;
    let body: Value = app
        .get("/v1/lingo/phrases", None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(keys(&body), cursor_page_keys());
    assert_eq!(body["count"], 20);
    assert_eq!(body["limit"], 20);
    assert_eq!(body["offset"], 0);
    assert_eq!(body["next_offset"], 20);
    let data = body["data"].as_array().unwrap();
    let ids: Vec<&str> = data.iter().map(|p| p["id"].as_str().unwrap()).collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(ids, sorted, "ordered by id");
    for phrase in data {
        assert_eq!(keys(phrase), phrase_item_keys());
        assert_eq!(phrase["translation_count"], 5);
    }

    // stats mirror the stats cache, or are null where the pipeline has none.
    let mut admin = app.admin().await;
    let cached: Vec<(String, i64, i64, Option<f64>)> = sqlx::query_as(
        "SELECT phrase_id, view_count, learner_count, accuracy FROM lingo.phrase_stats_cache",
    )
    .fetch_all(&mut admin)
    .await
    .unwrap();
    let all = all_phrases(&app, "").await;
    assert_eq!(all.len(), 288);
    let mut with_stats = 0;
    for phrase in &all {
        let id = phrase["id"].as_str().unwrap();
        match cached.iter().find(|row| row.0 == id) {
            Some((_, views, learners, accuracy)) => {
                with_stats += 1;
                let stats = &phrase["stats"];
                assert_eq!(
                    keys(stats),
                    key_set(&["view_count", "learner_count", "accuracy"])
                );
                assert_eq!(stats["view_count"], *views);
                assert_eq!(stats["learner_count"], *learners);
                assert_eq!(stats["accuracy"].as_f64(), *accuracy);
            }
            None => assert!(phrase["stats"].is_null(), "{phrase}"),
        }
    }
    assert!(
        with_stats > 0 && with_stats < all.len(),
        "both cases present"
    );

    // The language filter uses the phrase's own language; an unknown one is an empty page.
    let spanish = all_phrases(&app, "&language=es").await;
    assert_eq!(spanish.len(), 48);
    assert!(spanish.iter().all(|p| p["language_code"] == "es"));
    let body: Value = app
        .get("/v1/lingo/phrases?language=xx", None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["data"], Value::Array(vec![]));
    assert_eq!(body["count"], 0);
    assert_eq!(body["next_offset"], Value::Null);

    for query in [
        "limit=0",
        "limit=101",
        "limit=abc",
        "offset=-1",
        "offset=10001",
        "limit=1.5",
    ] {
        let response = app.get(&format!("/v1/lingo/phrases?{query}"), None).await;
        assert_problem(response, 400, "invalid_query").await;
    }
}

/// Every phrase, paging with `next_offset` at the maximum page size.
async fn all_phrases(app: &crate::helpers::TestApp, filter: &str) -> Vec<Value> {
    let mut all = Vec::new();
    let mut offset = 0;
    loop {
        let body: Value = app
            .get(
                &format!("/v1/lingo/phrases?limit=100&offset={offset}{filter}"),
                None,
            )
            .await
            .json()
            .await
            .unwrap();
        all.extend(body["data"].as_array().unwrap().iter().cloned());
        match body["next_offset"].as_i64() {
            Some(next) => offset = next,
            None => return all,
        }
    }
}

#[tokio::test]
async fn one_phrase_with_its_translations() {
    let app = spawn_app().await;
    let response = app.get("/v1/lingo/phrases/ph-es-009", None).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        keys(&body),
        key_set(&["id", "text", "language_code", "translation"])
    );
    assert_eq!(body["id"], "ph-es-009");
    assert_eq!(body["text"], "Gracias");
    assert_eq!(body["language_code"], "es");
    let translation = body["translation"].as_array().unwrap();
    let codes: Vec<&str> = translation
        .iter()
        .map(|t| t["language_code"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes,
        ["de", "en", "fr", "it", "pt"],
        "ordered by language_code"
    );
    for entry in translation {
        assert_eq!(keys(entry), key_set(&["language_code", "text"]));
    }
    assert_eq!(translation[1]["text"], "Thank you");
    assert_eq!(translation[0]["text"], "Danke");

    let response = app.get("/v1/lingo/phrases/ph-xx-999", None).await;
    assert_problem(response, 404, "phrase_not_found").await;
}

/// The catalogue is cacheable for anonymous readers (strong `ETag`, 304 on a match) and private
/// for a signed-in one; every `/me/*` answer, errors included, is private.
#[tokio::test]
async fn catalogue_reads_are_cacheable_and_personal_reads_are_not() {
    let app = spawn_app().await;
    let reader = token("reader");
    for path in [
        "/v1/lingo/languages",
        "/v1/lingo/phrases?language=es&limit=2",
        "/v1/lingo/phrases/ph-es-001",
    ] {
        let response = app.get(path, None).await;
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(response.headers()["cache-control"], "public, max-age=30");
        let etag = response.headers()["etag"].to_str().unwrap().to_owned();
        assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");

        let revalidated = app
            .client
            .get(app.url(path))
            .header("if-none-match", &etag)
            .send()
            .await
            .unwrap();
        assert_eq!(revalidated.status(), 304, "{path}");
        assert_eq!(revalidated.headers()["etag"], etag.as_str());
        assert!(revalidated.bytes().await.unwrap().is_empty());
        let stale = app
            .client
            .get(app.url(path))
            .header("if-none-match", "\"other\"")
            .send()
            .await
            .unwrap();
        assert_eq!(stale.status(), 200, "{path}");

        let signed_in = app.get(path, Some(&reader)).await;
        assert_eq!(signed_in.status(), 200, "{path}");
        assert_eq!(signed_in.headers()["cache-control"], "private, no-store");
        assert!(signed_in.headers().get("etag").is_none());
    }
    for path in [
        "/v1/lingo/me/xp",
        "/v1/lingo/me/progress",
        "/v1/lingo/me/study-sessions",
        "/v1/lingo/me/recommendations",
        "/v1/lingo/me/study-sessions/0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
        "/v1/lingo/me/no-such-thing",
    ] {
        let response = app.get(path, Some(&reader)).await;
        assert_eq!(
            response.headers()["cache-control"],
            "private, no-store",
            "{path} ({})",
            response.status()
        );
    }
}
