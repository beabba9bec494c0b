//! Comments: create (with `Idempotency-Key`), read one, and an article's comments in thread order.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared_auth::{FieldError, FieldRules, Json, OptionalCaller, Problem, Query, RequiredCaller};
use sqlx::PgConnection;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::domain::comments::{Comment, placement, validate_text};
use crate::domain::cursor::{CursorPage, CursorPageQuery, ListKind, ThreadCursor};
use crate::domain::ids::can_exist;
use crate::error::{Error, ErrorCode, Result};
use crate::idempotency::{self, Created, IdempotencyKeyHeader, idempotent_create};
use crate::path_params::ArticleIdPath;
use crate::problems::{CommentProblems, CommentThreadProblems, CreateCommentProblems};
use crate::state::{AppState, Db};
use crate::store::articles;
use crate::store::comments::{self as store, NewComment};
use shared_auth::http::cache::{IfNoneMatch, json_read};
use shared_auth::http::path_id::{PathId, created_id};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_comments))
        .routes(routes!(create_comment))
        .routes(routes!(get_comment))
}

/// A new comment. `text` is trimmed; empty after trimming, or over 10,000 characters, is 422.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"article_id": "art-000001", "text": "Good read.", "parent_id": null}))]
pub struct CommentInput {
    /// An existing article (else 422 `unknown_article`).
    #[schema(min_length = 1)]
    article_id: String,
    /// At least one character that is not white space (Unicode `White_Space`, what the server
    /// trims), at most 10,000 characters, no U+0000. The whole body is limited to 128 KiB:
    /// room for the longest text in any script and JSON encoding (10,000 escaped emoji).
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

impl FieldRules for CommentInput {
    fn broken_rules(&self, stand_in: &dyn Fn(&str) -> bool) -> Vec<FieldError> {
        match validate_text(&self.text) {
            Err(error) if !stand_in("text") => vec![error],
            _ => Vec::new(),
        }
    }
}

/// An article's comments in thread order: each top-level comment oldest first, followed
/// depth-first by its replies, oldest first.
///
/// Walk a whole thread with `cursor` (every comment once, however long the thread; comments
/// written during the walk show up at most once: those placed after the walker's position);
/// `offset` only reaches the first 10,000. A cursor belongs to its article: another article's
/// cursor, or another list's, is 400 `invalid_cursor`.
#[utoipa::path(
    get,
    path = "/articles/{article_id}/comments",
    operation_id = "news_list_comments",
    tag = "news-comments",
    params(ArticleIdPath, CursorPageQuery, IfNoneMatch),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "A page of comments.", body = CursorPage<Comment>,
            links(
                ("NextPage" = (operation_id = "news_list_comments",
                    parameters(("article_id" = "$request.path.article_id"),
                        ("cursor" = "$response.body#/next_cursor")))),
            ),
            headers(
                ("Cache-Control" = String, description = "`public, max-age=30` anonymous, `private, no-store` with a token."),
                ("ETag" = String, description = "Strong validator; anonymous answers only."),
                ("Vary" = String, description = "`authorization`."),
            )),
        CommentThreadProblems,
    )
)]
async fn list_comments(
    State(db): State<Db>,
    OptionalCaller(caller): OptionalCaller,
    headers: HeaderMap,
    PathId(article_id): PathId,
    Query(query): Query<CursorPageQuery>,
) -> Result<Response> {
    let paging = query.keyset_paging::<ThreadCursor>(ListKind::Comments)?;
    if let Some(cursor) = &paging.after {
        cursor.check_article(&article_id).map_err(Problem::from)?;
    }
    if !can_exist(&article_id) {
        return Err(ErrorCode::ArticleNotFound.into());
    }
    let (article, paging) = (article_id.as_str(), &paging);
    let (page, exists) = db
        .read(caller.is_some(), |pool| async move {
            let page = store::thread_page(&pool, article, paging).await?;
            // An empty page is either an article without comments or no article at all
            // (asked of the same node).
            let exists = page.count > 0 || articles::exists(&pool, article).await?;
            Ok::<_, Error>((page, exists))
        })
        .await?;
    if !exists {
        return Err(ErrorCode::ArticleNotFound.into());
    }
    Ok(json_read(&headers, caller.is_some(), &page))
}

