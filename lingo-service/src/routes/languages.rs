//! `GET /v1/lingo/languages`: the whole (small) list, not paged.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use shared_auth::OptionalCaller;
use sqlx::PgPool;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::catalogue::Language;
use crate::error::Result;
use crate::state::AppState;
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
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "Every language, ordered by `code`", body = LanguageList),
    )
)]
async fn list(
    // An invalid token is refused even here (fail closed); a valid one changes nothing.
    OptionalCaller(_caller): OptionalCaller,
    State(db): State<PgPool>,
) -> Result<Json<LanguageList>> {
    let data = store::languages::list(&db).await?;
    Ok(Json(LanguageList {
        count: data.len(),
        data,
    }))
}
