//! `GET /v1/lingo/me/phrases` and `GET /v1/lingo/me/reviews`: what the caller knows of each
//! phrase answered, and what to review now (docs/lingo.md, "Phrase progress").

use axum::Json;
use axum::extract::State;
use chrono::Utc;
use serde::{Deserialize, Serialize};
use shared_auth::http::cursor;
use shared_auth::http::paging::next_cursor;
use shared_auth::{Paging, Problem, Query, RequiredCaller};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::cursor_only;
use crate::domain::phrase_progress::{MyPhrasesCursor, MyPhrasesFilter, PhraseProgress};
use crate::error::{ErrorCode, Result};
use crate::problems::{CursorPagingProblems, LimitProblems};
use crate::state::{AppState, Db};
use crate::store;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(my_phrases))
        .routes(routes!(my_reviews))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MyPhrases {
    /// Ordered by `due_at`, then phrase `id`.
    pub data: Vec<PhraseProgress>,
    /// Number of items in `data`.
    #[schema(minimum = 0)]
    pub count: usize,
    /// Pass as `cursor` to continue (it keeps `language` and `due`); null at the end.
    #[schema(required = true)]
    pub next_cursor: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct MyPhrasesQuery {
    /// Only phrases of this language (the phrase's own); an unknown language gives an empty list.
    #[param(example = "es")]
    language: Option<String>,
    /// `true`: only the phrases due at the time of the request; `false` or absent: every phrase
    /// answered.
    due: Option<bool>,
    /// The `next_cursor` of the previous page (opaque). One that does not decode, belongs to
    /// another list, or comes with another `language` or `due` than its list's is 400
    /// `invalid_cursor`. An empty `cursor=` is the same as none.
    cursor: Option<String>,
    /// Page size.
    #[param(minimum = 1, maximum = 100, default = 20)]
    #[serde(default, deserialize_with = "shared_auth::http::paging::query_integer")]
    limit: Option<i64>,
    /// Not a parameter of this list (cursor paging only): given, it is 400 rather than ignored.
    #[param(ignore)]
    offset: Option<String>,
}

/// Every phrase the caller has answered, with its FSRS memory state, by due date.
#[utoipa::path(
    get,
    path = "/me/phrases",
    operation_id = "lingo_list_my_phrases",
    tag = "lingo",
    params(MyPhrasesQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "One page of the caller's phrase progress by `due_at`, then phrase `id`; keyset-paged by `next_cursor`", body = MyPhrases),
        CursorPagingProblems,
    )
)]
async fn my_phrases(
    RequiredCaller(caller): RequiredCaller,
    State(db): State<Db>,
    Query(query): Query<MyPhrasesQuery>,
) -> Result<Json<MyPhrases>> {
    let paging = cursor_only::paging(query.limit, query.offset.is_some())?;
    let cursor = cursor_only::cursor(query.cursor.as_deref(), MyPhrasesCursor::decode)?;
    let filter = match &cursor {
        Some(cursor) => cursor
            .filter(query.language.as_deref(), query.due)
            .map_err(|_| ErrorCode::InvalidCursor)?,
        None => MyPhrasesFilter {
            language: query.language,
            due_only: query.due.unwrap_or(false),
        },
    };
    let now = Utc::now();
    let mut data = store::phrase_progress::list_for(
        &db.primary,
        &caller.sub,
        &filter,
        cursor.as_ref(),
        now,
        paging.fetch_limit(),
    )
    .await?;
    let next_cursor = next_cursor(&mut data, paging, |last| {
        MyPhrasesCursor::after(last.due_at, &last.phrase.id, &filter).encode()
    });
    Ok(Json(MyPhrases {
        count: data.len(),
        data,
        next_cursor,
    }))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MyReviews {
    /// The phrases due now, longest overdue first (`due_at`, then phrase `id`), at most `limit`.
    pub data: Vec<PhraseProgress>,
    /// Number of items in `data`.
    #[schema(minimum = 0)]
    pub count: usize,
    /// Every phrase due now (in `language`, when given), however many `data` shows.
    #[schema(minimum = 0)]
    pub due_total: i64,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct MyReviewsQuery {
    /// Only phrases of this language (the phrase's own).
    #[param(example = "es")]
    language: Option<String>,
    /// How many due phrases to return.
    #[param(minimum = 1, maximum = 100, default = 20)]
    #[serde(default, deserialize_with = "shared_auth::http::paging::query_integer")]
    limit: Option<i64>,
    /// Not parameters of this list (it is not paged: the next phrases to review are the first
    /// ones again once these are answered; `GET /me/phrases?due=true` pages through them all):
    /// given, they are 400 rather than ignored, so a client that tries to page learns why (an
    /// empty `cursor=` is none, as on every list).
    #[param(ignore)]
    offset: Option<String>,
    #[param(ignore)]
    cursor: Option<String>,
}

/// What the caller should review now: the phrases due, longest overdue first.
#[utoipa::path(
    get,
    path = "/me/reviews",
    operation_id = "lingo_list_my_reviews",
    tag = "lingo",
    params(MyReviewsQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The phrases due now, longest overdue first, and how many are due in all", body = MyReviews),
        LimitProblems,
    )
)]
async fn my_reviews(
    RequiredCaller(caller): RequiredCaller,
    State(db): State<Db>,
    Query(query): Query<MyReviewsQuery>,
) -> Result<Json<MyReviews>> {
    if query.offset.is_some() || cursor::given(query.cursor.as_deref()).is_some() {
        let detail = "this list is not paged: answer these phrases and ask again, or page \
                      through GET /v1/lingo/me/phrases?due=true";
        return Err(Problem::invalid_query(detail).into());
    }
    let paging = Paging::new(query.limit, None)?;
    let (data, due_total) = store::phrase_progress::reviews_for(
        &db.primary,
        &caller.sub,
        query.language.as_deref(),
        Utc::now(),
        paging.limit,
    )
    .await?;
    Ok(Json(MyReviews {
        count: data.len(),
        data,
        due_total,
    }))
}
