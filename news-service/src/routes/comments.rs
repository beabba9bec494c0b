//! Comments: create (with `Idempotency-Key`), read one, and an article's comments in thread order.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared_auth::{Json, OptionalCaller, Page, Paging, Problem, Query, RequiredCaller};
use sqlx::{FromRow, PgPool, Postgres, Transaction};
use uuid::Uuid;

use crate::AppState;
use crate::cache::json_read;
use crate::domain::comments::{ParentRef, placement, validate_text};
use crate::error::Result;
use crate::idempotency::{self, IdempotencyKey, Stored};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/comments", post(create_comment))
        .route("/comments/{comment_id}", get(get_comment))
        .route("/articles/{article_id}/comments", get(list_comments))
}

#[derive(Debug, Clone, Serialize, Deserialize, FromRow, PartialEq, Eq)]
pub struct Comment {
    pub id: Uuid,
    pub article_id: String,
    pub parent_id: Option<Uuid>,
    pub author_id: String,
    pub text: String,
    pub depth: i16,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct CommentInput {
    article_id: String,
    text: String,
    /// Absent or null: a top-level comment. Ids are opaque strings, so anything that is not an
    /// existing comment's id (a non-UUID included) is `unknown_parent`.
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

async fn create_comment(
    State(state): State<AppState>,
    RequiredCaller(caller): RequiredCaller,
    headers: HeaderMap,
    Json(input): Json<CommentInput>,
) -> Result<Response> {
    let key = IdempotencyKey::from_headers(&headers)?;
    let text = validate_text(&input.text).map_err(|e| Problem::validation(vec![e]))?;
    let mut tx = state.pools.primary.begin().await?;
    let scope = match &key {
        Some(key) => {
            let request_hash = idempotency::request_hash(&input);
            match idempotency::begin(&mut tx, &caller.sub, key, &request_hash).await? {
                idempotency::Begin::Replay(stored) => return Ok(stored.replay()),
                idempotency::Begin::Fresh => Some((key, request_hash)),
            }
        }
        None => None,
    };
    let comment = insert_comment(&mut tx, &caller.sub, &input, text).await?;
    if let Some((key, request_hash)) = scope {
        let stored = Stored {
            status: StatusCode::CREATED,
            location: Some(location_of(comment.id)),
            body: serde_json::to_value(&comment).map_err(|_| Problem::internal())?,
        };
        idempotency::store(&mut tx, &caller.sub, key, &request_hash, &stored).await?;
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
    let article_exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM articles WHERE id = $1)")
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

async fn get_comment(
    State(state): State<AppState>,
    OptionalCaller(caller): OptionalCaller,
    headers: HeaderMap,
    Path(comment_id): Path<String>,
) -> Result<Response> {
    let not_found =
        || Problem::not_found("comment_not_found").with_detail("no comment has this id");
    let id = Uuid::parse_str(&comment_id).map_err(|_| not_found())?;
    let pool = state.pools.for_reader(caller.is_some());
    let sql = format!("SELECT {COMMENT_COLUMNS} FROM comments WHERE id = $1");
    let comment: Comment = sqlx::query_as(&sql)
        .bind(id)
        .fetch_optional(pool)
        .await?
        .ok_or_else(not_found)?;
    Ok(json_read(&headers, caller.is_some(), &comment))
}

#[derive(Debug, Deserialize)]
struct PageQuery {
    limit: Option<i64>,
    offset: Option<i64>,
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

async fn list_comments(
    State(state): State<AppState>,
    OptionalCaller(caller): OptionalCaller,
    headers: HeaderMap,
    Path(article_id): Path<String>,
    Query(query): Query<PageQuery>,
) -> Result<Response> {
    let paging = Paging::new(query.limit, query.offset)?;
    let pool = state.pools.for_reader(caller.is_some());
    let page = thread_page(pool, &article_id, paging).await?;
    if page.count == 0 {
        let exists: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM articles WHERE id = $1)")
                .bind(&article_id)
                .fetch_one(pool)
                .await?;
        if !exists {
            return Err(Problem::not_found("article_not_found")
                .with_detail("no article has this id")
                .into());
        }
    }
    Ok(json_read(&headers, caller.is_some(), &page))
}
