//! Search (docs/news.md, "GET /v1/news/search"): full-text search over the articles, ranked or newest first, cursor
//! paging only.

use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use shared_auth::http::cache::{IfNoneMatch, json_read};
use shared_auth::http::cursor;
use shared_auth::http::load::overloaded_problem;
use shared_auth::{OptionalCaller, Paging, Problem, Query};
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::search::SearchPage;
use crate::domain::search::{Filters, SearchCursor, SearchSpec, Sort, parse_query, parse_time};
use crate::error::Result;
use crate::problems::SearchProblems;
use crate::state::{AppState, Db, SearchSlots};
use crate::store::search::{self, QueryParses};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(search_articles))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct SearchQuery {
    /// What to look for, 1 to 200 characters after trimming, in web-search syntax: every word
    /// must match, `"quoted words"` match as a phrase, `OR` between words, `-word` excludes.
    /// Stemmed per article language, case- and accent-insensitive. Required, except with a
    /// `cursor`, which keeps its search's `q`: then it may be left out, or given unchanged.
    // The pattern says what the service checks: no U+0000, and 1 to 200 characters between the
    // white space `str::trim` removes (the class of a comment's text; tests/api/search.rs holds
    // it equal to Rust's). No `maxLength`: the white space around `q` does not count.
    #[param(
        min_length = 1,
        pattern = r"^[\u0009-\u000D\u0020\u0085\u00A0\u1680\u2000-\u200A\u2028-\u2029\u202F\u205F\u3000]*[^\u0000\u0009-\u000D\u0020\u0085\u00A0\u1680\u2000-\u200A\u2028-\u2029\u202F\u205F\u3000](?:[^\u0000]{0,198}[^\u0000\u0009-\u000D\u0020\u0085\u00A0\u1680\u2000-\u200A\u2028-\u2029\u202F\u205F\u3000])?[\u0009-\u000D\u0020\u0085\u00A0\u1680\u2000-\u200A\u2028-\u2029\u202F\u205F\u3000]*$"
    )]
    q: Option<String>,
    /// Only articles of this organisation (an unknown id gives an empty page).
    organization_id: Option<String>,
    /// Only articles by this journalist (an unknown id gives an empty page).
    journalist_id: Option<String>,
    /// Only articles published at or after this time (RFC 3339).
    #[param(value_type = Option<String>, format = DateTime)]
    published_after: Option<String>,
    /// Only articles published before this time (RFC 3339).
    #[param(value_type = Option<String>, format = DateTime)]
    published_before: Option<String>,
    /// `relevance`, the default (title matches above summary matches above body matches, newer
    /// first among equals), or `newest` (`published_at` descending, ties by `id` descending).
    #[param(inline)]
    sort: Option<Sort>,
    /// Page size.
    #[param(minimum = 1, maximum = 100, default = 20)]
    #[serde(default, deserialize_with = "shared_auth::http::paging::query_integer")]
    limit: Option<i64>,
    /// A `next_cursor` from an earlier page of the same search: `q`, filters and sort left
    /// out are taken from the cursor, those given must equal it. An empty `cursor=` is the
    /// same as none.
    cursor: Option<String>,
    /// Not accepted (search pages by cursor only); present only to answer 400.
    #[param(ignore)]
    offset: Option<String>,
}

impl SearchQuery {
    fn filters(&self) -> Result<Filters, Problem> {
        let time = |name: &str, value: &Option<String>| {
            value
                .as_deref()
                .map(|text| parse_time(name, text))
                .transpose()
        };
        Ok(Filters {
            organization_id: self.organization_id.clone(),
            journalist_id: self.journalist_id.clone(),
            published_after: time("published_after", &self.published_after)?,
            published_before: time("published_before", &self.published_before)?,
        })
    }

    /// The search this request asks for: a new one, or the one its cursor continues.
    fn spec(self) -> Result<SearchSpec, Problem> {
        let q = self.q.as_deref().map(parse_query).transpose()?;
        let filters = self.filters()?;
        match cursor::given(self.cursor.as_deref()) {
            Some(text) => SearchCursor::decode(text)?.resume(q.as_deref(), self.sort, &filters),
            None => Ok(SearchSpec {
                q: q.ok_or_else(|| Problem::invalid_query("q is required (without a cursor)"))?,
                sort: self.sort.unwrap_or_default(),
                filters,
                after: None,
                window_end: None,
            }),
        }
    }
}

