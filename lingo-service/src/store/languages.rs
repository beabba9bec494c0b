//! The catalogue's languages (read only: the pipeline writes them).

use sqlx::PgExecutor;

use crate::domain::catalogue::Language;
use crate::domain::text::is_storable;
use crate::error::Result;

/// Every language, ordered by `code`.
pub async fn list<'e>(db: impl PgExecutor<'e>) -> Result<Vec<Language>> {
    let languages = sqlx::query_as!(Language, "SELECT code, name FROM languages ORDER BY code")
        .fetch_all(db)
        .await?;
    Ok(languages)
}

/// Whether `code` names a language of the catalogue.
pub async fn exists<'e>(db: impl PgExecutor<'e>, code: &str) -> Result<bool> {
    if !is_storable(code) {
        return Ok(false);
    }
    let exists = sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM languages WHERE code = $1) AS "exists!""#,
        code
    )
    .fetch_one(db)
    .await?;
    Ok(exists)
}
