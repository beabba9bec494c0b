//! The gateway's own error codes ([`GatewayCode`], beside the shared ones of shared-auth) and the
//! problems it answers with when a request cannot be forwarded (docs/gateway.md).

use shared_auth::{Problem, SharedCode};

use crate::upstream::NoReplica;

shared_auth::error_codes! {
    /// The gateway's own codes beside the shared ones: the contract answers `upstream_unavailable`
    /// with 502 when every replica refused, and with 503 when none is configured or every one
    /// was already marked down and refused again when tried anyway.
    pub enum GatewayCode {
        /// no replica of the group is configured, or every one is marked down and refused again;
        /// retry after `Retry-After` seconds
        NoReplicaReady = (SERVICE_UNAVAILABLE, "upstream_unavailable",
            "no replica of this upstream is ready"),
        /// only `GET /readyz`: this gateway cannot verify tokens yet (its JWKS has not been
        /// fetched); retry after `Retry-After` seconds
        NotReady = (SERVICE_UNAVAILABLE, "not_ready",
            "this gateway cannot serve yet: its token keys are not loaded"),
    }
}

pub fn payload_too_large() -> Problem {
    Problem::from_code(SharedCode::PayloadTooLarge)
        .with_detail("request bodies are limited to 1048576 bytes")
}

/// 400 for a request body that ended before its declared end, or with bad chunked framing.
pub(crate) fn body_broke_off() -> Problem {
    Problem::from_code(SharedCode::BadRequest)
        .with_detail("the request body broke off before its end")
}

pub(crate) fn upstream_unavailable(detail: &'static str) -> Problem {
    Problem::from_code(SharedCode::UpstreamUnavailable).with_detail(detail)
}

pub(crate) fn upstream_timeout() -> Problem {
    Problem::from_code(SharedCode::UpstreamTimeout)
        .with_detail("the upstream did not answer in time")
}

pub(crate) fn unavailable(label: &str, why: NoReplica) -> Problem {
    match why {
        NoReplica::NoneConfigured => Problem::from_code(GatewayCode::NoReplicaReady)
            .with_retry_after(30)
            .with_detail(format!("no {label} replica is configured")),
        NoReplica::AllDown { retry_after_secs } => Problem::from_code(GatewayCode::NoReplicaReady)
            .with_retry_after(retry_after_secs)
            .with_detail(format!(
                "every {label} replica is marked down and none accepted a connection"
            )),
    }
}
