//! RFC 9457 problem details: the one shape every 4xx and 5xx of the system is written in.

use std::borrow::Cow;

use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::http::codes::{ErrorCode, SharedCode, title};
use crate::http::context;

pub const PROBLEM_JSON: &str = "application/problem+json";

/// One bad field of a 422 answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// A refusal or failure, rendered as `application/problem+json`.
///
/// `code` is the stable machine code of the contract; `detail` is for humans. The request id of the
/// request being served is added when the response is rendered.
#[derive(Debug, Clone)]
pub struct Problem {
    pub status: StatusCode,
    pub code: Cow<'static, str>,
    pub detail: Option<String>,
    pub errors: Vec<FieldError>,
    /// Extra response headers (`WWW-Authenticate`, `Retry-After`, ...).
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

#[derive(Serialize)]
struct ProblemBody<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    title: &'a str,
    status: u16,
    code: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    errors: Option<&'a [FieldError]>,
}

impl Problem {
    /// Private: a problem's code comes from a declared [`ErrorCode`] ([`Problem::from_code`]) or
    /// from its status ([`Problem::from_status`]), never from a string written at the call site.
    fn new(status: StatusCode, code: impl Into<Cow<'static, str>>) -> Self {
        Self {
            status,
            code: code.into(),
            detail: None,
            errors: Vec::new(),
            headers: Vec::new(),
        }
    }

    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    pub fn with_header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.headers.push((name, value));
        self
    }

    /// The problem of a declared code, with its status and default detail; a code about one
    /// request field names it (see [`Problem::with_field`]).
    pub fn from_code(code: impl ErrorCode) -> Self {
        let problem = Self::new(code.status(), code.code());
        match code.field() {
            Some(field) => problem.with_field(field, code.detail()),
            None => problem.with_detail(code.detail()),
        }
    }

    /// Names one bad field: `detail` reads "`<field> <message>`" and `errors` holds the field.
    pub fn with_field(mut self, field: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        self.detail = Some(format!("{field} {message}"));
        self.errors = vec![FieldError::new(field, message)];
        self
    }

    /// Adds `Retry-After` (seconds), for a 503 or a 429.
    pub fn with_retry_after(self, seconds: u32) -> Self {
        self.with_header(header::RETRY_AFTER, HeaderValue::from(seconds))
    }

    /// 400 `invalid_query`: a query parameter is malformed or out of range.
    pub fn invalid_query(detail: impl Into<String>) -> Self {
        Self::from_code(SharedCode::InvalidQuery).with_detail(detail)
    }

    /// This problem naming every one of `errors`: one `errors` entry per bad field, and a
    /// `detail` that lists them all (as [`Problem::with_field`] does for one).
    pub fn with_fields(mut self, errors: Vec<FieldError>) -> Self {
        let detail = errors
            .iter()
            .map(|e| format!("{} {}", e.field, e.message))
            .collect::<Vec<_>>()
            .join("; ");
        self.detail = Some(detail);
        self.errors = errors;
        self
    }

    /// 422 `validation_failed` with one entry per bad field.
    pub fn validation(errors: Vec<FieldError>) -> Self {
        Self::from_code(SharedCode::ValidationFailed).with_fields(errors)
    }

    /// 500 that says nothing about its cause; log the cause before returning this.
    pub fn internal() -> Self {
        Self::from_code(SharedCode::InternalError)
    }

    /// The generic problem for a bare status produced outside our handlers (axum's rejections,
    /// tower layers): its code follows the status.
    pub fn from_status(status: StatusCode) -> Self {
        let code = SharedCode::for_status(status);
        // Only a 404 carries a detail: for the others the status says all a client can use.
        let mut problem = Self::new(status, code.code());
        if code == SharedCode::NotFound {
            problem.detail = Some(code.detail().into());
        }
        problem
    }

    /// The JSON body as bytes, with the current request id.
    pub fn body_bytes(&self) -> Vec<u8> {
        let body = ProblemBody {
            kind: "about:blank",
            title: title(self.status),
            status: self.status.as_u16(),
            code: &self.code,
            detail: self.detail.as_deref(),
            request_id: context::current(),
            errors: (!self.errors.is_empty()).then_some(self.errors.as_slice()),
        };
        serde_json::to_vec(&body).unwrap_or_default()
    }
}

impl<C: ErrorCode> From<C> for Problem {
    fn from(code: C) -> Self {
        Self::from_code(code)
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let body = self.body_bytes();
        let mut response = (self.status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        // A problem concerns one request (and a 404 is cacheable by default, RFC 9111 section
        // 4.2.2): no cache may keep it, or an article published a minute later would stay
        // missing behind a CDN.
        headers.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("private, no-store"),
        );
        for (name, value) in self.headers {
            response.headers_mut().insert(name, value);
        }
        response
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.status.as_u16(), self.code)?;
        if let Some(detail) = &self.detail {
            write!(f, ": {detail}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Problem {}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn renders_problem_json_with_field_errors() {
        let response =
            Problem::validation(vec![FieldError::new("text", "must not be empty")]).into_response();
        assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(response.headers()[header::CONTENT_TYPE], PROBLEM_JSON);
        assert_eq!(
            response.headers()[header::CACHE_CONTROL],
            "private, no-store"
        );
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(json["type"], "about:blank");
        assert_eq!(json["title"], "Unprocessable Content");
        assert_eq!(json["status"], 422);
        assert_eq!(json["code"], "validation_failed");
        assert_eq!(json["errors"][0]["field"], "text");
        assert!(json.get("request_id").is_none());
    }

    #[test]
    fn bare_statuses_get_contract_codes() {
        assert_eq!(
            Problem::from_status(StatusCode::NOT_FOUND).code,
            "not_found"
        );
        assert_eq!(
            Problem::from_status(StatusCode::PAYLOAD_TOO_LARGE).code,
            "payload_too_large"
        );
        assert_eq!(
            Problem::from_status(StatusCode::UNSUPPORTED_MEDIA_TYPE).code,
            "unsupported_media_type"
        );
    }
}
