//! The directory: organisations and journalists, each a page ordered by name with follower
//! counts and, for a caller, whether they follow it. Both lists are one piece ([`list_page`]);
//! following and unfollowing them is in `engagement`.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use shared_auth::{OptionalCaller, Page, PageQuery, Paging, Query};
use sqlx::FromRow;
use sqlx::postgres::PgRow;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::ids::can_exist;
use crate::error::Result;
use crate::problems::DirectoryAnswers;
use crate::state::AppState;
use crate::store::directory::{self, Directory, JOURNALISTS, ORGANIZATIONS, Selection};
use crate::views::{Journalist, Organization};
use shared_auth::http::cache::{IfNoneMatch, json_read};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_organizations))
        .routes(routes!(list_journalists))
}

/// A cacheable page of one directory list, with the viewer's column for a caller.
async fn list_page<T>(
    state: &AppState,
    caller: Option<shared_auth::Caller>,
    headers: &HeaderMap,
    list: &Directory,
    selection: Selection<'_>,
    paging: Paging,
) -> Result<Response>
where
    T: for<'r> FromRow<'r, PgRow> + serde::Serialize + Send + Unpin,
{
    let viewer = caller.map(|c| c.sub);
    let viewer_id = viewer.as_deref();
    let rows: Vec<T> = match selection {
        Selection::OfOrganization(id) if !can_exist(id) => Vec::new(),
        _ => {
            state
                .pools
                .read(viewer.is_some(), |pool| async move {
                    directory::list(&pool, list, selection, viewer_id, Some(paging)).await
                })
                .await?
        }
    };
    Ok(json_read(
        headers,
        viewer.is_some(),
        &Page::from_rows(rows, paging),
    ))
}

/// Organisations ordered by name; cacheable like the article reads.
#[utoipa::path(
    get,
    path = "/v1/news/organizations",
    operation_id = "news_list_organizations",
    tag = "news-directory",
    params(PageQuery, IfNoneMatch),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "A page of organisations.", body = Page<Organization>,
            links(
                ("Follow" = (operation_id = "news_follow_organization",
                    parameters(("organization_id" = "$response.body#/data/0/id")))),
            ),
            headers(
                ("Cache-Control" = String, description = "`public, max-age=30` anonymous, `private, no-store` with a token."),
                ("ETag" = String, description = "Strong validator; anonymous answers only."),
                ("Vary" = String, description = "`authorization`."),
            )),
        DirectoryAnswers,
    )
)]
async fn list_organizations(
    State(state): State<AppState>,
    OptionalCaller(caller): OptionalCaller,
    headers: HeaderMap,
    Query(query): Query<PageQuery>,
) -> Result<Response> {
    let paging = Paging::new(query.limit, query.offset)?;
    list_page::<Organization>(
        &state,
        caller,
        &headers,
        &ORGANIZATIONS,
        Selection::All,
        paging,
    )
    .await
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct JournalistsQuery {
    /// Only journalists of this organisation (an unknown id gives an empty page).
    organization_id: Option<String>,
    /// Page size.
    #[param(minimum = 1, maximum = 100, default = 20)]
    #[serde(default, deserialize_with = "shared_auth::http::paging::query_integer")]
    limit: Option<i64>,
    /// Items to skip.
    #[param(minimum = 0, maximum = 10000, default = 0)]
    #[serde(default, deserialize_with = "shared_auth::http::paging::query_integer")]
    offset: Option<i64>,
}

/// Journalists ordered by name; cacheable like the article reads.
#[utoipa::path(
    get,
    path = "/v1/news/journalists",
    operation_id = "news_list_journalists",
    tag = "news-directory",
    params(JournalistsQuery, IfNoneMatch),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "A page of journalists.", body = Page<Journalist>,
            links(
                ("Follow" = (operation_id = "news_follow_journalist",
                    parameters(("journalist_id" = "$response.body#/data/0/id")))),
            ),
            headers(
                ("Cache-Control" = String, description = "`public, max-age=30` anonymous, `private, no-store` with a token."),
                ("ETag" = String, description = "Strong validator; anonymous answers only."),
                ("Vary" = String, description = "`authorization`."),
            )),
        DirectoryAnswers,
    )
)]
async fn list_journalists(
    State(state): State<AppState>,
    OptionalCaller(caller): OptionalCaller,
    headers: HeaderMap,
    Query(query): Query<JournalistsQuery>,
) -> Result<Response> {
    let paging = Paging::new(query.limit, query.offset)?;
    let selection = match query.organization_id.as_deref() {
        Some(id) => Selection::OfOrganization(id),
        None => Selection::All,
    };
    list_page::<Journalist>(&state, caller, &headers, &JOURNALISTS, selection, paging).await
}
