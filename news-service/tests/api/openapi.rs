//! The OpenAPI document: served at `/v1/news/openapi.json`, OpenAPI 3.1, every news route of the
//! contract (docs/) with the auth it gives, problems for every error status.

use news_service::Application;
use news_service::config::ServeConfig;
use serde_json::{Value, json};
use shared_auth::testing::{auth_config, token};

/// (method, path, auth) of every news endpoint of the contract.
const ROUTES: &[(&str, &str, Auth)] = &[
    ("get", "/v1/news/articles", Auth::Optional),
    ("get", "/v1/news/search", Auth::Optional),
    ("get", "/v1/news/articles/{article_id}", Auth::Optional),
    (
        "get",
        "/v1/news/articles/{article_id}/comments",
        Auth::Optional,
    ),
    ("get", "/v1/news/organizations", Auth::Optional),
    ("get", "/v1/news/journalists", Auth::Optional),
    (
        "post",
        "/v1/news/articles/{article_id}/like",
        Auth::Required,
    ),
    (
        "delete",
        "/v1/news/articles/{article_id}/like",
        Auth::Required,
    ),
    (
        "post",
        "/v1/news/articles/{article_id}/bookmark",
        Auth::Required,
    ),
    (
        "delete",
        "/v1/news/articles/{article_id}/bookmark",
        Auth::Required,
    ),
    (
        "post",
        "/v1/news/journalists/{journalist_id}/follow",
        Auth::Required,
    ),
    (
        "delete",
        "/v1/news/journalists/{journalist_id}/follow",
        Auth::Required,
    ),
    (
        "post",
        "/v1/news/organizations/{organization_id}/follow",
        Auth::Required,
    ),
    (
        "delete",
        "/v1/news/organizations/{organization_id}/follow",
        Auth::Required,
    ),
    ("post", "/v1/news/comments", Auth::Required),
    ("get", "/v1/news/comments/{comment_id}", Auth::Optional),
    ("get", "/v1/news/me/bookmarks", Auth::Required),
    ("get", "/v1/news/me/following", Auth::Required),
    ("get", "/v1/news/me/feed", Auth::Required),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Auth {
    Optional,
    Required,
}

/// The service on port 0 with a database that is never reached: the document needs none.
async fn spawn_without_database() -> String {
    let config = ServeConfig::new("postgres://news_app@127.0.0.1:1/news", auth_config());
    let app = Application::build(config).await.unwrap();
    let address = format!("http://127.0.0.1:{}", app.port());
    tokio::spawn(app.run_until_stopped());
    address
}

async fn served_document() -> Value {
    let address = spawn_without_database().await;
    let response = reqwest::get(format!("{address}/v1/news/openapi.json"))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers().contains_key("x-request-id"));
    assert!(response.headers().contains_key("etag"));
    assert_eq!(response.headers()["content-type"], "application/json");
    response.json().await.unwrap()
}

fn operations(document: &Value) -> Vec<(String, String, &Value)> {
    let mut found = Vec::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            found.push((method.clone(), path.clone(), operation));
        }
    }
    found
}

#[tokio::test]
async fn the_document_is_openapi_3_1_and_lists_every_route_with_its_auth() {
    let document = served_document().await;
    assert!(
        document["openapi"].as_str().unwrap().starts_with("3.1."),
        "{}",
        document["openapi"]
    );
    assert_eq!(document["info"]["title"], "news-service");
    assert_eq!(
        document["components"]["securitySchemes"]["bearer"],
        json!({"type": "http", "scheme": "bearer", "bearerFormat": "JWT"})
    );
    for (method, path, auth) in ROUTES {
        let operation = &document["paths"][path][method];
        assert!(operation.is_object(), "{method} {path} is not documented");
        let security = &operation["security"];
        let expected = match auth {
            Auth::Required => json!([{"bearer": []}]),
            Auth::Optional => json!([{}, {"bearer": []}]),
        };
        assert_eq!(security, &expected, "{method} {path}");
        let responses = &operation["responses"];
        assert!(responses["401"].is_object(), "{method} {path} lacks 401");
        assert!(
            responses["401"]["headers"]["WWW-Authenticate"].is_object(),
            "{method} {path}"
        );
    }
    // Nothing documented that the contract does not list, except this document itself.
    let documented = operations(&document);
    assert_eq!(documented.len(), ROUTES.len() + 1);
    assert!(document["paths"]["/v1/news/openapi.json"]["get"].is_object());
}

#[tokio::test]
async fn operation_ids_are_unique_prefixed_and_errors_are_problems() {
    let document = served_document().await;
    let mut ids = Vec::new();
    for (method, path, operation) in operations(&document) {
        let id = operation["operationId"].as_str().unwrap().to_owned();
        assert!(id.starts_with("news_"), "{id}");
        ids.push(id);
        assert!(
            operation["tags"][0].is_string(),
            "{method} {path} has no tag"
        );
        for (status, response) in operation["responses"].as_object().unwrap() {
            assert!(
                response["headers"]["x-request-id"].is_object(),
                "{method} {path} {status}"
            );
            if status.starts_with('4') || status.starts_with('5') {
                assert_eq!(
                    response["content"]["application/problem+json"]["schema"]["$ref"],
                    "#/components/schemas/Problem",
                    "{method} {path} {status}"
                );
            }
        }
    }
    let count = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), count, "operation ids repeat");

    // Specific promises of the contract, written into the document.
    let create = &document["paths"]["/v1/news/comments"]["post"];
    assert!(create["responses"]["201"]["headers"]["Location"].is_object());
    assert_eq!(create["parameters"][0]["name"], "Idempotency-Key");
    let input = &document["components"]["schemas"]["CommentInput"];
    assert_eq!(input["additionalProperties"], false);
    let list = &document["paths"]["/v1/news/articles"]["get"];
    assert!(list["responses"]["304"].is_object());
    assert!(list["responses"]["200"]["headers"]["ETag"].is_object());
    assert!(list["responses"]["503"]["headers"]["Retry-After"].is_object());
    let limit = list["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "limit")
        .unwrap();
    assert_eq!(
        (
            &limit["schema"]["minimum"],
            &limit["schema"]["maximum"],
            &limit["schema"]["default"]
        ),
        (&json!(1), &json!(100), &json!(20))
    );
}

#[tokio::test]
async fn the_served_document_is_openapi_fn_and_is_deterministic() {
    let document = served_document().await;
    let built = serde_json::to_value(news_service::openapi()).unwrap();
    assert_eq!(document, built);
    assert_eq!(
        serde_json::to_string(&news_service::openapi()).unwrap(),
        serde_json::to_string(&news_service::openapi()).unwrap()
    );
}

#[tokio::test]
async fn the_document_needs_no_token_but_refuses_an_invalid_one() {
    let address = spawn_without_database().await;
    let client = reqwest::Client::new();
    let url = format!("{address}/v1/news/openapi.json");
    let response = client
        .get(&url)
        .bearer_auth("not-a-jwt")
        .send()
        .await
        .unwrap();
    crate::helpers::assert_problem(response, 401, "invalid_token").await;
    let response = client
        .get(&url)
        .bearer_auth(token("u1"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["cache-control"], "private, no-store");
    // An anonymous repeat with the ETag is a 304.
    let first = client.get(&url).send().await.unwrap();
    let etag = first.headers()["etag"].clone();
    let again = client
        .get(&url)
        .header("if-none-match", etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);
}
