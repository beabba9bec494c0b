//! Organisations and journalists: the curated directory, ordered by name, with follower counts
//! and the caller's `viewer.following`.

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::get;
use serde::{Deserialize, Serialize};
use shared_auth::{OptionalCaller, Page, PageQuery, Paging, Query};
use sqlx::{FromRow, PgPool, Postgres, QueryBuilder};
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::cache::json_read;
use crate::domain::ids::can_exist;
use crate::error::Result;
use crate::openapi::{BadQuery, Internal, NotModified, Unauthorized, Unavailable};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/organizations", get(list_organizations))
        .route("/journalists", get(list_journalists))
}

/// Whether the caller follows this organisation or journalist.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, ToSchema)]
pub struct FollowViewer {
    pub following: bool,
}

/// A news organisation.
#[derive(Debug, Clone, Serialize, FromRow, ToSchema)]
#[schema(example = json!({
    "id": "org-001", "name": "Harbour Herald", "url": "https://harbour-herald.example",
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
    "id": "jrn-0001", "name": "Ada Byrne", "organization_id": "org-001",
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

/// Which rows of the directory to select.
pub enum Selection<'a> {
    All,
    OfOrganization(&'a str),
    FollowedBy(&'a str),
}

fn push_following(
    qb: &mut QueryBuilder<'_, Postgres>,
    edge: &str,
    col: &str,
    owner: &str,
    viewer: Option<&str>,
) {
    match viewer {
        Some(user) => {
            qb.push(format!(
                ", EXISTS (SELECT 1 FROM {edge} f WHERE f.{col} = {owner}.id AND f.user_id = "
            ))
            .push_bind(user.to_owned())
            .push(") AS viewer");
        }
        None => {
            qb.push(", NULL::boolean AS viewer");
        }
    }
}

pub async fn organizations(
    pool: &PgPool,
    selection: Selection<'_>,
    viewer: Option<&str>,
    paging: Option<Paging>,
) -> Result<Vec<Organization>> {
    let mut qb = QueryBuilder::new(
        "SELECT o.id, o.name, o.url, \
         (SELECT count(*) FROM organization_follows f WHERE f.organization_id = o.id) AS follower_count",
    );
    push_following(
        &mut qb,
        "organization_follows",
        "organization_id",
        "o",
        viewer,
    );
    qb.push(" FROM organizations o");
    if let Selection::FollowedBy(user) = selection {
        qb.push(
            " JOIN organization_follows mine ON mine.organization_id = o.id AND mine.user_id = ",
        )
        .push_bind(user.to_owned());
    }
    qb.push(" ORDER BY o.name, o.id");
    push_paging(&mut qb, paging);
    Ok(qb.build_query_as().fetch_all(pool).await?)
}

pub async fn journalists(
    pool: &PgPool,
    selection: Selection<'_>,
    viewer: Option<&str>,
    paging: Option<Paging>,
) -> Result<Vec<Journalist>> {
    let mut qb = QueryBuilder::new(
        "SELECT j.id, j.name, j.organization_id, \
         (SELECT count(*) FROM journalist_follows f WHERE f.journalist_id = j.id) AS follower_count",
    );
    push_following(&mut qb, "journalist_follows", "journalist_id", "j", viewer);
    qb.push(" FROM journalists j");
    match selection {
        Selection::All => {}
        Selection::OfOrganization(organization_id) => {
            qb.push(" WHERE j.organization_id = ")
                .push_bind(organization_id.to_owned());
        }
        Selection::FollowedBy(user) => {
            qb.push(
                " JOIN journalist_follows mine ON mine.journalist_id = j.id AND mine.user_id = ",
            )
            .push_bind(user.to_owned());
        }
    }
    qb.push(" ORDER BY j.name, j.id");
    push_paging(&mut qb, paging);
    Ok(qb.build_query_as().fetch_all(pool).await?)
}

fn push_paging(qb: &mut QueryBuilder<'_, Postgres>, paging: Option<Paging>) {
    if let Some(paging) = paging {
        qb.push(" LIMIT ")
            .push_bind(paging.fetch_limit())
            .push(" OFFSET ")
            .push_bind(paging.offset);
    }
}

/// Organisations ordered by name; cacheable like the article reads.
#[utoipa::path(
    get,
    path = "/v1/news/organizations",
    operation_id = "news_list_organizations",
    tag = "news-directory",
    params(PageQuery, crate::openapi::IfNoneMatch),
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
        (status = 304, response = inline(NotModified)),
        (status = 400, response = inline(BadQuery)),
        (status = 401, response = inline(Unauthorized)),
        (status = 500, response = inline(Internal)),
        (status = 503, response = inline(Unavailable)),
    )
)]
async fn list_organizations(
    State(state): State<AppState>,
    OptionalCaller(caller): OptionalCaller,
    headers: HeaderMap,
    Query(query): Query<PageQuery>,
) -> Result<Response> {
    let paging = Paging::new(query.limit, query.offset)?;
    let viewer = caller.map(|c| c.sub);
    let viewer_id = viewer.as_deref();
    let rows = state
        .pools
        .read(viewer.is_some(), |pool| async move {
            organizations(&pool, Selection::All, viewer_id, Some(paging)).await
        })
        .await?;
    Ok(json_read(
        &headers,
        viewer.is_some(),
        &Page::from_rows(rows, paging),
    ))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct JournalistsQuery {
    /// Only journalists of this organisation (an unknown id gives an empty page).
    organization_id: Option<String>,
    /// Page size.
    #[param(minimum = 1, maximum = 100, default = 20)]
    limit: Option<i64>,
    /// Items to skip.
    #[param(minimum = 0, maximum = 10000, default = 0)]
    offset: Option<i64>,
}

/// Journalists ordered by name; cacheable like the article reads.
#[utoipa::path(
    get,
    path = "/v1/news/journalists",
    operation_id = "news_list_journalists",
    tag = "news-directory",
    params(JournalistsQuery, crate::openapi::IfNoneMatch),
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
        (status = 304, response = inline(NotModified)),
        (status = 400, response = inline(BadQuery)),
        (status = 401, response = inline(Unauthorized)),
        (status = 500, response = inline(Internal)),
        (status = 503, response = inline(Unavailable)),
    )
)]
async fn list_journalists(
    State(state): State<AppState>,
    OptionalCaller(caller): OptionalCaller,
    headers: HeaderMap,
    Query(query): Query<JournalistsQuery>,
) -> Result<Response> {
    let paging = Paging::new(query.limit, query.offset)?;
    let viewer = caller.map(|c| c.sub);
    let (organization, viewer_id) = (query.organization_id.as_deref(), viewer.as_deref());
    let rows = match organization {
        Some(id) if !can_exist(id) => Vec::new(),
        _ => {
            state
                .pools
                .read(viewer.is_some(), |pool| async move {
                    let selection = match organization {
                        Some(id) => Selection::OfOrganization(id),
                        None => Selection::All,
                    };
                    journalists(&pool, selection, viewer_id, Some(paging)).await
                })
                .await?
        }
    };
    Ok(json_read(
        &headers,
        viewer.is_some(),
        &Page::from_rows(rows, paging),
    ))
}