/// Write a comment (or a reply), optionally idempotent with `Idempotency-Key`.
#[utoipa::path(
    post,
    path = "/comments",
    operation_id = "news_create_comment",
    tag = "news-comments",
    params(IdempotencyKeyHeader),
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
        CreateCommentProblems,
    )
)]
async fn create_comment(
    State(db): State<Db>,
    RequiredCaller(caller): RequiredCaller,
    headers: HeaderMap,
    Json(input): Json<CommentInput>,
) -> Result<Response> {
    let key = idempotency::key_from_headers(&headers)?;
    let text = validate_text(&input.text).map_err(|e| Problem::validation(vec![e]))?;
    idempotent_create(
        &db.primary,
        &caller.sub,
        key.as_deref(),
        &input,
        async |tx| {
            let comment = insert_comment(tx, &caller.sub, &input, &text).await?;
            let location = format!("/v1/news/comments/{}", comment.id);
            Ok(Created {
                body: comment,
                location,
            })
        },
    )
    .await
}

/// Checks the comment against the rows it refers to and inserts it.
async fn insert_comment(
    tx: &mut PgConnection,
    author: &str,
    input: &CommentInput,
    text: &str,
) -> Result<Comment> {
    if !articles::exists(&mut *tx, &input.article_id).await? {
        return Err(ErrorCode::UnknownArticle.into());
    }
    let parent = match &input.parent_id {
        None => None,
        Some(parent_id) => {
            // Ids are opaque strings: one not written as we write ours names no comment.
            let id = created_id(parent_id).ok_or(ErrorCode::UnknownParent)?;
            let parent = store::find_parent(&mut *tx, id).await?;
            Some((id, parent.ok_or(ErrorCode::UnknownParent)?))
        }
    };
    let id = Uuid::now_v7();
    let (depth, path) = placement(id, &input.article_id, parent.as_ref().map(|(_, p)| p))?;
    let new = NewComment {
        id,
        article_id: &input.article_id,
        parent_id: parent.map(|(id, _)| id),
        author_id: author,
        text,
        depth,
        path: &path,
        // The UUIDv7's own timestamp, so `created_at` order and thread order agree.
        created_at: created_at_of(id),
    };
    store::insert(&mut *tx, &new).await
}

fn created_at_of(id: Uuid) -> DateTime<Utc> {
    id.get_timestamp()
        .and_then(|ts| {
            let (secs, nanos) = ts.to_unix();
            DateTime::from_timestamp(secs as i64, nanos)
        })
        .unwrap_or_else(Utc::now)
}

/// One comment; cacheable like the article reads.
#[utoipa::path(
    get,
    path = "/comments/{comment_id}",
    operation_id = "news_get_comment",
    tag = "news-comments",
    params(("comment_id" = String, Path, min_length = 1, description = "A comment id (a UUIDv7; any other string is an unknown comment)."), IfNoneMatch),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "The comment.", body = Comment,
            headers(
                ("Cache-Control" = String, description = "`public, max-age=30` anonymous, `private, no-store` with a token."),
                ("ETag" = String, description = "Strong validator; anonymous answers only."),
                ("Vary" = String, description = "`authorization`."),
            )),
        CommentProblems,
    )
)]
async fn get_comment(
    State(db): State<Db>,
    OptionalCaller(caller): OptionalCaller,
    headers: HeaderMap,
    PathId(comment_id): PathId,
) -> Result<Response> {
    // Ids are opaque strings: one not written as we write ours names no comment.
    let id = created_id(&comment_id).ok_or(ErrorCode::CommentNotFound)?;
    let comment = db
        .read(caller.is_some(), |pool| async move {
            store::find(&pool, id).await
        })
        .await?
        .ok_or(ErrorCode::CommentNotFound)?;
    Ok(json_read(&headers, caller.is_some(), &comment))
}

#[cfg(test)]
mod tests {
    use shared_auth::testing::whitespace_class;
    use utoipa::PartialSchema;

    #[test]
    fn the_text_pattern_matches_what_the_server_trims() {
        let schema = serde_json::to_value(super::CommentInput::schema()).expect("serialises");
        let expected = format!("^[^\\u0000]*[^\\u0000{}][^\\u0000]*$", whitespace_class());
        assert_eq!(schema["properties"]["text"]["pattern"], expected);
    }
}
