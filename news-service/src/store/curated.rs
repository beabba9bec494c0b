//! The curated catalogue's bulk upserts, used by `seed` and `import` as the pipeline role.
//! Upserts go by id through UNNEST arrays (one statement per batch), and leave a row untouched
//! when nothing changed, so re-running a load changes nothing.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::domain::curated::{ArticleRecord, JournalistRecord, OrganizationRecord, UpsertCounts};

// `RETURNING (xmax = 0)` is true for a fresh insert and false for an update; rows left alone
// by the `WHERE ... IS DISTINCT FROM` are not returned at all.

pub async fn upsert_organizations(
    pool: &PgPool,
    rows: &[OrganizationRecord],
) -> Result<UpsertCounts, sqlx::Error> {
    let column = |f: fn(&OrganizationRecord) -> &str| rows.iter().map(f).collect::<Vec<_>>();
    let flags = sqlx::query_scalar!(
        r#"INSERT INTO organizations (id, name, url)
           SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[])
           ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, url = EXCLUDED.url
           WHERE (organizations.name, organizations.url) IS DISTINCT FROM (EXCLUDED.name, EXCLUDED.url)
           RETURNING (xmax = 0) AS "inserted!""#,
        &column(|r| &r.id) as &[&str],
        &column(|r| &r.name) as &[&str],
        &column(|r| &r.url) as &[&str],
    )
    .fetch_all(pool)
    .await?;
    Ok(UpsertCounts::from_flags(rows.len(), &flags))
}

pub async fn upsert_journalists(
    pool: &PgPool,
    rows: &[JournalistRecord],
) -> Result<UpsertCounts, sqlx::Error> {
    let column = |f: fn(&JournalistRecord) -> &str| rows.iter().map(f).collect::<Vec<_>>();
    let flags = sqlx::query_scalar!(
        r#"INSERT INTO journalists (id, name, organization_id)
           SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[])
           ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, organization_id = EXCLUDED.organization_id
           WHERE (journalists.name, journalists.organization_id)
                 IS DISTINCT FROM (EXCLUDED.name, EXCLUDED.organization_id)
           RETURNING (xmax = 0) AS "inserted!""#,
        &column(|r| &r.id) as &[&str],
        &column(|r| &r.name) as &[&str],
        &column(|r| &r.organization_id) as &[&str],
    )
    .fetch_all(pool)
    .await?;
    Ok(UpsertCounts::from_flags(rows.len(), &flags))
}

pub async fn upsert_articles(
    pool: &PgPool,
    rows: &[ArticleRecord],
) -> Result<UpsertCounts, sqlx::Error> {
    let column = |f: fn(&ArticleRecord) -> &str| rows.iter().map(f).collect::<Vec<_>>();
    let published_at: Vec<DateTime<Utc>> = rows.iter().map(|r| r.published_at).collect();
    let flags = sqlx::query_scalar!(
        r#"INSERT INTO articles
             (id, title, summary, body, url, published_at, organization_id, journalist_id, language)
           SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],
                                $6::timestamptz[], $7::text[], $8::text[], $9::text[])
           ON CONFLICT (id) DO UPDATE SET title = EXCLUDED.title, summary = EXCLUDED.summary,
             body = EXCLUDED.body, url = EXCLUDED.url, published_at = EXCLUDED.published_at,
             organization_id = EXCLUDED.organization_id, journalist_id = EXCLUDED.journalist_id,
             language = EXCLUDED.language
           WHERE (articles.title, articles.summary, articles.body, articles.url, articles.published_at,
                  articles.organization_id, articles.journalist_id, articles.language)
                 IS DISTINCT FROM (EXCLUDED.title, EXCLUDED.summary, EXCLUDED.body, EXCLUDED.url,
                  EXCLUDED.published_at, EXCLUDED.organization_id, EXCLUDED.journalist_id,
                  EXCLUDED.language)
           RETURNING (xmax = 0) AS "inserted!""#,
        &column(|r| &r.id) as &[&str],
        &column(|r| &r.title) as &[&str],
        &column(|r| &r.summary) as &[&str],
        &column(|r| &r.body) as &[&str],
        &column(|r| &r.url) as &[&str],
        &published_at,
        &column(|r| &r.organization_id) as &[&str],
        &column(|r| &r.journalist_id) as &[&str],
        &column(|r| &r.language) as &[&str],
    )
    .fetch_all(pool)
    .await?;
    Ok(UpsertCounts::from_flags(rows.len(), &flags))
}
