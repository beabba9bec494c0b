//! Comments: create (with `Idempotency-Key`), read one, and an article's comments in thread order.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared_auth::{Json, OptionalCaller, Page, PageQuery, Paging, Problem, Query, RequiredCaller};
use sqlx::{FromRow, PgPool, Postgres, Transaction};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::AppState;
use crate::cache::json_read;
use crate::domain::comments::{ParentRef, placement, validate_text};
use crate::domain::ids::can_exist;
use crate::error::Result;
use crate::idempotency::{self, Begin};
use crate::openapi::{
    ArticleNotFound, BadCommentRequest, BadPath, BadPathOrQuery, CommentNotFound, CommentRejected,
    IdempotencyInUse, Internal, NotModified, PayloadTooLarge, Unauthorized, Unavailable,
    UnsupportedMediaType,
};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/comments", post(create_comment))
        .route("/comments/{comment_id}", get(get_comment))
        .route("/articles/{article_id}/comments", get(list_comments))
}

/// A comment. `depth` is 0 for a top-level comment and its parent's depth + 1 for a reply.
#[derive(Debug, Clone, Serialize, Deserialize, FromRow, PartialEq, Eq, ToSchema)]
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

/// A new comment. `text` is trimmed; empty after trimming, or over 10,000 characters, is 422.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"article_id": "art-000001", "text": "A night ferry at last.", "parent_id": null}))]
pub struct CommentInput {
    /// An existing article (else 422 `unknown_article`).
    #[schema(min_length = 1)]
    article_id: String,
    /// At least one character that is not white space (Unicode `White_Space`, what the server
    /// trims), at most 10,000 characters, no U+0000. The whole body is limited to 16 KiB, so
    /// long texts of multi-byte characters can meet 413 first.
    // The pattern's middle class is exactly what `str::trim` removes (`char::is_whitespace`)
    // plus U+0000, so the schema and the server agree; a unit test below keeps it so.
    #[schema(
        min_length = 1,
        max_length = 10000,
        pattern = r"^[^\u0000]*[^\u0000\u0009-\u000D\u0020\u0085\u00A0\u1680\u2000-\u200A\u2028-\u2029\u202F\u205F\u3000][^\u0000]*$"
    )]
    text: String,
    /// Absent or null: a top-level comment. Else an existing comment of the same article (422
    /// `unknown_parent` / `parent_article_mismatch`), at depth below 10 (422
    /// `max_depth_exceeded`). Ids are opaque strings, so anything that is not an existing
    /// comment's id (a non-UUID included) is `unknown_parent`.
    #[serde(default)]
    parent_id: Option<String>,
}

const COMMENT_COLUMNS: &str = "id, article_id, parent_id, author_id, text, depth, created_at";

fn location_of(id: Uuid) -> String {
    format!("/v1/news/comments/{id}")
}

fn created(comment: &Comment) -> Response {
    let location = HeaderValue::from_str(&location_of(comment.id)).ok();
    let mut response = (StatusCode::CREATED, axum::Json(comment)).into_response();
    if let Some(location) = location {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
}

/// Write a comment (or a reply), optionally idempotent with `Idempotency-Key`.
#[utoipa::path(
    post,
    path = "/v1/news/comments",
    operation_id = "news_create_comment",
    tag = "news-comments",
    params(crate::openapi::IdempotencyKeyHeader),
    request_body = CommentInput,
    security(("bearer" = [])),
    responses(
        (status = 201, description = "The comment was created (or, with `Idempotency-Replayed: true`, \
            the first answer to this `Idempotency-Key` is replayed).", body = Comment,
            links(
                ("GetComment" = (operation_id = "news_get_comment",
                    parameters(("comment_id" = "$response.body#/id")))),
                ("ListComments" = (operation_id = "news_list_comments",
                    parameters(("article_id" = "$response.body#/article_id")))),
            ),
            headers(
                ("Location" = String, description = "`/v1/news/comments/{id}`."),
                ("Idempotency-Replayed" = String, description = "`true` on a replayed answer; absent otherwise."),
            )),
        (status = 400, response = inline(BadCommentRequest)),
        (status = 401, response = inline(Unauthorized)),
        (status = 409, response = inline(IdempotencyInUse)),
        (status = 413, response = inline(PayloadTooLarge)),
        (status = 415, response = inline(UnsupportedMediaType)),
        (status = 422, response = inline(CommentRejected)),
        (status = 500, response = inline(Internal)),
        (status = 503, response = inline(Unavailable)),
    )
)]
async fn create_comment(
    State(state): State<AppState>,
    RequiredCaller(caller): RequiredCaller,
    headers: HeaderMap,
    Json(input): Json<CommentInput>,
) -> Result<Response> {
    let key = idempotency::key_from_headers(&headers)?;
    let text = validate_text(&input.text).map_err(|e| Problem::validation(vec![e]))?;
    let request_hash = idempotency::request_hash(&input);
    let mut tx = state.pools.primary.begin().await?;
    if let Some(key) = &key
        && let Begin::Replay(stored) =
            idempotency::begin(&mut tx, &caller.sub, key, &request_hash).await?
    {
        return Ok(stored.into_response());
    }
    let comment = insert_comment(&mut tx, &caller.sub, &input, text).await?;
    if let Some(key) = &key {
        // Stored as the bytes `created` sends, so a replay is the same answer byte for byte.
        let body = serde_json::to_vec(&comment).map_err(|_| Problem::internal())?;
        let location = location_of(comment.id);
        idempotency::complete(
            &mut tx,
            &caller.sub,
            key,
            &request_hash,
            StatusCode::CREATED,
            &body,
            Some(&location),
        )
        .await?;
    }
    tx.commit().await?;
    Ok(created(&comment))
}

