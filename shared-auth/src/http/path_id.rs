//! The id in a resource's path. Ids are opaque strings of 1 to 255 characters; a segment whose
//! percent-decoding is not UTF-8 (`/articles/%FF`) names no resource, so it is read as the empty
//! id, which no resource has, and the route answers its own 404 instead of axum's 400.

use std::convert::Infallible;

use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;

/// The one path parameter of a resource route.
pub struct PathId(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathId {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let id = Path::<String>::from_request_parts(parts, state).await;
        Ok(PathId(id.map(|Path(id)| id).unwrap_or_default()))
    }
}
