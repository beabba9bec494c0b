//! The OTLP/HTTP span exporter (protobuf over `POST .../v1/traces`) that the batch task
//! ([`super::batch`]) sends each batch with: the body of a batch is encoded in one pass ([`super::otlp_proto`]) and sent with the
//! workspace's reqwest (rustls on aws-lc-rs, http/outbound.rs), so an `https://` collector
//! endpoint works and is verified against the platform's trust store (an internal CA installed in
//! the image or mounted over /etc/ssl/certs) as well as the bundled webpki roots.
//!
//! It reads the standard variables opentelemetry-otlp's HTTP exporter reads:
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as is) or `OTEL_EXPORTER_OTLP_ENDPOINT` (with
//! `/v1/traces` appended), `OTEL_EXPORTER_OTLP_(TRACES_)HEADERS` (`key=value,...`,
//! percent-decoded) and `OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT` (milliseconds, default 10 s).

use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};

use super::otlp_proto::{EncodedResource, encode_request};
use super::span::SpanRecord;

/// OTLP's default export timeout (`OTEL_EXPORTER_OTLP_TIMEOUT`, 10 s).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// Where spans go when no endpoint variable says otherwise (a local collector).
const DEFAULT_ENDPOINT: &str = "http://localhost:4318";

#[derive(Debug)]
pub struct OtlpHttpExporter {
    client: reqwest::Client,
    url: String,
    headers: HeaderMap,
    resource: EncodedResource,
}

impl OtlpHttpExporter {
    /// An exporter of `service_name`'s spans to `traces_url`, or to the URL the environment
    /// names.
    pub fn new(traces_url: Option<String>, service_name: &'static str) -> Self {
        let client = crate::http::outbound::client_builder()
            .timeout(export_timeout())
            .build()
            .unwrap_or_default();
        let mut headers = HeaderMap::new();
        // The signal's own variable wins over the general one.
        for name in [
            "OTEL_EXPORTER_OTLP_HEADERS",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        ] {
            if let Some(value) = env(name) {
                headers.extend(parse_headers(&value));
            }
        }
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/x-protobuf"),
        );
        Self {
            client,
            url: traces_url.unwrap_or_else(traces_url_from_env),
            headers,
            resource: EncodedResource::new(service_name, resource_attributes_from_env()),
        }
    }

    /// Sends one batch; the error says why it was not accepted.
    pub async fn export(&self, batch: &[SpanRecord]) -> Result<(), String> {
        let body = encode_request(&self.resource, batch);
        let response = self
            .client
            .post(&self.url)
            .headers(self.headers.clone())
            .body(body)
            .send()
            .await
            .map_err(|error| format!("exporting spans to {}: {error}", self.url))?;
        let status = response.status();
        // Read to the end, so the connection is reused for the next batch.
        let _ = response.bytes().await;
        if status.is_success() {
            Ok(())
        } else {
            Err(format!("the collector at {} answered {status}", self.url))
        }
    }
}

/// `OTEL_RESOURCE_ATTRIBUTES`: `key=value,...` (trimmed), as the SDK's environment detector
/// reads it. Our `service.name` wins over one given there.
fn resource_attributes_from_env() -> Vec<(String, String)> {
    let text = env("OTEL_RESOURCE_ATTRIBUTES").unwrap_or_default();
    text.split_terminator(',')
        .filter_map(|member| {
            let (key, value) = member.split_once('=')?;
            Some((key.trim().to_owned(), value.trim().to_owned()))
        })
        .collect()
}

/// How long one export may take: `OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT`, else 10 s.
pub fn export_timeout() -> Duration {
    env_millis("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")
        .or_else(|| env_millis("OTEL_EXPORTER_OTLP_TIMEOUT"))
        .unwrap_or(EXPORT_TIMEOUT)
}

fn env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|value| value.trim().to_owned())
        .filter(|value| !value.is_empty())
}

fn env_millis(name: &str) -> Option<Duration> {
    env(name)?.parse().ok().map(Duration::from_millis)
}

/// The traces URL of the OTLP/HTTP specification: the signal's variable as is, else the general
/// endpoint with `/v1/traces` appended.
fn traces_url_from_env() -> String {
    if let Some(url) = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
        return url;
    }
    let base = env("OTEL_EXPORTER_OTLP_ENDPOINT").unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned());
    format!("{}/v1/traces", base.trim_end_matches('/'))
}

/// `key=value,key2=value2`, values percent-decoded; malformed members are skipped.
fn parse_headers(text: &str) -> impl Iterator<Item = (HeaderName, HeaderValue)> + '_ {
    text.split(',').filter_map(|member| {
        let (key, value) = member.split_once('=')?;
        let name = HeaderName::from_bytes(key.trim().as_bytes()).ok()?;
        let value = percent_decode(value.trim())?;
        let value = HeaderValue::from_str(&value).ok()?;
        (!value.is_empty()).then_some((name, value))
    })
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%' {
            let hex = std::str::from_utf8(bytes.get(at + 1..at + 3)?).ok()?;
            decoded.push(u8::from_str_radix(hex, 16).ok()?);
            at += 3;
        } else {
            decoded.push(bytes[at]);
            at += 1;
        }
    }
    String::from_utf8(decoded).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_split_trimmed_and_percent_decoded() {
        let headers: Vec<(HeaderName, HeaderValue)> =
            parse_headers(" api-key = a%20b%3Dc ,x-tenant=7,broken,=nokey,empty=").collect();
        assert_eq!(
            headers,
            vec![
                (
                    HeaderName::from_static("api-key"),
                    HeaderValue::from_static("a b=c")
                ),
                (
                    HeaderName::from_static("x-tenant"),
                    HeaderValue::from_static("7")
                ),
            ]
        );
    }

    #[test]
    fn a_bad_percent_escape_drops_the_header() {
        assert_eq!(percent_decode("a%2"), None);
        assert_eq!(percent_decode("a%zz"), None);
        assert_eq!(percent_decode("plain").as_deref(), Some("plain"));
    }
}
