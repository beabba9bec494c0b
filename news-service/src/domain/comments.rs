//! Comment rules of the contract (docs/): trimmed text of 1..=10,000 characters, depth
//! 0..=10, and the materialised thread path that orders a thread; and a comment as clients see
//! it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared_auth::FieldError;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::error::ErrorCode;

pub const MAX_TEXT_CHARS: usize = 10_000;
pub const MAX_DEPTH: i16 = 10;

/// The text to store: trimmed, non-empty, at most 10,000 characters (characters, not bytes), and
/// free of U+0000 (which Postgres `text` cannot hold).
pub fn validate_text(text: &str) -> Result<String, FieldError> {
    if text.contains('\0') {
        return Err(FieldError::new(
            "text",
            "must not contain the NUL character (U+0000)",
        ));
    }
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(FieldError::new("text", "must not be empty"));
    }
    if trimmed.chars().count() > MAX_TEXT_CHARS {
        return Err(FieldError::new(
            "text",
            format!("must be at most {MAX_TEXT_CHARS} characters"),
        ));
    }
    Ok(trimmed.to_owned())
}

/// The parent a reply hangs under, as read from the database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParentRef {
    pub article_id: String,
    pub depth: i16,
    pub path: String,
}

/// Where a new comment goes: its depth and thread path, or the 422 that refuses it.
pub fn placement(
    id: Uuid,
    article_id: &str,
    parent: Option<&ParentRef>,
) -> Result<(i16, String), ErrorCode> {
    let segment = id.simple().to_string();
    let Some(parent) = parent else {
        return Ok((0, segment));
    };
    if parent.article_id != article_id {
        return Err(ErrorCode::ParentArticleMismatch);
    }
    if parent.depth >= MAX_DEPTH {
        return Err(ErrorCode::MaxDepthExceeded);
    }
    Ok((parent.depth + 1, format!("{}.{segment}", parent.path)))
}

/// Whether `path` is a thread path as [`placement`] writes one: 1..=11 segments (depth 0..=10)
/// of 32 lowercase hex digits, joined by '.'. A cursor names the path of the comment it
/// continues after, and one holding anything else was not written by us.
pub fn is_thread_path(path: &str) -> bool {
    let segments: Vec<&str> = path.split('.').collect();
    let hex = |s: &&str| s.len() == 32 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    segments.len() <= MAX_DEPTH as usize + 1 && segments.iter().all(hex)
}

/// A comment. `depth` is 0 for a top-level comment and its parent's depth + 1 for a reply.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
#[schema(example = json!({
    "id": "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "article_id": "art-000001",
    "parent_id": null, "author_id": "user-42", "text": "Good read.",
    "depth": 0, "created_at": "2026-11-21T09:30:00Z"
}))]
pub struct Comment {
    /// A UUIDv7.
    pub id: Uuid,
    pub article_id: String,
    /// The comment this one replies to; null for a top-level comment.
    #[schema(required = true)]
    pub parent_id: Option<Uuid>,
    /// The `sub` of the token that wrote it.
    pub author_id: String,
    /// Trimmed, 1..=10,000 characters.
    pub text: String,
    #[schema(minimum = 0, maximum = 10)]
    pub depth: i16,
    pub created_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use shared_auth::ErrorCode as _;

    use super::*;

    #[test]
    fn text_rules() {
        let table: [(String, Result<String, &str>); 9] = [
            ("hello".into(), Ok("hello".into())),
            ("  padded \n".into(), Ok("padded".into())),
            (String::new(), Err("must not be empty")),
            (" \t\n ".into(), Err("must not be empty")),
            ("a".repeat(10_000), Ok("a".repeat(10_000))),
            ("a".repeat(10_001), Err("must be at most 10000 characters")),
            // 10,000 two-byte characters are 20,000 bytes but still within the limit.
            ("é".repeat(10_000), Ok("é".repeat(10_000))),
            (
                "a\0b".into(),
                Err("must not contain the NUL character (U+0000)"),
            ),
            // U+001C is not white space to Rust (nor to the document's pattern): it is text.
            ("\u{1c}".into(), Ok("\u{1c}".into())),
        ];
        for (input, expected) in table {
            let got = validate_text(&input).map_err(|e| e.message);
            assert_eq!(
                got,
                expected.map_err(str::to_owned),
                "input of {} chars",
                input.chars().count()
            );
        }
    }

    #[test]
    fn placement_rules() {
        let id = Uuid::now_v7();
        let parent = |article: &str, depth: i16| ParentRef {
            article_id: article.into(),
            depth,
            path: "p".repeat(32),
        };
        assert_eq!(
            placement(id, "a1", None).ok(),
            Some((0, id.simple().to_string()))
        );
        assert_eq!(
            placement(id, "a1", Some(&parent("a1", 0)))
                .ok()
                .map(|p| p.0),
            Some(1)
        );
        assert_eq!(
            placement(id, "a1", Some(&parent("a1", 9)))
                .ok()
                .map(|p| p.0),
            Some(10)
        );
        let code = |r: Result<(i16, String), ErrorCode>| r.map_err(|c| c.code().to_owned()).err();
        assert_eq!(
            code(placement(id, "a1", Some(&parent("a1", 10)))).as_deref(),
            Some("max_depth_exceeded")
        );
        assert_eq!(
            code(placement(id, "a1", Some(&parent("a2", 0)))).as_deref(),
            Some("parent_article_mismatch")
        );
    }

    #[test]
    fn thread_paths_are_what_placement_writes() {
        let mut path = placement(Uuid::now_v7(), "a", None).unwrap_or_default().1;
        assert!(is_thread_path(&path));
        for depth in 0..MAX_DEPTH {
            let parent = ParentRef {
                article_id: "a".into(),
                depth,
                path: path.clone(),
            };
            path = placement(Uuid::now_v7(), "a", Some(&parent))
                .unwrap_or_default()
                .1;
            assert!(is_thread_path(&path), "{path}");
        }
        let segment = "0".repeat(32);
        let too_deep = format!("{path}.{segment}");
        let upper = "A".repeat(32);
        for bad in [
            "",
            ".",
            "abc",
            &too_deep,
            &upper,
            &format!("{segment}."),
            &format!("{segment}..{segment}"),
        ] {
            assert!(!is_thread_path(bad), "{bad}");
        }
    }

    #[test]
    fn the_depth_refusal_names_the_limit() {
        let limit = format!("at most {MAX_DEPTH} levels");
        assert!(ErrorCode::MaxDepthExceeded.detail().contains(&limit));
    }

    #[test]
    fn thread_paths_sort_parents_before_children_and_siblings_by_age() {
        let root = Uuid::now_v7();
        let (_, root_path) = placement(root, "a", None).unwrap_or_default();
        let parent = ParentRef {
            article_id: "a".into(),
            depth: 0,
            path: root_path.clone(),
        };
        let first_reply = placement(Uuid::now_v7(), "a", Some(&parent))
            .unwrap_or_default()
            .1;
        let later_root = placement(Uuid::now_v7(), "a", None).unwrap_or_default().1;
        let mut paths = vec![later_root.clone(), first_reply.clone(), root_path.clone()];
        paths.sort();
        assert_eq!(paths, vec![root_path, first_reply, later_root]);
    }
}
