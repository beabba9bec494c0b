//! `GET /v1/lingo/phrases` (paged phrase items with cached stats) and `GET /phrases/{id}`.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use shared_auth::http::cache::{IfNoneMatch, json_read};
use shared_auth::http::path_id::PathId;
use shared_auth::{OptionalCaller, Page, Paging, Query};
use sqlx::PgPool;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::catalogue::{Phrase, PhraseItem};
use crate::error::{ErrorCode, Result};
use crate::problems::{NotModified, PagingProblems, PhraseProblems};
use crate::state::AppState;
use crate::store;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(show))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// Only phrases in this language (their own language, not a translation's); an unknown
    /// language gives an empty page.
    #[param(example = "es")]
    language: Option<String>,
    /// Page size.
    #[param(minimum = 1, maximum = 100, default = 20)]
    #[serde(default, deserialize_with = "shared_auth::http::paging::query_integer")]
    limit: Option<i64>,
    /// Items to skip.
    #[param(minimum = 0, maximum = 10000, default = 0)]
    #[serde(default, deserialize_with = "shared_auth::http::paging::query_integer")]
    offset: Option<i64>,
}

/// Phrases of the catalogue with their cached statistics, ordered by `id`.
#[utoipa::path(
    get,
    path = "/phrases",
    operation_id = "lingo_list_phrases",
    tag = "lingo",
    params(ListQuery, IfNoneMatch),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "One page of phrases, ordered by `id`", body = Page<PhraseItem>,
            headers(
                ("Cache-Control" = String, description = "`public, max-age=30` anonymous, `private, no-store` with a token."),
                ("ETag" = String, description = "Strong validator; anonymous answers only."),
                ("Vary" = String, description = "`authorization`."),
            )),
        NotModified,
        PagingProblems,
    )
)]
async fn list(
    OptionalCaller(caller): OptionalCaller,
    State(db): State<PgPool>,
    Query(query): Query<ListQuery>,
    headers: HeaderMap,
) -> Result<Response> {
    let paging = Paging::new(query.limit, query.offset)?;
    let items = store::phrases::list(&db, query.language.as_deref(), paging).await?;
    let page = Page::from_rows(items, paging);
    Ok(json_read(&headers, caller.is_some(), &page))
}

/// One phrase with all its translations.
#[utoipa::path(
    get,
    path = "/phrases/{phrase_id}",
    operation_id = "lingo_get_phrase",
    tag = "lingo",
    params(("phrase_id" = String, Path, description = "The phrase's id (opaque)", example = "ph-es-001"), IfNoneMatch),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "The phrase and its translations", body = Phrase,
            headers(
                ("Cache-Control" = String, description = "`public, max-age=30` anonymous, `private, no-store` with a token."),
                ("ETag" = String, description = "Strong validator; anonymous answers only."),
                ("Vary" = String, description = "`authorization`."),
            )),
        NotModified,
        PhraseProblems,
    )
)]
async fn show(
    OptionalCaller(caller): OptionalCaller,
    State(db): State<PgPool>,
    PathId(phrase_id): PathId,
    headers: HeaderMap,
) -> Result<Response> {
    let phrase = store::phrases::find(&db, &phrase_id)
        .await?
        .ok_or(ErrorCode::PhraseNotFound)?;
    Ok(json_read(&headers, caller.is_some(), &phrase))
}
