//! The path parameters several routes share, documented once for the OpenAPI document. The
//! handlers read them with `shared_auth::http::path_id::PathId`; these types only describe them.

use utoipa::IntoParams;

/// `{article_id}` in a path.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ArticleIdPath {
    /// An article id (opaque, 1..=255 characters; any other string names no article: 404).
    #[param(min_length = 1, max_length = 255, example = "art-000001")]
    pub article_id: String,
}

/// `{journalist_id}` in a path.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
pub struct JournalistIdPath {
    /// A journalist id (opaque, 1..=255 characters; any other string names no journalist: 404).
    #[param(min_length = 1, max_length = 255, example = "jrn-0001")]
    pub journalist_id: String,
}

/// `{organization_id}` in a path.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
pub struct OrganizationIdPath {
    /// An organisation id (opaque, 1..=255 characters; any other string names no organisation: 404).
    #[param(min_length = 1, max_length = 255, example = "org-001")]
    pub organization_id: String,
}