/// Checks the comment against the rows it refers to and inserts it. Comments and articles are
/// never deleted at run time, so what is read here still holds at commit.
async fn insert_comment(
    tx: &mut Transaction<'static, Postgres>,
    author: &str,
    input: &CommentInput,
    text: String,
) -> Result<Comment> {
    let article_exists = can_exist(&input.article_id)
        && sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM articles WHERE id = $1)")
            .bind(&input.article_id)
            .fetch_one(&mut **tx)
            .await?;
    if !article_exists {
        return Err(Problem::unprocessable(
            "unknown_article",
            "article_id",
            "no article has this id",
        )
        .into());
    }
    let parent = match &input.parent_id {
        None => None,
        Some(parent_id) => Some(find_parent(tx, parent_id).await?),
    };
    let id = Uuid::now_v7();
    let (depth, path) = placement(id, &input.article_id, parent.as_ref().map(|(_, p)| p))?;
    // created_at is the UUIDv7's own timestamp, so `created_at` order and thread order agree.
    let created_at = created_at_of(id);
    let sql = format!(
        "INSERT INTO comments (id, article_id, parent_id, author_id, text, depth, path, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING {COMMENT_COLUMNS}"
    );
    let comment = sqlx::query_as::<_, Comment>(&sql)
        .bind(id)
        .bind(&input.article_id)
        .bind(parent.map(|(id, _)| id))
        .bind(author)
        .bind(text)
        .bind(depth)
        .bind(path)
        .bind(created_at)
        .fetch_one(&mut **tx)
        .await?;
    Ok(comment)
}

fn created_at_of(id: Uuid) -> DateTime<Utc> {
    id.get_timestamp()
        .and_then(|ts| {
            let (secs, nanos) = ts.to_unix();
            DateTime::from_timestamp(secs as i64, nanos)
        })
        .unwrap_or_else(Utc::now)
}

async fn find_parent(
    tx: &mut Transaction<'static, Postgres>,
    parent_id: &str,
) -> Result<(Uuid, ParentRef)> {
    let unknown =
        || Problem::unprocessable("unknown_parent", "parent_id", "no comment has this id");
    let id = Uuid::parse_str(parent_id).map_err(|_| unknown())?;
    let row: Option<(String, i16, String)> =
        sqlx::query_as("SELECT article_id, depth, path FROM comments WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut **tx)
            .await?;
    let (article_id, depth, path) = row.ok_or_else(unknown)?;
    Ok((
        id,
        ParentRef {
            article_id,
            depth,
            path,
        },
    ))
}

/// One comment; cacheable like the article reads.
#[utoipa::path(
    get,
    path = "/v1/news/comments/{comment_id}",
    operation_id = "news_get_comment",
    tag = "news-comments",
    params(("comment_id" = String, Path, min_length = 1, description = "A comment id (a UUIDv7; any other string is an unknown comment)."), crate::openapi::IfNoneMatch),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "The comment.", body = Comment,
            headers(
                ("Cache-Control" = String, description = "`public, max-age=30` anonymous, `private, no-store` with a token."),
                ("ETag" = String, description = "Strong validator; anonymous answers only."),
                ("Vary" = String, description = "`authorization`."),
            )),
        (status = 304, response = inline(NotModified)),
        (status = 400, response = inline(BadPath)),
        (status = 401, response = inline(Unauthorized)),
        (status = 404, response = inline(CommentNotFound)),
        (status = 500, response = inline(Internal)),
        (status = 503, response = inline(Unavailable)),
    )
)]
async fn get_comment(
    State(state): State<AppState>,
    OptionalCaller(caller): OptionalCaller,
    headers: HeaderMap,
    Path(comment_id): Path<String>,
) -> Result<Response> {
    let not_found =
        || Problem::not_found("comment_not_found").with_detail("no comment has this id");
    let id = Uuid::parse_str(&comment_id).map_err(|_| not_found())?;
    let sql = format!("SELECT {COMMENT_COLUMNS} FROM comments WHERE id = $1");
    let sql = sql.as_str();
    let comment: Comment = state
        .pools
        .read(caller.is_some(), |pool| async move {
            sqlx::query_as(sql).bind(id).fetch_optional(&pool).await
        })
        .await?
        .ok_or_else(not_found)?;
    Ok(json_read(&headers, caller.is_some(), &comment))
}

