//! `/healthz` and `/readyz`, problems for unknown routes and bad requests, and auth failures.

use news_service::Application;
use news_service::config::ServeConfig;
use serde_json::json;
use shared_auth::testing::auth_config;

use crate::helpers::{assert_problem, spawn_app};

#[tokio::test]
async fn healthz_and_readyz_answer_when_the_database_is_up() {
    let app = spawn_app().await;
    let response = app
        .client
        .get(format!("{}/healthz", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers().contains_key("x-request-id"));
    assert_eq!(
        response.json::<serde_json::Value>().await.unwrap(),
        json!({"status": "ok"})
    );
    let response = app
        .client
        .get(format!("{}/readyz", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn readyz_is_503_problem_when_the_database_is_unreachable() {
    // Nothing listens on port 1: the process is up, the database is not.
    let config = ServeConfig::new("postgres://news_app@127.0.0.1:1/news", auth_config());
    let app = Application::build(config).await.unwrap();
    let address = format!("http://127.0.0.1:{}", app.port());
    tokio::spawn(app.run_until_stopped());
    let client = reqwest::Client::new();
    let response = client
        .get(format!("{address}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let response = client
        .get(format!("{address}/readyz"))
        .send()
        .await
        .unwrap();
    assert!(response.headers().contains_key("retry-after"));
    assert_problem(response, 503, "database_unavailable").await;
    // A read that needs the database is a 503 problem too, not a hang or a 500.
    let response = client
        .get(format!("{address}/v1/news/articles"))
        .send()
        .await
        .unwrap();
    assert_problem(response, 503, "database_unavailable").await;
}

#[tokio::test]
async fn unknown_routes_wrong_methods_and_bad_bodies_are_problems() {
    let app = spawn_app().await;
    assert_problem(app.get("/nope", None).await, 404, "not_found").await;
    let response = app.client.put(app.url("/articles")).send().await.unwrap();
    assert_problem(response, 405, "method_not_allowed").await;
    let token = shared_auth::testing::token("u1");
    let response = app
        .client
        .post(app.url("/comments"))
        .bearer_auth(&token)
        .header("content-type", "text/plain")
        .body("hi")
        .send()
        .await
        .unwrap();
    assert_problem(response, 415, "unsupported_media_type").await;
    let response = app
        .client
        .post(app.url("/comments"))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body(format!("{{\"text\":\"{}\"}}", "a".repeat(129 * 1024)))
        .send()
        .await
        .unwrap();
    assert_problem(response, 413, "payload_too_large").await;
    let response = app
        .client
        .post(app.url("/comments"))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body("{")
        .send()
        .await
        .unwrap();
    assert_problem(response, 400, "malformed_json").await;
}

#[tokio::test]
async fn auth_failures_follow_the_contract() {
    let app = spawn_app().await;
    let response = app
        .client
        .post(app.url("/articles/art-1/like"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.headers()["www-authenticate"],
        "Bearer realm=\"lingo-news\""
    );
    assert_problem(response, 401, "missing_token").await;
    // An invalid token on an optional endpoint is 401, never silently anonymous.
    let response = app
        .client
        .get(app.url("/articles"))
        .bearer_auth("not-a-jwt")
        .send()
        .await
        .unwrap();
    assert_problem(response, 401, "invalid_token").await;
    let response = app
        .client
        .get(app.url("/articles"))
        .header("authorization", "Basic abc")
        .send()
        .await
        .unwrap();
    assert_problem(response, 401, "invalid_authorization_header").await;
}
