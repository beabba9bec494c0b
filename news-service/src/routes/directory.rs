//! The directory: organisations and journalists, each a page ordered by name with follower
//! counts and, for a caller, whether they follow it. Both lists are one piece ([`list_page`]);
//! following and unfollowing them is in `engagement`.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use shared_auth::{OptionalCaller, Problem, Query};
use sqlx::FromRow;
use sqlx::postgres::PgRow;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::cursor::{
    CursorPage, CursorPageQuery, KeysetPaging, ListKind, NameCursor, Position,
};
use crate::domain::directory::{Journalist, Organization};
use crate::domain::ids::can_exist;
use crate::error::Result;
use crate::problems::DirectoryProblems;
use crate::state::{AppState, Db};
use crate::store::directory::{
    self, Directory, DirectoryPage, JOURNALISTS, ORGANIZATIONS, Selection,
};
use shared_auth::http::cache::{IfNoneMatch, json_read};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_organizations))
        .routes(routes!(list_journalists))
}

/// A cacheable page of one directory list, with the viewer's column for a caller. `paging`
/// was parsed for this list; `name_and_id` reads a row's keys for the cursor after it.
async fn list_page<T>(
    db: &Db,
    caller: Option<shared_auth::Caller>,
    headers: &HeaderMap,
    (list, kind): (&Directory, ListKind),
    selection: Selection<'_>,
    paging: &KeysetPaging<NameCursor>,
    name_and_id: fn(&T) -> (&str, &str),
) -> Result<Response>
where
    T: for<'r> FromRow<'r, PgRow> + serde::Serialize + Send + Unpin,
{
    let viewer = caller.map(|c| c.sub);
    let viewer_id = viewer.as_deref();
    let organization_id = match selection {
        Selection::OfOrganization(id) => Some(id),
        _ => None,
    };
    let page = DirectoryPage {
        paging: paging.paging,
        after: paging
            .after
            .as_ref()
            .map(|c| (c.name.as_str(), c.id.as_str())),
    };
    let rows: Vec<T> = match organization_id {
        Some(id) if !can_exist(id) => Vec::new(),
        _ => {
            db.read(viewer.is_some(), |pool| async move {
                directory::list(&pool, list, selection, viewer_id, Some(page)).await
            })
            .await?
        }
    };
    let page = CursorPage::from_rows(rows, paging.paging, paging.after.is_some(), |last| {
        let (name, id) = name_and_id(last);
        NameCursor {
            kind,
            name: name.to_owned(),
            id: id.to_owned(),
            organization_id: organization_id.map(str::to_owned),
        }
        .encode()
    });
    Ok(json_read(headers, viewer.is_some(), &page))
}

/// Organisations ordered by name, ties by id; cacheable like the article reads.
///
/// Walk the whole directory with `cursor`; `offset` only reaches the first 10,000.
#[utoipa::path(
    get,
    path = "/organizations",
    operation_id = "news_list_organizations",
    tag = "news-directory",
    params(CursorPageQuery, IfNoneMatch),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "A page of organisations.", body = CursorPage<Organization>,
            links(
                ("Follow" = (operation_id = "news_follow_organization",
                    parameters(("organization_id" = "$response.body#/data/0/id")))),
                ("NextPage" = (operation_id = "news_list_organizations",
                    parameters(("cursor" = "$response.body#/next_cursor")))),
            ),
            headers(
                ("Cache-Control" = String, description = "`public, max-age=30` anonymous, `private, no-store` with a token."),
                ("ETag" = String, description = "Strong validator; anonymous answers only."),
                ("Vary" = String, description = "`authorization`."),
            )),
        DirectoryProblems,
    )
)]
async fn list_organizations(
    State(db): State<Db>,
    OptionalCaller(caller): OptionalCaller,
    headers: HeaderMap,
    Query(query): Query<CursorPageQuery>,
) -> Result<Response> {
    let kind = ListKind::Organizations;
    let paging = query.keyset_paging(kind)?;
    list_page(
        &db,
        caller,
        &headers,
        (&ORGANIZATIONS, kind),
        Selection::All,
        &paging,
        |o: &Organization| (&o.name, &o.id),
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
    /// Items to skip (to jump to a page near the start); not together with `cursor`.
    #[param(minimum = 0, maximum = 10000, default = 0)]
    #[serde(default, deserialize_with = "shared_auth::http::paging::query_integer")]
    offset: Option<i64>,
    /// A `next_cursor` from an earlier page (keyset paging, to walk the list to its end); not
    /// together with `offset`. The cursor keeps the `organization_id` filter: one given with it
    /// must equal the cursor's (one left out is taken from it), else 400 `invalid_cursor`. An
    /// empty `cursor=` is the same as none.
    cursor: Option<String>,
}

/// Journalists ordered by name, ties by id; cacheable like the article reads.
///
/// Walk the whole list with `cursor`; `offset` only reaches the first 10,000.
#[utoipa::path(
    get,
    path = "/journalists",
    operation_id = "news_list_journalists",
    tag = "news-directory",
    params(JournalistsQuery, IfNoneMatch),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "A page of journalists.", body = CursorPage<Journalist>,
            links(
                ("Follow" = (operation_id = "news_follow_journalist",
                    parameters(("journalist_id" = "$response.body#/data/0/id")))),
                ("NextPage" = (operation_id = "news_list_journalists",
                    parameters(("cursor" = "$response.body#/next_cursor")))),
            ),
            headers(
                ("Cache-Control" = String, description = "`public, max-age=30` anonymous, `private, no-store` with a token."),
                ("ETag" = String, description = "Strong validator; anonymous answers only."),
                ("Vary" = String, description = "`authorization`."),
            )),
        DirectoryProblems,
    )
)]
async fn list_journalists(
    State(db): State<Db>,
    OptionalCaller(caller): OptionalCaller,
    headers: HeaderMap,
    Query(query): Query<JournalistsQuery>,
) -> Result<Response> {
    let kind = ListKind::Journalists;
    let paging: KeysetPaging<NameCursor> =
        KeysetPaging::parse(kind, query.limit, query.offset, query.cursor.as_deref())?;
    let organization_id = match &paging.after {
        Some(cursor) => cursor
            .resolve_organization(query.organization_id.as_deref())
            .map_err(Problem::from)?,
        None => query.organization_id,
    };
    let selection = match organization_id.as_deref() {
        Some(id) => Selection::OfOrganization(id),
        None => Selection::All,
    };
    list_page(
        &db,
        caller,
        &headers,
        (&JOURNALISTS, kind),
        selection,
        &paging,
        |j: &Journalist| (&j.name, &j.id),
    )
    .await
}