async fn article_exists(pool: &PgPool, article_id: &str) -> Result<bool> {
    let exists = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM articles WHERE id = $1)")
        .bind(article_id)
        .fetch_one(pool)
        .await?;
    Ok(exists)
}

/// An article's comments in thread order: one range scan of the `(article_id, path)` index.
pub async fn thread_page(pool: &PgPool, article_id: &str, paging: Paging) -> Result<Page<Comment>> {
    let sql = format!(
        "SELECT {COMMENT_COLUMNS} FROM comments WHERE article_id = $1 ORDER BY path LIMIT $2 OFFSET $3"
    );
    let rows: Vec<Comment> = sqlx::query_as(&sql)
        .bind(article_id)
        .bind(paging.fetch_limit())
        .bind(paging.offset)
        .fetch_all(pool)
        .await?;
    Ok(Page::from_rows(rows, paging))
}

/// An article's comments in thread order: each top-level comment oldest first, followed
/// depth-first by its replies, oldest first.
#[utoipa::path(
    get,
    path = "/v1/news/articles/{article_id}/comments",
    operation_id = "news_list_comments",
    tag = "news-comments",
    params(("article_id" = String, Path, min_length = 1, max_length = 255, example = "art-000001", description = "An article id (opaque, 1..=255 characters)."), PageQuery, crate::openapi::IfNoneMatch),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "A page of comments.", body = Page<Comment>,
            headers(
                ("Cache-Control" = String, description = "`public, max-age=30` anonymous, `private, no-store` with a token."),
                ("ETag" = String, description = "Strong validator; anonymous answers only."),
                ("Vary" = String, description = "`authorization`."),
            )),
        (status = 304, response = inline(NotModified)),
        (status = 400, response = inline(BadPathOrQuery)),
        (status = 401, response = inline(Unauthorized)),
        (status = 404, response = inline(ArticleNotFound)),
        (status = 500, response = inline(Internal)),
        (status = 503, response = inline(Unavailable)),
    )
)]
async fn list_comments(
    State(state): State<AppState>,
    OptionalCaller(caller): OptionalCaller,
    headers: HeaderMap,
    Path(article_id): Path<String>,
    Query(query): Query<PageQuery>,
) -> Result<Response> {
    let paging = Paging::new(query.limit, query.offset)?;
    let not_found =
        || Problem::not_found("article_not_found").with_detail("no article has this id");
    if !can_exist(&article_id) {
        return Err(not_found().into());
    }
    let article = article_id.as_str();
    let (page, exists) = state
        .pools
        .read(caller.is_some(), |pool| async move {
            let page = thread_page(&pool, article, paging).await?;
            // An empty page is a 404 when the article itself does not exist (same node).
            let exists = page.count > 0 || article_exists(&pool, article).await?;
            Ok::<_, crate::error::Error>((page, exists))
        })
        .await?;
    if !exists {
        return Err(not_found().into());
    }
    Ok(json_read(&headers, caller.is_some(), &page))
}

#[cfg(test)]
mod tests {
    use utoipa::PartialSchema;

    /// `char::is_whitespace` as regex escapes, consecutive characters joined into ranges.
    fn whitespace_class() -> String {
        let chars: Vec<u32> = (0..=u32::from(char::MAX))
            .filter(|c| char::from_u32(*c).is_some_and(char::is_whitespace))
            .collect();
        let mut class = String::new();
        let mut i = 0;
        while i < chars.len() {
            let mut j = i;
            while j + 1 < chars.len() && chars[j + 1] == chars[j] + 1 {
                j += 1;
            }
            class.push_str(&format!("\\u{:04X}", chars[i]));
            if j > i {
                class.push_str(&format!("-\\u{:04X}", chars[j]));
            }
            i = j + 1;
        }
        class
    }

    #[test]
    fn the_text_pattern_matches_what_the_server_trims() {
        let schema = serde_json::to_value(super::CommentInput::schema()).expect("serialises");
        let expected = format!("^[^\\u0000]*[^\\u0000{}][^\\u0000]*$", whitespace_class());
        assert_eq!(schema["properties"]["text"]["pattern"], expected);
    }
}
