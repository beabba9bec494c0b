//! Articles as clients see them: an item of a list (lists, bookmarks, feed, search), one article
//! with its body, and a page of articles.

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use crate::domain::cursor::CursorPage;

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
    "id": "art-000001", "title": "3 things to know about the new rent control rules",
    "summary": "Ines Hoffman reports on rent control in Posfield: what changed, who is affected, and what comes next.",
    "url": "https://news.example/articles/art-000001", "published_at": "2025-04-05T16:53:00Z",
    "organization": {"id": "org-001", "name": "The Morning Ledger"},
    "journalist": {"id": "jrn-0021", "name": "Ines Hoffman"},
    "organization_id": "org-001", "journalist_id": "jrn-0021",
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
