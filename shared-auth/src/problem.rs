//! RFC 9457 problem details: the one shape every 4xx and 5xx of the system is written in.

use std::borrow::Cow;

use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::request_id;

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
    pub fn new(status: StatusCode, code: impl Into<Cow<'static, str>>) -> Self {
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

    /// 400 `invalid_query`: a query parameter is malformed or out of range.
    pub fn invalid_query(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_query").with_detail(detail)
    }

    /// 404 with a resource-specific code such as `phrase_not_found`.
    pub fn not_found(code: impl Into<Cow<'static, str>>) -> Self {
        Self::new(StatusCode::NOT_FOUND, code)
    }

    /// 422 `validation_failed` with one entry per bad field.
    pub fn validation(errors: Vec<FieldError>) -> Self {
        let detail = errors
            .iter()
            .map(|e| format!("{} {}", e.field, e.message))
            .collect::<Vec<_>>()
            .join("; ");
        let mut problem =
            Self::new(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").with_detail(detail);
        problem.errors = errors;
        problem
    }

    /// 422 with a specific code for one field, e.g. `unknown_language`.
    pub fn unprocessable(
        code: impl Into<Cow<'static, str>>,
        field: &str,
        message: impl Into<String>,
    ) -> Self {
        let message = message.into();
        let mut problem = Self::new(StatusCode::UNPROCESSABLE_ENTITY, code)
            .with_detail(format!("{field} {message}"));
        problem.errors = vec![FieldError::new(field, message)];
        problem
    }

    /// 500 that says nothing about its cause; log the cause before returning this.
    pub fn internal() -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal_error")
            .with_detail("the server failed to handle this request")
    }

    /// 503 for a dependency that is down (the database, an upstream), with `Retry-After`.
    pub fn unavailable(code: impl Into<Cow<'static, str>>, retry_after_secs: u32) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, code)
            .with_header(header::RETRY_AFTER, HeaderValue::from(retry_after_secs))
    }

    /// The generic problem for a bare status produced outside our handlers (axum's rejections,
    /// tower layers): its code follows the status.
    pub fn from_status(status: StatusCode) -> Self {
        let code = match status {
            StatusCode::BAD_REQUEST => "bad_request",
            StatusCode::UNAUTHORIZED => "unauthorized",
            StatusCode::FORBIDDEN => "forbidden",
            StatusCode::NOT_FOUND => "not_found",
            StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
            StatusCode::NOT_ACCEPTABLE => "not_acceptable",
            StatusCode::REQUEST_TIMEOUT => "request_timeout",
            StatusCode::CONFLICT => "conflict",
            StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
            StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
            StatusCode::UNPROCESSABLE_ENTITY => "validation_failed",
            StatusCode::TOO_MANY_REQUESTS => "rate_limited",
            StatusCode::BAD_GATEWAY => "upstream_unavailable",
            StatusCode::SERVICE_UNAVAILABLE => "service_unavailable",
            StatusCode::GATEWAY_TIMEOUT => "upstream_timeout",
            s if s.is_server_error() => "internal_error",
            _ => "error",
        };
        let mut problem = Self::new(status, code);
        if status == StatusCode::NOT_FOUND {
            problem.detail = Some("no such resource".into());
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
            request_id: request_id::current(),
            errors: (!self.errors.is_empty()).then_some(self.errors.as_slice()),
        };
        serde_json::to_vec(&body).unwrap_or_default()
    }
}

/// RFC 9110 names the statuses; the `http` crate still uses some older names.
fn title(status: StatusCode) -> &'static str {
    match status {
        StatusCode::PAYLOAD_TOO_LARGE => "Content Too Large",
        StatusCode::UNPROCESSABLE_ENTITY => "Unprocessable Content",
        other => other.canonical_reason().unwrap_or("Error"),
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let body = self.body_bytes();
        let mut response = (self.status, body).into_response();
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
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
