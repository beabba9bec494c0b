//! The shapes several endpoints answer with: an article item (lists, bookmarks, feed), an
//! article, a page of articles, an organisation or journalist (directory and `/me/following`),
//! a comment, and a page of any other list with its cursor. A leaf for the route modules, so
//! none of them imports another.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared_auth::{Page, Paging};
use sqlx::FromRow;
use utoipa::ToSchema;
use uuid::Uuid;

/// An organisation or journalist as an article names it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, ToSchema)]
pub struct Named {
    pub id: String,
    pub name: String,
}

/// The caller's relation to an article (only for a caller with a valid token).
#[derive(Debug, Clone, Serialize, PartialEq, Eq, ToSchema)]
pub struct ArticleViewer {
    pub liked: bool,
    pub bookmarked: bool,
    pub following_journalist: bool,
    pub following_organization: bool,
}

/// An article in a list (no body). Counts are exact: they equal the rows they count.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(example = json!({
    "id": "art-000001", "title": "Harbour Council Approves Night Ferry",
    "summary": "The council voted 7-2 for a trial service.",
    "url": "https://news.example/articles/art-000001", "published_at": "2026-11-21T09:30:00Z",
    "organization": {"id": "org-001", "name": "Harbour Herald"},
    "journalist": {"id": "jrn-0001", "name": "Ada Byrne"},
    "organization_id": "org-001", "journalist_id": "jrn-0001",
    "like_count": 12, "bookmark_count": 3, "comment_count": 5,
    "viewer": {"liked": true, "bookmarked": false, "following_journalist": false,
               "following_organization": true}
}))]
pub struct ArticleItem {
    pub id: String,
    pub title: String,
    pub summary: String,
    pub url: String,
    pub published_at: DateTime<Utc>,
    pub organization: Named,
    pub journalist: Named,
    pub organization_id: String,
    pub journalist_id: String,
    #[schema(minimum = 0)]
    pub like_count: i64,
    #[schema(minimum = 0)]
    pub bookmark_count: i64,
    /// Every comment of the article, replies included.
    #[schema(minimum = 0)]
    pub comment_count: i64,
    /// The caller's relation to the article; null without a token.
    #[schema(required = true)]
    pub viewer: Option<ArticleViewer>,
}

/// One article: the list item plus its `body`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Article {
    #[serde(flatten)]
    pub item: ArticleItem,
    pub body: String,
}

/// A page of articles: offset paging fields plus the keyset `next_cursor`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ArticlePage {
    pub data: Vec<ArticleItem>,
    /// Number of items in `data`.
    #[schema(minimum = 0)]
    pub count: usize,
    #[schema(minimum = 1, maximum = 100)]
    pub limit: i64,
    #[schema(minimum = 0)]
    pub offset: i64,
    /// `offset + count` when more items follow an offset page; null at the end and on cursor pages.
    #[schema(required = true)]
    pub next_offset: Option<i64>,
    /// Opaque: pass it as `cursor` to continue the same list and filters; null at the end.
    #[schema(required = true)]
    pub next_cursor: Option<String>,
}

/// A page of a list with offset and keyset paging (comments, organisations, journalists): the
/// same fields as [`ArticlePage`].
#[derive(Debug, Serialize, ToSchema)]
pub struct CursorPage<T> {
    pub data: Vec<T>,
    /// Number of items in `data`.
    #[schema(minimum = 0)]
    pub count: usize,
    #[schema(minimum = 1, maximum = 100)]
    pub limit: i64,
    #[schema(minimum = 0)]
    pub offset: i64,
    /// `offset + count` when more items follow an offset page; null at the end and on cursor pages.
    #[schema(required = true)]
    pub next_offset: Option<i64>,
    /// Opaque: pass it as `cursor` to continue the same list and filters; null at the end.
    #[schema(required = true)]
    pub next_cursor: Option<String>,
}

impl<T> CursorPage<T> {
    /// The page of rows fetched with `LIMIT paging.fetch_limit()`, read from a cursor or not;
    /// `cursor_after` writes the cursor that continues after a row (the page's last).
    pub fn from_rows(
        rows: Vec<T>,
        paging: Paging,
        by_cursor: bool,
        cursor_after: impl FnOnce(&T) -> String,
    ) -> Self {
        let page = Page::from_rows(rows, paging);
        let next_cursor = page
            .next_offset
            .and_then(|_| page.data.last())
            .map(cursor_after);
        Self {
            data: page.data,
            count: page.count,
            limit: page.limit,
            offset: page.offset,
            // A cursor page has no absolute position: continue with `next_cursor`.
            next_offset: if by_cursor { None } else { page.next_offset },
            next_cursor,
        }
    }

