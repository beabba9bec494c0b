//! `HEAD` on every `GET` endpoint through the gateway: the status and headers of the `GET`, and
//! no body (RFC 9110 9.3.2; docs/gateway.md: "`HEAD` is taken wherever `GET` is", "a `HEAD` is
//! answered from a stored `GET`").

use reqwest::{Method, StatusCode};
use serde_json::json;
use shared_auth::testing::{token, token_with_scope};

use crate::contract_review::{Answer, Sys, answer};

/// Headers a `HEAD` must share with its `GET`.
const SAME: [&str; 5] = ["content-type", "cache-control", "etag", "vary", "allow"];

/// Every documented `GET` path with real ids, and the bearer token it needs (if any).
pub async fn get_endpoints(sys: &Sys) -> Vec<(String, Option<String>)> {
    let document = sys.get_ok("/openapi.json", None).await;
    let article = sys.article_ids(1).await.remove(0);
    let comment = sys
        .post_json(
            "/v1/news/comments",
            "header",
            &json!({"article_id": article, "text": "hi"}),
        )
        .await
        .json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let session = sys.study("header", "es").await.json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut endpoints = Vec::new();
    for (path, operations) in document["paths"].as_object().unwrap() {
        let Some(get) = operations.get("get") else {
            continue;
        };
        let concrete = path
            .replace("{article_id}", &article)
            .replace("{comment_id}", &comment)
            .replace("{phrase_id}", "ph-es-001")
            .replace("{id}", &session);
        assert!(
            !concrete.contains('{'),
            "a parameter this test does not know: {path}"
        );
        let concrete = if concrete.ends_with("/search") {
            format!("{concrete}?q=housing")
        } else {
            concrete
        };
        let security = get["security"].as_array().cloned().unwrap_or_default();
        let anonymous = security.is_empty()
            || security
                .iter()
                .any(|s| s.as_object().is_some_and(|o| o.is_empty()));
        let scopes: Vec<String> = security
            .iter()
            .filter_map(|s| s.as_object())
            .flat_map(|o| o.values())
            .flat_map(|v| v.as_array().cloned().unwrap_or_default())
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect();
        let bearer = if anonymous {
            None
        } else if let Some(scope) = scopes.first() {
            Some(token_with_scope("header", scope))
        } else {
            Some(token("header"))
        };
        if anonymous {
            endpoints.push((concrete.clone(), Some(token("header"))));
        }
        endpoints.push((concrete, bearer));
    }
    assert!(endpoints.len() > 20, "{endpoints:?}");
    endpoints
}

async fn call(sys: &Sys, method: Method, path: &str, bearer: Option<&str>) -> Answer {
    let mut request = sys.req(method, path, None);
    if let Some(bearer) = bearer {
        request = request.bearer_auth(bearer);
    }
    answer(request).await
}

fn compare(head: &Answer, get: &Answer, context: &str) -> Vec<String> {
    let mut wrong = Vec::new();
    if head.status != get.status {
        wrong.push(format!(
            "{context}: HEAD {} GET {}",
            head.status, get.status
        ));
    }
    if !head.bytes.is_empty() {
        wrong.push(format!(
            "{context}: HEAD has a body of {} bytes",
            head.bytes.len()
        ));
    }
    for name in SAME {
        if head.header(name) != get.header(name) {
            wrong.push(format!(
                "{context}: {name} HEAD {:?} GET {:?}",
                head.header(name),
                get.header(name)
            ));
        }
    }
    if let Some(length) = head.header("content-length")
        && length != get.bytes.len().to_string()
        && head.status != StatusCode::NOT_MODIFIED
    {
        wrong.push(format!(
            "{context}: HEAD says content-length {length}, GET sent {} bytes",
            get.bytes.len()
        ));
    }
    if head.header("x-request-id").is_none() {
        wrong.push(format!("{context}: HEAD without x-request-id"));
    }
    wrong
}

#[tokio::test]
async fn head_on_every_get_endpoint_answers_like_get_without_a_body() {
    let sys = Sys::start().await;
    let mut wrong = Vec::new();
    for (path, bearer) in get_endpoints(&sys).await {
        let context = format!(
            "{path} {}",
            if bearer.is_some() {
                "token"
            } else {
                "anonymous"
            }
        );
        // HEAD first: a miss, forwarded; then GET; then HEAD again (from the cache when stored).
        let head_first = call(&sys, Method::HEAD, &path, bearer.as_deref()).await;
        let get = call(&sys, Method::GET, &path, bearer.as_deref()).await;
        assert!(
            get.status.is_success(),
            "{context}: {} {}",
            get.status,
            get.json()
        );
        let head_again = call(&sys, Method::HEAD, &path, bearer.as_deref()).await;
        wrong.extend(compare(&head_first, &get, &format!("{context} (first)")));
        wrong.extend(compare(&head_again, &get, &format!("{context} (again)")));
        if let Some(etag) = get.header("etag") {
            let mut request = sys
                .req(Method::HEAD, &path, None)
                .header("if-none-match", etag);
            if let Some(bearer) = &bearer {
                request = request.bearer_auth(bearer);
            }
            let conditional = answer(request).await;
            if conditional.status != StatusCode::NOT_MODIFIED || !conditional.bytes.is_empty() {
                wrong.push(format!(
                    "{context}: conditional HEAD {}",
                    conditional.status
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[tokio::test]
async fn head_of_a_problem_has_its_status_and_no_body() {
    let sys = Sys::start().await;
    let cases = [
        ("/v1/news/articles/art-none", None, 404),
        ("/v1/lingo/phrases/ph-none", None, 404),
        ("/v1/lingo/me/xp", None, 401),
        ("/v1/news/articles?limit=0", None, 400),
        ("/v1/news/nowhere", None, 404),
        ("/v1/lingo/analytics/progress", Some(token("header")), 403),
        ("/v1/news/articles", Some("not-a-token".to_owned()), 401),
    ];
    let mut wrong = Vec::new();
    for (path, bearer, status) in cases {
        let head = call(&sys, Method::HEAD, path, bearer.as_deref()).await;
        let get = call(&sys, Method::GET, path, bearer.as_deref()).await;
        assert_eq!(get.status.as_u16(), status, "{path}");
        wrong.extend(compare(&head, &get, path));
        if head.header("www-authenticate") != get.header("www-authenticate") {
            wrong.push(format!("{path}: WWW-Authenticate differs"));
        }
    }
    for path in ["/healthz", "/readyz", "/openapi.json", "/docs", "/metrics"] {
        let head = call(&sys, Method::HEAD, path, None).await;
        let get = call(&sys, Method::GET, path, None).await;
        assert_eq!(get.status, StatusCode::OK, "{path}");
        let mut differences = compare(&head, &get, path);
        // Metrics and readiness change between two reads; their length may too.
        if path == "/metrics" || path == "/readyz" {
            differences.retain(|d| !d.contains("content-length"));
        }
        wrong.extend(differences);
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
