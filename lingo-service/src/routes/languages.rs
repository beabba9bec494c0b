//! `GET /v1/lingo/languages`: the whole (small) list, not paged.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use shared_auth::OptionalCaller;
use sqlx::{FromRow, PgPool};
use utoipa::ToSchema;

use crate::{AppState, Result};

pub fn router() -> Router<AppState> {
    Router::new().route("/languages", get(list))
}

#[derive(Debug, Serialize, FromRow, ToSchema)]
#[schema(example = json!({"code": "es", "name": "Spanish"}))]
pub struct Language {
    pub code: String,
    pub name: String,
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
    path = "/v1/lingo/languages",
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
    let data = sqlx::query_as::<_, Language>("SELECT code, name FROM languages ORDER BY code")
        .fetch_all(&db)
        .await?;
    Ok(Json(LanguageList {
        count: data.len(),
        data,
    }))
}

/// Whether `code` names a language of `GET /languages`.
pub async fn exists<'e>(
    executor: impl sqlx::PgExecutor<'e>,
    code: &str,
) -> std::result::Result<bool, sqlx::Error> {
    if !crate::db::is_storable(code) {
        return Ok(false);
    }
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM languages WHERE code = $1)")
        .bind(code)
        .fetch_one(executor)
        .await
}
