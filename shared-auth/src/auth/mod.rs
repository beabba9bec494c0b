//! Who is calling: token verification (HS256 secret or JWKS), the claims and caller they yield,
//! the axum extractors, the refusals, and the `mint-token` development command.

pub mod claims;
pub mod error;
pub mod extract;
pub mod jwks;
pub mod keys;
pub mod mint;
pub mod token;
pub mod verify;