    pub fn map<U>(self, f: impl FnMut(T) -> U) -> CursorPage<U> {
        CursorPage {
            data: self.data.into_iter().map(f).collect(),
            count: self.count,
            limit: self.limit,
            offset: self.offset,
            next_offset: self.next_offset,
            next_cursor: self.next_cursor,
        }
    }
}

impl From<CursorPage<ArticleItem>> for ArticlePage {
    fn from(page: CursorPage<ArticleItem>) -> Self {
        Self {
            data: page.data,
            count: page.count,
            limit: page.limit,
            offset: page.offset,
            next_offset: page.next_offset,
            next_cursor: page.next_cursor,
        }
    }
}

/// Whether the caller follows this organisation or journalist.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, ToSchema)]
pub struct FollowViewer {
    pub following: bool,
}

/// A news organisation.
#[derive(Debug, Clone, Serialize, FromRow, ToSchema)]
#[schema(example = json!({
    "id": "org-001", "name": "Harbour Herald", "url": "https://harbour-herald.example",
    "follower_count": 21, "viewer": {"following": true}
}))]
pub struct Organization {
    pub id: String,
    pub name: String,
    pub url: String,
    #[schema(minimum = 0)]
    pub follower_count: i64,
    /// `{following}` for a caller with a valid token; null without one.
    #[sqlx(try_from = "Option<bool>")]
    #[schema(value_type = Option<FollowViewer>, required = true)]
    pub viewer: Viewer,
}

/// A journalist.
#[derive(Debug, Clone, Serialize, FromRow, ToSchema)]
#[schema(example = json!({
    "id": "jrn-0001", "name": "Ada Byrne", "organization_id": "org-001",
    "follower_count": 8, "viewer": null
}))]
pub struct Journalist {
    pub id: String,
    pub name: String,
    pub organization_id: String,
    #[schema(minimum = 0)]
    pub follower_count: i64,
    /// `{following}` for a caller with a valid token; null without one.
    #[sqlx(try_from = "Option<bool>")]
    #[schema(value_type = Option<FollowViewer>, required = true)]
    pub viewer: Viewer,
}

/// `{following}` for a caller, null for an anonymous reader (the column is NULL then).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Viewer(pub Option<FollowViewer>);

impl From<Option<bool>> for Viewer {
    fn from(following: Option<bool>) -> Self {
        Self(following.map(|following| FollowViewer { following }))
    }
}

/// A comment. `depth` is 0 for a top-level comment and its parent's depth + 1 for a reply.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
#[schema(example = json!({
    "id": "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "article_id": "art-000001",
    "parent_id": null, "author_id": "user-42", "text": "A night ferry at last.",
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

/// Which field of an article a highlight is from.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum HighlightField {
    Title,
    Summary,
    Body,
}

/// A fragment of one field with the words the query matched in it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, ToSchema)]
#[schema(example = json!({"field": "title", "text": "Harbour strike ends after 12 days",
    "marks": [[0, 7], [8, 14]]}))]
pub struct Highlight {
    pub field: HighlightField,
    /// A piece of the field as written, at most 200 characters (Unicode code points).
    #[schema(min_length = 1, max_length = 200)]
    pub text: String,
    /// The matched words of `text` as `[start, end)` pairs counted in Unicode code points (not
    /// bytes, not UTF-16 units), in order.
    #[schema(value_type = Vec<Vec<u32>>, min_items = 1)]
    pub marks: Vec<[usize; 2]>,
}

/// A search match: the article as lists show it, its score and its highlights.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SearchHit {
    #[serde(flatten)]
    pub item: ArticleItem,
    /// Higher is better: with `sort=relevance`, 3 when the title matches, 2 the summary, 1 the
    /// body; 0 for a match older than the ranked window and for `sort=newest`.
    #[schema(minimum = 0, maximum = 3)]
    pub score: f64,
    /// Up to 3, at most one per field, in the order title, summary, body.
    #[schema(max_items = 3)]
    pub highlights: Vec<Highlight>,
}

/// A page of search matches.
#[derive(Debug, Serialize, ToSchema)]
pub struct SearchPage {
    pub data: Vec<SearchHit>,
    /// Number of items in `data`.
    #[schema(minimum = 0)]
    pub count: usize,
    /// Opaque: pass it as `cursor` (with the same `q`) for the next page; null at the end.
    #[schema(required = true)]
    pub next_cursor: Option<String>,
    /// When nothing matches: `q` respelt from the words of the articles (`electon` →
    /// `election`), if some word is close to one of them; else null.
    #[schema(required = true)]
    pub suggestion: Option<String>,
}
