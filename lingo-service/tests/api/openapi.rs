//! `GET /v1/lingo/openapi.json`: the OpenAPI 3.1 document matches the contract (docs/): routes,
//! auth per route, and the inputs contract fuzzing found to break the service stay fixed.

use std::collections::BTreeSet;

use serde_json::{Value, json};
use shared_auth::testing::token;

use crate::helpers::{assert_content_type, assert_problem, session, spawn_app};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Auth {
    Optional,
    Required,
    Scope(&'static str),
}

/// Every lingo route of the contract with its auth column.
const ROUTES: &[(&str, &str, Auth)] = &[
    ("get", "/v1/lingo/languages", Auth::Optional),
    ("get", "/v1/lingo/phrases", Auth::Optional),
    ("get", "/v1/lingo/phrases/{phrase_id}", Auth::Optional),
    ("get", "/v1/lingo/me/progress", Auth::Required),
    ("get", "/v1/lingo/me/xp", Auth::Required),
    ("post", "/v1/lingo/me/study-sessions", Auth::Required),
    ("get", "/v1/lingo/me/study-sessions", Auth::Required),
    ("get", "/v1/lingo/me/study-sessions/{id}", Auth::Required),
    ("get", "/v1/lingo/me/recommendations", Auth::Required),
    ("get", "/v1/lingo/me/phrases", Auth::Required),
    ("get", "/v1/lingo/me/reviews", Auth::Required),
    ("get", "/v1/lingo/openapi.json", Auth::Optional),
    (
        "get",
        "/v1/lingo/analytics/progress",
        Auth::Scope("lingo:analytics"),
    ),
    (
        "get",
        "/v1/lingo/analytics/phrase-progress",
        Auth::Scope("lingo:analytics"),
    ),
];

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

async fn document() -> Value {
    let app = spawn_app().await;
    // Public: no token needed.
    let response = app.get("/v1/lingo/openapi.json", None).await;
    assert_eq!(response.status(), 200);
    assert_content_type(response.headers(), "application/json");
    assert!(response.headers().contains_key("x-request-id"));
    response.json().await.unwrap()
}

#[tokio::test]
async fn the_document_is_openapi_3_1_and_lists_every_route_with_its_auth() {
    let document = document().await;
    let version = document["openapi"].as_str().unwrap();
    assert!(version.starts_with("3.1."), "openapi {version}");
    assert_eq!(document["info"]["title"], "lingo-service");
    assert!(document["info"]["version"].is_string());
    assert_eq!(
        document["components"]["securitySchemes"]["bearer"],
        json!({"type": "http", "scheme": "bearer", "bearerFormat": "JWT"})
    );

    let mut documented = BTreeSet::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        for method in METHODS {
            if item.get(method).is_some() {
                documented.insert((method.to_owned(), path.clone()));
            }
        }
    }
    let expected: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|(method, path, _)| ((*method).to_owned(), (*path).to_owned()))
        .collect();
    assert_eq!(documented, expected);

    for (method, path, auth) in ROUTES {
        let operation = &document["paths"][path][method];
        let security = operation["security"].as_array().unwrap();
        let expected = match auth {
            Auth::Optional => json!([{}, {"bearer": []}]),
            Auth::Required => json!([{"bearer": []}]),
            Auth::Scope(scope) => json!([{"bearer": [scope]}]),
        };
        assert_eq!(Value::from(security.clone()), expected, "{method} {path}");
        if let Auth::Scope(_) = auth {
            assert!(operation["responses"]["403"].is_object(), "{method} {path}");
        }
    }
}

