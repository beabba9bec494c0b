//! The HTTP client of the OTLP span exporter: the workspace's reqwest (rustls on aws-lc-rs,
//! http/outbound.rs), so an `https://` collector endpoint works and is verified against the
//! platform's trust store (an internal CA installed in the image or mounted over /etc/ssl/certs) as
//! well as the bundled webpki roots. opentelemetry-otlp's own reqwest client is not enabled (it
//! would be a second client stack); its hyper client has no TLS.

use std::time::Duration;

use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};

/// OTLP's default export timeout (`OTEL_EXPORTER_OTLP_TIMEOUT`, 10 s).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct OtlpHttpClient(reqwest::Client);

impl OtlpHttpClient {
    pub fn new() -> Self {
        let client = crate::http::outbound::client_builder()
            .timeout(EXPORT_TIMEOUT)
            .build()
            .unwrap_or_default();
        Self(client)
    }
}

impl Default for OtlpHttpClient {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait::async_trait]
impl HttpClient for OtlpHttpClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let response = self.0.execute(reqwest::Request::try_from(request)?).await?;
        let mut reply = Response::builder().status(response.status());
        if let Some(headers) = reply.headers_mut() {
            *headers = response.headers().clone();
        }
        Ok(reply.body(response.bytes().await?)?)
    }
}
