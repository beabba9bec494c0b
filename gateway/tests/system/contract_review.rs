//! An outside review of the system through the gateway: what a client sees where the gateway and
//! the services meet (the contract: docs/, every page). This module holds what the `contract_review_*`
//! tests share: the running stack and a whole answer (status, headers, raw body) per call.

use reqwest::header::HeaderMap;
use reqwest::{Client, Method, RequestBuilder, StatusCode};
use serde_json::Value;
use shared_auth::testing::token;

use crate::stack;

/// The system (seeded: 300 articles, the lingo catalogue and analytics) and a client.
pub struct Sys {
    pub stack: stack::Stack,
    pub client: Client,
}

/// A whole answer, read once.
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub bytes: Vec<u8>,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.bytes).unwrap_or(Value::Null)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }

    /// Asserts an RFC 9457 problem with `status` and `code`, whose `request_id` is the
    /// `x-request-id` of the answer; returns that id.
    pub fn assert_problem(&self, status: u16, code: &str, context: &str) -> String {
        let body = self.json();
        assert_eq!(
            (self.status.as_u16(), body["code"].as_str()),
            (status, Some(code)),
            "{context}: {body}"
        );
        assert_eq!(
            self.header("content-type"),
            Some("application/problem+json"),
            "{context}"
        );
        assert_eq!(body["status"], status, "{context}: {body}");
        assert_eq!(body["type"], "about:blank", "{context}");
        assert_eq!(
            body["title"].as_str(),
            Some(rfc9110_title(status)),
            "{context}: the title is the status's name in RFC 9110"
        );
        let id = self
            .header("x-request-id")
            .unwrap_or_else(|| panic!("{context}: no x-request-id"))
            .to_owned();
        assert_eq!(
            body["request_id"].as_str(),
            Some(id.as_str()),
            "{context}: the problem names another request id than its header"
        );
        id
    }
}

/// The name RFC 9110 gives each status a problem can have (docs/conventions.md: "`title`: the
/// name of `status` as RFC 9110 gives it (`Unprocessable Content` for 422, `Content Too Large`
/// for 413)").
pub fn rfc9110_title(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Content",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "",
    }
}

pub async fn answer(request: RequestBuilder) -> Answer {
    let response = request.send().await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.bytes().await.unwrap().to_vec();
    Answer {
        status,
        headers,
        bytes,
    }
}

impl Sys {
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    pub async fn start_with(tweak: impl FnOnce(&mut gateway::config::GatewayConfig)) -> Self {
        let stack = stack::start_with(Some(300), tweak).await;
        Self {
            stack,
            client: Client::new(),
        }
    }

    /// A request to the gateway, with the token of `who` when given.
    pub fn req(&self, method: Method, path: &str, who: Option<&str>) -> RequestBuilder {
        let request = self
            .client
            .request(method, format!("{}{path}", self.stack.gateway_url));
        match who {
            Some(sub) => request.bearer_auth(token(sub)),
            None => request,
        }
    }

    /// A request straight to the service that owns `path`.
    pub fn direct(&self, method: Method, path: &str) -> RequestBuilder {
        let base = if path.starts_with("/v1/lingo") {
            &self.stack.lingo_url
        } else {
            &self.stack.news_url
        };
        self.client.request(method, format!("{base}{path}"))
    }

    pub async fn get(&self, path: &str, who: Option<&str>) -> Answer {
        answer(self.req(Method::GET, path, who)).await
    }

    /// `GET` that must be 200; returns its JSON.
    pub async fn get_ok(&self, path: &str, who: Option<&str>) -> Value {
        let answer = self.get(path, who).await;
        assert_eq!(
            answer.status,
            StatusCode::OK,
            "GET {path}: {}",
            answer.json()
        );
        answer.json()
    }

    pub async fn post_json(&self, path: &str, who: &str, body: &Value) -> Answer {
        answer(self.req(Method::POST, path, Some(who)).json(body)).await
    }

    /// The first `n` article ids of the front page.
    pub async fn article_ids(&self, n: usize) -> Vec<String> {
        let page = self
            .get_ok(&format!("/v1/news/articles?limit={n}"), None)
            .await;
        ids(&page)
    }

    /// Records a plain study session for `who`; returns its answer.
    pub async fn study(&self, who: &str, language: &str) -> Answer {
        let body = serde_json::json!({"duration_seconds": 60, "phrases_seen": 3,
            "phrases_correct": 2, "language_code": language});
        self.post_json("/v1/lingo/me/study-sessions", who, &body)
            .await
    }
}

/// The `id`s of a page's `data`.
pub fn ids(page: &Value) -> Vec<String> {
    page["data"]
        .as_array()
        .unwrap_or_else(|| panic!("no data: {page}"))
        .iter()
        .map(item_id)
        .collect()
}

/// An item's identity: `id`, or the phrase of a recommendation / phrase progress, or the
/// analytics row's key.
pub fn item_id(item: &Value) -> String {
    if let Some(id) = item["id"].as_str() {
        return id.to_owned();
    }
    if let Some(id) = item["phrase"]["id"].as_str() {
        return id.to_owned();
    }
    format!(
        "{}/{}/{}",
        item["learner_id"].as_str().unwrap_or_default(),
        item["language_code"].as_str().unwrap_or_default(),
        item["phrase_id"].as_str().unwrap_or_default()
    )
}

/// A path with a query: appends `key=value` with `?` or `&`.
pub fn with_param(path: &str, key: &str, value: &str) -> String {
    let sep = if path.contains('?') { '&' } else { '?' };
    format!("{path}{sep}{key}={}", urlencode(value))
}

pub fn urlencode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