#[tokio::test]
async fn every_operation_is_named_and_documents_its_problems() {
    let document = document().await;
    let mut ids = BTreeSet::new();
    for (method, path, _) in ROUTES {
        let operation = &document["paths"][path][method];
        let id = operation["operationId"].as_str().unwrap();
        assert!(id.starts_with("lingo_"), "{id}");
        assert!(ids.insert(id.to_owned()), "duplicate operationId {id}");
        assert!(operation["tags"].as_array().is_some_and(|t| !t.is_empty()));

        let responses = operation["responses"].as_object().unwrap();
        for status in ["401", "500", "503"] {
            assert!(responses.contains_key(status), "{method} {path} {status}");
        }
        assert!(
            responses["503"]["headers"]["Retry-After"].is_object(),
            "{method} {path}"
        );
        for (status, response) in responses {
            assert!(
                response["headers"]["x-request-id"].is_object(),
                "{method} {path} {status}"
            );
            if status == "304" {
                // Not modified: no body, by definition.
                assert!(response.get("content").is_none(), "{method} {path}");
                continue;
            }
            let content = response["content"].as_object().unwrap();
            let media_type = if status.starts_with('2') {
                "application/json"
            } else {
                "application/problem+json"
            };
            assert!(content.contains_key(media_type), "{method} {path} {status}");
        }
    }

    let create = &document["paths"]["/v1/lingo/me/study-sessions"]["post"];
    assert!(create["responses"]["201"]["headers"]["Location"].is_object());
    assert!(create["responses"]["201"]["headers"]["Idempotency-Replayed"].is_object());
    let key = create["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "Idempotency-Key")
        .expect("Idempotency-Key parameter");
    assert_eq!(key["in"], "header");
    assert_eq!(key["required"], false);
    for status in ["400", "409", "413", "415", "422"] {
        assert!(create["responses"][status].is_object(), "POST {status}");
    }
    let input = &document["components"]["schemas"]["StudySessionInput"];
    assert_eq!(input["additionalProperties"], false);
    assert_eq!(input["properties"]["duration_seconds"]["maximum"], 86_400);
}

#[tokio::test]
async fn the_served_document_is_the_one_the_crate_exports() {
    let served = document().await;
    let exported = serde_json::to_value(lingo_service::openapi()).unwrap();
    assert_eq!(served, exported);
    // Deterministic: the gateway compares the merged documents with a committed file.
    assert_eq!(
        lingo_service::openapi().to_json().unwrap(),
        lingo_service::openapi().to_json().unwrap()
    );
}

#[tokio::test]
async fn an_invalid_token_is_refused_on_the_document_too() {
    let app = spawn_app().await;
    let response = app.get("/v1/lingo/openapi.json", Some("not-a-jwt")).await;
    assert_problem(response, 401, "invalid_token").await;
    let response = app
        .get("/v1/lingo/openapi.json", Some(&token("reader")))
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["cache-control"], "private, no-store");
}

/// Read like the catalogue: cacheable when anonymous, with a strong `ETag` and 304.
#[tokio::test]
async fn the_document_is_cached_like_a_catalogue_read() {
    let app = spawn_app().await;
    let response = app.get("/v1/lingo/openapi.json", None).await;
    assert_eq!(response.headers()["cache-control"], "public, max-age=30");
    let etag = response.headers()["etag"].to_str().unwrap().to_owned();
    let again = app
        .client
        .get(app.url("/v1/lingo/openapi.json"))
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);
}

/// Postgres text cannot hold NUL: such values name nothing, they are not server errors.
#[tokio::test]
async fn nul_and_non_utf8_values_are_not_found_not_500() {
    let app = spawn_app().await;
    let reader = token("fuzz-learner");
    for path in [
        "/v1/lingo/phrases/%00",
        "/v1/lingo/phrases/a%00b",
        "/v1/lingo/phrases/%FF",
    ] {
        let response = app.get(path, None).await;
        assert_problem(response, 404, "phrase_not_found").await;
    }
    let response = app
        .get("/v1/lingo/me/study-sessions/%FF", Some(&reader))
        .await;
    assert_problem(response, 404, "study_session_not_found").await;

    let response = app.get("/v1/lingo/phrases?language=%00", None).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["count"], 0);
    assert_eq!(body["next_offset"], Value::Null);

    let response = app
        .post_session(&reader, &session("e\u{0}s", 60, 1, 1))
        .await;
    assert_problem(response, 422, "unknown_language").await;
    assert_eq!(app.count("study_sessions").await, 0);
}
