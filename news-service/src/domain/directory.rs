//! The directory as clients see it: organisations and journalists with their follower counts and,
//! for a caller, whether they follow them (directory lists and `/me/following`).

use serde::Serialize;
use sqlx::FromRow;
use utoipa::ToSchema;

/// Whether the caller follows this organisation or journalist.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, ToSchema)]
pub struct FollowViewer {
    pub following: bool,
}

/// A news organisation.
#[derive(Debug, Clone, Serialize, FromRow, ToSchema)]
#[schema(example = json!({
    "id": "org-001", "name": "The Morning Ledger", "url": "https://morningledger.example",
    "follower_count": 21, "viewer": {"following": true}
}))]
pub struct Organization {
    pub id: String,
    pub name: String,
    pub url: String,
    #[schema(minimum = 0)]
    pub follower_count: i64,
    /// `{following}` for a caller with a valid token; null without one.
    #[sqlx(try_from = "Option<bool>")]
    #[schema(value_type = Option<FollowViewer>, required = true)]
    pub viewer: Viewer,
}

/// A journalist.
#[derive(Debug, Clone, Serialize, FromRow, ToSchema)]
#[schema(example = json!({
    "id": "jrn-0001", "name": "Kofi Ibrahim", "organization_id": "org-001",
    "follower_count": 8, "viewer": null
}))]
pub struct Journalist {
    pub id: String,
    pub name: String,
    pub organization_id: String,
    #[schema(minimum = 0)]
    pub follower_count: i64,
    /// `{following}` for a caller with a valid token; null without one.
    #[sqlx(try_from = "Option<bool>")]
    #[schema(value_type = Option<FollowViewer>, required = true)]
    pub viewer: Viewer,
}

/// `{following}` for a caller, null for an anonymous reader (the column is NULL then).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Viewer(pub Option<FollowViewer>);

impl From<Option<bool>> for Viewer {
    fn from(following: Option<bool>) -> Self {
        Self(following.map(|following| FollowViewer { following }))
    }
}
