//! axum extractors for the caller of a request: `RequiredCaller` (401 without a valid token) and
//! `OptionalCaller` (anonymous without a token, 401 with an invalid one: fail closed).

use std::sync::Arc;

use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;

use crate::auth::claims::Caller;
use crate::auth::error::AuthError;
use crate::auth::verify::{Verifier, bearer_token};

/// The verified caller of an endpoint that needs one.
#[derive(Debug, Clone)]
pub struct RequiredCaller(pub Caller);

/// The verified caller of an endpoint that also serves anonymous requests.
#[derive(Debug, Clone)]
pub struct OptionalCaller(pub Option<Caller>);

impl<S> FromRequestParts<S> for OptionalCaller
where
    Arc<Verifier>: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = AuthError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Some(token) = bearer_token(&parts.headers)? else {
            return Ok(OptionalCaller(None));
        };
        let verifier = Arc::<Verifier>::from_ref(state);
        verifier
            .verify(token)
            .await
            .map(|caller| OptionalCaller(Some(caller)))
    }
}

/// The optional caller, with "no token" refused: the two differ only in that case.
impl<S> FromRequestParts<S> for RequiredCaller
where
    Arc<Verifier>: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = AuthError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let OptionalCaller(caller) = OptionalCaller::from_request_parts(parts, state).await?;
        caller.map(RequiredCaller).ok_or(AuthError::MissingToken)
    }
}
