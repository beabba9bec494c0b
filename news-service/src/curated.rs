//! Curated records (organisations, journalists, articles) and their bulk upserts, shared by
//! `seed` and `import`. Upserts go by id through UNNEST arrays (one statement per batch), and
//! leave a row untouched when nothing changed, so re-running a load changes nothing.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrganizationRecord {
    pub id: String,
    pub name: String,
    pub url: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JournalistRecord {
    pub id: String,
    pub name: String,
    pub organization_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArticleRecord {
    pub id: String,
    pub title: String,
    pub summary: String,
    pub body: String,
    pub url: String,
    pub published_at: DateTime<Utc>,
    pub organization_id: String,
    pub journalist_id: String,
}

/// One line of an import file: `{"type": "organization" | "journalist" | "article", ...fields}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    Organization(OrganizationRecord),
    Journalist(JournalistRecord),
    Article(ArticleRecord),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Organization,
    Journalist,
    Article,
}

impl Record {
    pub fn kind(&self) -> Kind {
        match self {
            Self::Organization(_) => Kind::Organization,
            Self::Journalist(_) => Kind::Journalist,
            Self::Article(_) => Kind::Article,
        }
    }

    /// Field rules the database would also refuse, checked first for a clearer message.
    pub fn validate(&self) -> Result<(), String> {
        let id = |field: &str, value: &str| -> Result<(), String> {
            match value.chars().count() {
                1..=255 => Ok(()),
                _ => Err(format!("{field} must be 1 to 255 characters")),
            }
        };
        let present = |field: &str, value: &str| -> Result<(), String> {
            if value.trim().is_empty() {
                Err(format!("{field} must not be empty"))
            } else {
                Ok(())
            }
        };
        match self {
            Self::Organization(o) => {
                id("id", &o.id)?;
                present("name", &o.name)
            }
            Self::Journalist(j) => {
                id("id", &j.id)?;
                present("name", &j.name)?;
                id("organization_id", &j.organization_id)
            }
            Self::Article(a) => {
                id("id", &a.id)?;
                present("title", &a.title)?;
                id("organization_id", &a.organization_id)?;
                id("journalist_id", &a.journalist_id)
            }
        }
    }
}

/// What an upsert did to its rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UpsertCounts {
    pub inserted: u64,
    pub updated: u64,
    pub unchanged: u64,
}

impl UpsertCounts {
    pub fn add(&mut self, other: Self) {
        self.inserted += other.inserted;
        self.updated += other.updated;
        self.unchanged += other.unchanged;
    }

    fn from_flags(total: usize, inserted_flags: &[bool]) -> Self {
        let inserted = inserted_flags.iter().filter(|i| **i).count() as u64;
        let updated = inserted_flags.len() as u64 - inserted;
        Self {
            inserted,
            updated,
            unchanged: total as u64 - inserted - updated,
        }
    }
}

impl std::fmt::Display for UpsertCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} inserted, {} updated, {} unchanged",
            self.inserted, self.updated, self.unchanged
        )
    }
}

// `RETURNING (xmax = 0)` is true for a fresh insert and false for an update; rows left alone
// by the `WHERE ... IS DISTINCT FROM` are not returned at all.

pub async fn upsert_organizations(
    pool: &PgPool,
    rows: &[OrganizationRecord],
) -> Result<UpsertCounts, sqlx::Error> {
    let flags: Vec<bool> = sqlx::query_scalar(
        "INSERT INTO organizations (id, name, url) \
         SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[]) \
         ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, url = EXCLUDED.url \
         WHERE (organizations.name, organizations.url) IS DISTINCT FROM (EXCLUDED.name, EXCLUDED.url) \
         RETURNING (xmax = 0)",
    )
    .bind(rows.iter().map(|r| r.id.clone()).collect::<Vec<_>>())
    .bind(rows.iter().map(|r| r.name.clone()).collect::<Vec<_>>())
    .bind(rows.iter().map(|r| r.url.clone()).collect::<Vec<_>>())
    .fetch_all(pool)
    .await?;
    Ok(UpsertCounts::from_flags(rows.len(), &flags))
}

