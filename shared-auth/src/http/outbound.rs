//! The HTTP client every outbound request of shared-auth is built from (a JWKS URL, an OTLP
//! collector). TLS is rustls on aws-lc-rs, the crypto the token checks use (no second stack, no
//! ring). The server's certificate is verified against the platform's trust store
//! (`/etc/ssl/certs`: an internal CA is added there) merged with the bundled webpki roots, so an
//! image without a trust store still reaches public endpoints, as before reqwest 0.13.

/// A client builder with both sets of roots; callers add their timeouts.
pub fn client_builder() -> reqwest::ClientBuilder {
    let bundled = webpki_root_certs::TLS_SERVER_ROOT_CERTS
        .iter()
        .filter_map(|der| reqwest::Certificate::from_der(der).ok());
    reqwest::Client::builder().tls_certs_merge(bundled)
}

#[cfg(test)]
mod tests {
    /// The bundled roots parse (a root that did not would be dropped silently) and a client with
    /// them builds without any process-wide crypto provider installed.
    #[test]
    fn the_bundled_roots_parse_and_the_client_builds() {
        let parsed = webpki_root_certs::TLS_SERVER_ROOT_CERTS
            .iter()
            .filter(|der| reqwest::Certificate::from_der(der).is_ok())
            .count();
        assert_eq!(parsed, webpki_root_certs::TLS_SERVER_ROOT_CERTS.len());
        assert!(super::client_builder().build().is_ok());
    }
}