/// Search articles.
///
/// `sort=relevance` (the default) ranks the newest 500 matches of the query and its filters
/// (score 3 title, 2 summary, 1 body; newer first among equals); any older matches follow,
/// newest first, with score 0. Each hit carries up to 3 `highlights` whose `marks` are
/// `[start, end)` code-point spans of the matched words. When nothing matches, `suggestion`
/// respells `q` (its first 10 words of 3 letters or more) from the articles' words. A query
/// that excludes a word it requires (`officials -officials`), or excludes words only
/// (`-rain`, `(-rain)`), matches nothing. Paged by cursor only: `offset` is 400.
///
/// When many articles hold the query's words, a page reads the articles newest first and
/// tests each one, and reads at most 50,000 articles (of its filters, from where the page
/// starts): a page that finds fewer matches than `limit` among them stops there and answers
/// the matches it found, possibly none, with a `next_cursor` that goes on after the last
/// article read (and `suggestion` null). So a page may hold fewer than `limit` hits while
/// `next_cursor` is not null; only a null `next_cursor` means the end. With
/// `sort=relevance`, page 1's walk for the ranked window reads at most 50,000 articles too:
/// when it finds fewer than 500 matches among them, the window is the matches among the
/// articles it read. This bounds a phrase of frequent words that seldom stand side by side
/// (`"said said"`).
///
/// At most half the database pool's connections serve searches at once, so expensive searches
/// never take the connections of the other endpoints; a search past that waits for a turn as long
/// as for a pooled connection (`NEWS_DB_ACQUIRE_TIMEOUT_MS`), then is refused with 503
/// `overloaded` (`Retry-After`).
///
/// Anonymous answers are cacheable (`ETag`, `Cache-Control: public, max-age=30`, 304 for a
/// matching `If-None-Match`); answers to a caller with a valid token are
/// `Cache-Control: private, no-store` and carry `viewer`.
#[utoipa::path(
    get,
    path = "/search",
    operation_id = "news_search",
    tag = "news-articles",
    params(SearchQuery, IfNoneMatch),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "A page of matches.", body = SearchPage,
            links(
                ("GetArticle" = (operation_id = "news_get_article",
                    parameters(("article_id" = "$response.body#/data/0/id")))),
                ("NextPage" = (operation_id = "news_search",
                    parameters(("cursor" = "$response.body#/next_cursor"),
                        ("q" = "$request.query.q")))),
            ),
            headers(
                ("Cache-Control" = String, description = "`public, max-age=30` anonymous, `private, no-store` with a token."),
                ("ETag" = String, description = "Strong validator; anonymous answers only."),
                ("Vary" = String, description = "`authorization`."),
            )),
        SearchProblems,
    )
)]
async fn search_articles(
    State(db): State<Db>,
    State(slots): State<SearchSlots>,
    State(parses): State<Arc<QueryParses>>,
    OptionalCaller(caller): OptionalCaller,
    headers: HeaderMap,
    Query(query): Query<SearchQuery>,
) -> Result<Response> {
    let Some(_turn) = slots.take().await else {
        return Err(overloaded_problem()
            .with_detail("too many searches at once; retry shortly")
            .into());
    };
    if query.offset.is_some() {
        return Err(Problem::invalid_query(
            "search pages by cursor only: pass the previous page's next_cursor as cursor",
        )
        .into());
    }
    let limit = Paging::new(query.limit, None)?.limit;
    let spec = query.spec()?;
    let viewer = caller.map(|c| c.sub);
    let signed_in = viewer.is_some();
    let (spec, viewer, parses) = (&spec, viewer.as_deref(), &*parses);
    let page: SearchPage = db
        .read(signed_in, |pool| async move {
            search::page(&pool, parses, spec, limit, viewer).await
        })
        .await?;
    Ok(json_read(&headers, signed_in, &page))
}