pub async fn upsert_journalists(
    pool: &PgPool,
    rows: &[JournalistRecord],
) -> Result<UpsertCounts, sqlx::Error> {
    let flags: Vec<bool> = sqlx::query_scalar(
        "INSERT INTO journalists (id, name, organization_id) \
         SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[]) \
         ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, organization_id = EXCLUDED.organization_id \
         WHERE (journalists.name, journalists.organization_id) \
               IS DISTINCT FROM (EXCLUDED.name, EXCLUDED.organization_id) \
         RETURNING (xmax = 0)",
    )
    .bind(rows.iter().map(|r| r.id.clone()).collect::<Vec<_>>())
    .bind(rows.iter().map(|r| r.name.clone()).collect::<Vec<_>>())
    .bind(rows.iter().map(|r| r.organization_id.clone()).collect::<Vec<_>>())
    .fetch_all(pool)
    .await?;
    Ok(UpsertCounts::from_flags(rows.len(), &flags))
}

pub async fn upsert_articles(
    pool: &PgPool,
    rows: &[ArticleRecord],
) -> Result<UpsertCounts, sqlx::Error> {
    let col =
        |f: fn(&ArticleRecord) -> &String| rows.iter().map(|r| f(r).clone()).collect::<Vec<_>>();
    let flags: Vec<bool> = sqlx::query_scalar(
        "INSERT INTO articles (id, title, summary, body, url, published_at, organization_id, journalist_id) \
         SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], \
                              $6::timestamptz[], $7::text[], $8::text[]) \
         ON CONFLICT (id) DO UPDATE SET title = EXCLUDED.title, summary = EXCLUDED.summary, \
           body = EXCLUDED.body, url = EXCLUDED.url, published_at = EXCLUDED.published_at, \
           organization_id = EXCLUDED.organization_id, journalist_id = EXCLUDED.journalist_id \
         WHERE (articles.title, articles.summary, articles.body, articles.url, articles.published_at, \
                articles.organization_id, articles.journalist_id) \
               IS DISTINCT FROM (EXCLUDED.title, EXCLUDED.summary, EXCLUDED.body, EXCLUDED.url, \
                EXCLUDED.published_at, EXCLUDED.organization_id, EXCLUDED.journalist_id) \
         RETURNING (xmax = 0)",
    )
    .bind(col(|r| &r.id))
    .bind(col(|r| &r.title))
    .bind(col(|r| &r.summary))
    .bind(col(|r| &r.body))
    .bind(col(|r| &r.url))
    .bind(rows.iter().map(|r| r.published_at).collect::<Vec<_>>())
    .bind(col(|r| &r.organization_id))
    .bind(col(|r| &r.journalist_id))
    .fetch_all(pool)
    .await?;
    Ok(UpsertCounts::from_flags(rows.len(), &flags))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_parse_by_type_and_refuse_unknown_fields() {
        let org: Record =
            serde_json::from_str(r#"{"type":"organization","id":"o1","name":"N","url":"u"}"#)
                .expect("organization parses");
        assert_eq!(org.kind(), Kind::Organization);
        let article = r#"{"type":"article","id":"a1","title":"T","summary":"S","body":"B","url":"u",
            "published_at":"2026-01-02T03:04:05Z","organization_id":"o1","journalist_id":"j1"}"#;
        assert_eq!(
            serde_json::from_str::<Record>(article)
                .map(|r| r.kind())
                .ok(),
            Some(Kind::Article)
        );
        for bad in [
            r#"{"type":"organization","id":"o1","name":"N","url":"u","extra":1}"#,
            r#"{"type":"podcast","id":"p1"}"#,
            r#"{"id":"o1","name":"N","url":"u"}"#,
            r#"{"type":"journalist","id":"j1","name":"N"}"#,
        ] {
            assert!(serde_json::from_str::<Record>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn validation_names_the_field() {
        let org = |id: &str, name: &str| {
            Record::Organization(OrganizationRecord {
                id: id.into(),
                name: name.into(),
                url: "u".into(),
            })
        };
        assert_eq!(org("o1", "N").validate(), Ok(()));
        assert_eq!(
            org("", "N").validate(),
            Err("id must be 1 to 255 characters".into())
        );
        assert_eq!(
            org("o1", "  ").validate(),
            Err("name must not be empty".into())
        );
    }
}
