//! `GET /v1/lingo/languages`: the whole (small) list, not paged.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use shared_auth::OptionalCaller;
use sqlx::{FromRow, PgPool};

use crate::{AppState, Result};

pub fn router() -> Router<AppState> {
    Router::new().route("/languages", get(list))
}

#[derive(Debug, Serialize, FromRow)]
pub struct Language {
    pub code: String,
    pub name: String,
}

#[derive(Debug, Serialize)]
pub struct LanguageList {
    pub data: Vec<Language>,
    pub count: usize,
}

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
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM languages WHERE code = $1)")
        .bind(code)
        .fetch_one(executor)
        .await
}
