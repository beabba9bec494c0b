//! Curated records (organisations, journalists, articles) as `seed` and `import` load them, the
//! field rules they are checked by, and what an upsert did to them; the upserts themselves are
//! in `store::curated`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

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
    /// ISO 639-1 code of the article's language (two lowercase letters): search stems the
    /// article with it. Optional in an import file; `en` when left out.
    #[serde(default = "default_language")]
    pub language: String,
}

fn default_language() -> String {
    "en".to_owned()
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
                if !(a.language.len() == 2 && a.language.bytes().all(|b| b.is_ascii_lowercase())) {
                    return Err("language must be an ISO 639-1 code (two lowercase letters)".into());
                }
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

    pub(crate) fn from_flags(total: usize, inserted_flags: &[bool]) -> Self {
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
        match serde_json::from_str::<Record>(article) {
            Ok(Record::Article(a)) => assert_eq!(a.language, "en", "the default language"),
            other => panic!("{other:?}"),
        }
        let spanish = article.replace(r#""j1"}"#, r#""j1","language":"es"}"#);
        match serde_json::from_str::<Record>(&spanish) {
            Ok(record @ Record::Article(_)) => assert_eq!(record.validate(), Ok(())),
            other => panic!("{other:?}"),
        }
        let bad = Record::Article(ArticleRecord {
            language: "EN".into(),
            ..match serde_json::from_str::<Record>(article) {
                Ok(Record::Article(a)) => a,
                other => panic!("{other:?}"),
            }
        });
        assert!(bad.validate().is_err());
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
