//! `GET /v1/lingo/languages`: the whole (small) list, not paged.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Serialize;
use shared_auth::OptionalCaller;
use shared_auth::http::cache::{IfNoneMatch, json_read};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::catalogue::Language;
use crate::error::Result;
use crate::problems::NotModified;
use crate::state::{AppState, Db};
use crate::store;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list))
}

/// Every language, ordered by `code`; not paged.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "data": [{"code": "de", "name": "German"}, {"code": "es", "name": "Spanish"}],
    "count": 2
}))]
pub struct LanguageList {
    pub data: Vec<Language>,
    /// Number of items in `data`.
    #[schema(minimum = 0)]
    pub count: usize,
}

/// Every language of the catalogue.
#[utoipa::path(
    get,
    path = "/languages",
    operation_id = "lingo_list_languages",
    tag = "lingo",
    params(IfNoneMatch),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "Every language, ordered by `code`", body = LanguageList,
            headers(
                ("Cache-Control" = String, description = "`public, max-age=30` anonymous, `private, no-store` with a token."),
                ("ETag" = String, description = "Strong validator; anonymous answers only."),
                ("Vary" = String, description = "`authorization`."),
            )),
        NotModified,
    )
)]
async fn list(
    // An invalid token is refused even here (fail closed); a valid one only makes the answer
    // private.
    OptionalCaller(caller): OptionalCaller,
    State(db): State<Db>,
    headers: HeaderMap,
) -> Result<Response> {
    let data = store::languages::list(&db.primary).await?;
    let list = LanguageList {
        count: data.len(),
        data,
    };
    Ok(json_read(&headers, caller.is_some(), &list))
}
