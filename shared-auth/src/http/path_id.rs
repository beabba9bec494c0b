//! The id in a resource's path. Ids are opaque strings of 1 to 255 characters; a segment whose
//! percent-decoding is not UTF-8 (`/articles/%FF`) names no resource, so it is read as the empty
//! id, which no resource has, and the route answers its own 404 instead of axum's 400.

use std::convert::Infallible;

use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use uuid::Uuid;

/// The one path parameter of a resource route.
pub struct PathId(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathId {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let id = Path::<String>::from_request_parts(parts, state).await;
        Ok(PathId(id.map(|Path(id)| id).unwrap_or_default()))
    }
}

/// The UUID of an id the services created (a study session, a comment), when `text` is written
/// exactly as they write it: lower case, hyphenated. Ids are opaque strings compared as written,
/// so `{...}`, `urn:uuid:...`, upper case or unhyphenated spellings name nothing.
pub fn created_id(text: &str) -> Option<Uuid> {
    let id = Uuid::try_parse(text).ok()?;
    let mut written = Uuid::encode_buffer();
    (id.hyphenated().encode_lower(&mut written) == text).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_created_id_names_its_row_only_as_written() {
        let id = "01a213c5-d2c0-7338-8568-934a97de6b36";
        assert_eq!(
            created_id(id).map(|uuid| uuid.to_string()).as_deref(),
            Some(id)
        );
        for other in [
            "01A213C5-D2C0-7338-8568-934A97DE6B36",
            "01a213c5d2c073388568934a97de6b36",
            "{01a213c5-d2c0-7338-8568-934a97de6b36}",
            "urn:uuid:01a213c5-d2c0-7338-8568-934a97de6b36",
            " 01a213c5-d2c0-7338-8568-934a97de6b36",
            "",
            "art-1",
        ] {
            assert_eq!(created_id(other), None, "{other}");
        }
    }
}
