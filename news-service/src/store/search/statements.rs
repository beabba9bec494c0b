//! The statements of a search page and the rows they read: the access chosen ([`access`]), the
//! ranked window ([`window_query`]), a ranked page ([`ranked_hits_query`]), the newest matches
//! ([`newest_hits_query`]) and where a walk stopped ([`walk_end_query`]).

use chrono::{DateTime, Utc};
use sqlx::{FromRow, Postgres, QueryBuilder};

use super::parse::LanguageQuery;
use crate::domain::articles::ArticleItem;
use crate::domain::search::{
    Access, Filters, Position, RANKED_MATCHES, any_lexeme, restrict_to_weight,
};
use crate::store::articles;

/// The access for `wanted` matches of these languages' queries, a walk examining at most
/// `examine` articles.
pub fn access(languages: &[LanguageQuery], wanted: i64, examine: i64) -> Access {
    let matches = languages.iter().map(|l| l.expected_matches).sum();
    let articles = languages.iter().map(|l| l.articles).sum();
    Access::for_matches(matches, articles, wanted, examine)
}

/// `(a.language IN ($l, ...) AND a.search_vector @@ (SELECT $q::tsquery)) OR ...` over the
/// languages, those whose query reads the same sharing one test (so PostgreSQL scans the GIN
/// index once for them, not once a language). Each tsquery is a subquery's value, which the
/// planner cannot see: with [`Access::Index`] it then takes the match for a rare one (a fixed
/// 0.5% of the rows) and reads the GIN index, whatever its statistics say of the words. A walk's
/// languages are a subquery's value too, `a.language = ANY ((SELECT $codes)::text[])`: with no
/// value left for the planner to see, its plan made without the values costs what a plan made
/// with them does, and PostgreSQL keeps the first when the statement is kept prepared (instead
/// of planning it again each run: 0.28 ms of a frequent word's `sort=newest` page).
fn push_match(qb: &mut QueryBuilder<'_, Postgres>, languages: &[LanguageQuery], access: Access) {
    let mut queries: Vec<(&str, Vec<&str>)> = Vec::new();
    for l in languages {
        match queries.iter_mut().find(|(query, _)| *query == l.query) {
            Some((_, codes)) => codes.push(&l.language),
            None => queries.push((&l.query, vec![&l.language])),
        }
    }
    qb.push("(");
    for (i, (query, codes)) in queries.into_iter().enumerate() {
        if i > 0 {
            qb.push(" OR ");
        }
        match access {
            Access::Index => {
                qb.push("(a.language IN (");
                for (j, code) in codes.into_iter().enumerate() {
                    if j > 0 {
                        qb.push(", ");
                    }
                    qb.push_bind(code.to_owned());
                }
                qb.push(")");
            }
            Access::Walk(_) => {
                let codes: Vec<String> = codes.into_iter().map(str::to_owned).collect();
                qb.push("(a.language = ANY ((SELECT ")
                    .push_bind(codes)
                    .push("::text[])::text[])");
            }
        }
        qb.push(" AND a.search_vector @@ (SELECT ")
            .push_bind(query.to_owned())
            .push("::tsquery))");
    }
    qb.push(")");
}

/// ` LIMIT n`, written into the statement rather than bound: a plan made without the values
/// takes a bound limit for a tenth of the rows, so it would cost more than the plans made with
/// them and PostgreSQL would plan a kept statement again each run (see [`push_match`]). The
/// limits are the service's own numbers (a page's size and one more, the window's, the walk's),
/// so a kept statement has a few texts, not one per request.
struct Limit(i64);

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, " LIMIT {}", self.0)
    }
}

/// The order of a list of matches: newest first, or (a later page's ranked window, read from
/// its end) oldest first.
const NEWEST_FIRST: &str = " ORDER BY a.published_at DESC, a.id DESC";
const OLDEST_FIRST: &str = " ORDER BY a.published_at, a.id";

/// `FROM (SELECT a.ctid AS tid, a.* FROM articles a WHERE <match> ... OFFSET 0) a WHERE TRUE`
/// with [`Access::Index`]; with [`Access::Walk`], the match is
/// tested on a subquery of the articles (of the filters, in `order` from where `bound`
/// starts) cut at the walk's limit: `FROM (SELECT a.ctid AS tid, a.* FROM articles a WHERE
/// ... ORDER BY ... LIMIT $examine) a WHERE <match>`. The caller adds its own order (the same)
/// and limit, and under the walk PostgreSQL stops reading as soon as it has them.
fn push_source(
    qb: &mut QueryBuilder<'static, Postgres>,
    languages: &[LanguageQuery],
    filters: &Filters,
    access: Access,
    order: &'static str,
    bound: impl FnOnce(&mut QueryBuilder<'static, Postgres>),
) {
    match access {
        Access::Index => {
            // OFFSET 0 keeps the subquery apart: planned for all its rows, it has no use for
            // the newest-first order, so the outer order is a sort of the matches.
            qb.push(" FROM (SELECT a.ctid AS tid, a.* FROM articles a WHERE ");
            push_match(qb, languages, access);
            push_filters(qb, filters);
            bound(qb);
            qb.push(" OFFSET 0) a WHERE TRUE");
        }
        Access::Walk(examine) => {
            qb.push(" FROM (SELECT a.ctid AS tid, a.* FROM articles a WHERE TRUE");
            push_filters(qb, filters);
            bound(qb);
            qb.push(order).push(Limit(examine)).push(") a WHERE ");
            push_match(qb, languages, access);
        }
    }
}

/// 3 when the query matches within the title alone (weight A), 2 within the summary (B), else 1
/// (the body).
fn push_score(qb: &mut QueryBuilder<'_, Postgres>, languages: &[LanguageQuery]) {
    qb.push("CASE a.language");
    for l in languages {
        qb.push(" WHEN ")
            .push_bind(l.language.clone())
            .push(" THEN CASE WHEN a.search_vector @@ ")
            .push_bind(restrict_to_weight(&l.query, 'A'))
            .push("::tsquery THEN 3 WHEN a.search_vector @@ ")
            .push_bind(restrict_to_weight(&l.query, 'B'))
            .push("::tsquery THEN 2 ELSE 1 END");
    }
    qb.push(" ELSE 0 END::smallint");
}

fn push_filters(qb: &mut QueryBuilder<'_, Postgres>, filters: &Filters) {
    if let Some(id) = &filters.organization_id {
        qb.push(" AND a.organization_id = ").push_bind(id.clone());
    }
    if let Some(id) = &filters.journalist_id {
        qb.push(" AND a.journalist_id = ").push_bind(id.clone());
    }
    if let Some(after) = filters.published_after {
        qb.push(" AND a.published_at >= ").push_bind(after);
    }
    if let Some(before) = filters.published_before {
        qb.push(" AND a.published_at < ").push_bind(before);
    }
}

/// The ranked window: the newest `RANKED_MATCHES` matches, or (on later pages) the matches at
/// or after the window's end as page 1 found it, with their scores. `prefix` lets tests
/// prepend `EXPLAIN`.
pub fn window_query(
    prefix: &str,
    languages: &[LanguageQuery],
    filters: &Filters,
    window_end: Option<&(DateTime<Utc>, String)>,
    access: Access,
) -> QueryBuilder<'static, Postgres> {
    let mut qb = QueryBuilder::new(prefix);
    push_window(&mut qb, languages, filters, window_end, access);
    qb
}

/// The statement of [`window_query`]: `tid` (the row's `ctid`), `id`, `published_at` and
/// `score` of the window's rows.
fn push_window(
    qb: &mut QueryBuilder<'static, Postgres>,
    languages: &[LanguageQuery],
    filters: &Filters,
    window_end: Option<&(DateTime<Utc>, String)>,
    access: Access,
) {
    qb.push("SELECT a.tid, a.id, a.published_at, ");
    push_score(qb, languages);
    qb.push(" AS score");
    // A later page's walk reads the articles at or after the end: page 1's (at most its
    // limit) and as many published since.
    let access = match (access, window_end) {
        (Access::Walk(examine), Some(_)) => Access::Walk(2 * examine),
        _ => access,
    };
    // A later page reads the window from its end, oldest first: page 1's matches, then those
    // published since as far as the limits go. Read newest first, more articles published
    // since than the limits pushed page 1's matches out of the window, and they were never
    // served.
    let order = if window_end.is_some() {
        OLDEST_FIRST
    } else {
        NEWEST_FIRST
    };
    push_source(qb, languages, filters, access, order, |qb| {
        if let Some((published_at, id)) = window_end {
            // The plain `published_at` bound is implied by the row comparison, but PostgreSQL
            // can estimate only the plain one from its statistics; with the row comparison alone
            // it guessed a third of all articles and intersected the whole posting list of a
            // frequent word with the range (page 50 of `officials` on a million articles: 75 ms
            // instead of page 1's 16 ms).
            qb.push(" AND a.published_at >= ")
                .push_bind(*published_at)
                .push(" AND (a.published_at, a.id) >= (")
                .push_bind(*published_at)
                .push(", ")
                .push_bind(id.clone())
                .push(")");
        }
    });
    // With an end, the window is page 1's rows plus matches published since: bounded again
    // so a flood of new matches cannot make a later page slow.
    let limit = if window_end.is_some() {
        2 * RANKED_MATCHES
    } else {
        RANKED_MATCHES
    };
    qb.push(order).push(Limit(limit));
}

/// Where a `sort=relevance` page lies in its ranked window: the window's end as page 1 found it
/// (later pages), the last row served before the page, and how many rows it wants.
#[derive(Debug, Clone, Copy)]
pub struct RankedPage<'a> {
    pub window_end: Option<&'a (DateTime<Utc>, String)>,
    pub after: Option<&'a Position>,
    pub wanted: i64,
}

/// A `sort=relevance` page's rows from the ranked window, in one statement: the window (as
/// [`window_query`]) scored and ranked in PostgreSQL, cut to the `wanted` rows after `after` in
/// list order, with their items, what their highlights need (as [`newest_hits_query`]), and the
/// window's oldest row (its end, which page 1's cursor keeps). Only the page's rows leave the
/// database, where the whole window (`RANKED_MATCHES` rows) used to be decoded and ranked here.
/// `prefix` as above.
pub fn ranked_hits_query(
    prefix: &str,
    languages: &[LanguageQuery],
    filters: &Filters,
    page: RankedPage<'_>,
    viewer: Option<&str>,
    access: Access,
) -> QueryBuilder<'static, Postgres> {
    let RankedPage {
        window_end,
        after,
        wanted,
    } = page;
    let mut qb = articles::items_query(
        prefix,
        viewer,
        |qb| {
            qb.push("WITH w AS MATERIALIZED (");
            push_window(qb, languages, filters, window_end, access);
            // The page's rows are read back at the `ctid` the window found them at (a TID scan,
            // not a lookup in the id index per row): one statement, one snapshot, so it is the
            // same row version.
            qb.push("), page AS (SELECT * FROM w");
            if let Some(after) = after {
                qb.push(" WHERE (w.score, w.published_at, w.id) < (")
                    .push_bind(after.score)
                    .push(", ")
                    .push_bind(after.published_at)
                    .push(", ")
                    .push_bind(after.id.clone())
                    .push(")");
            }
            qb.push(" ORDER BY w.score DESC, w.published_at DESC, w.id DESC")
                .push(Limit(wanted))
                .push(
                    ") SELECT a.*, page.score AS rank_score, \
                 e.published_at AS window_end_at, e.id AS window_end_id, \
                 (SELECT count(*) FROM w) AS window_size \
                 FROM page JOIN articles a ON a.ctid = page.tid \
                 CROSS JOIN (SELECT w.published_at, w.id FROM w \
                             ORDER BY w.published_at, w.id LIMIT 1) e",
                );
        },
        |qb| {
            qb.push("a.rank_score, a.window_end_at, a.window_end_id, a.window_size, ");
            push_hit_columns(qb, languages);
        },
    );
    qb.push(" ORDER BY a.rank_score DESC, a.published_at DESC, a.id DESC");
    qb
}

/// `SELECT * FROM articles a` for the matches newest first, strictly before `before` when
/// given.
fn push_newest(
    qb: &mut QueryBuilder<'static, Postgres>,
    languages: &[LanguageQuery],
    filters: &Filters,
    before: Option<&(DateTime<Utc>, String)>,
    limit: i64,
    access: Access,
) {
    qb.push("SELECT *");
    push_source(qb, languages, filters, access, NEWEST_FIRST, |qb| {
        push_before(qb, before)
    });
    qb.push(NEWEST_FIRST).push(Limit(limit));
}

/// ` AND (a.published_at, a.id) < (...)` when `before` is given.
fn push_before(qb: &mut QueryBuilder<'static, Postgres>, before: Option<&(DateTime<Utc>, String)>) {
    if let Some((published_at, id)) = before {
        qb.push(" AND (a.published_at, a.id) < (")
            .push_bind(*published_at)
            .push(", ")
            .push_bind(id.clone())
            .push(")");
    }
}

/// Where a walk that found fewer matches than it wanted stopped: the last article it examined
/// (the `examine`-th of the filters strictly before `before`), or `None` when it examined every
/// one (then it found every match). A later page goes on strictly after the returned row. Run
/// after the walk in the walk's snapshot (see [`page_examining`](super::page_examining)): in
/// another, an article written within the walked range meanwhile moved the end newer (the walk's
/// last match `last`, its oldest, is returned when it is older, so no match is served twice) and
/// one deleted moved it past articles the walk never examined (skipped).
pub fn walk_end_query(
    prefix: &str,
    filters: &Filters,
    before: Option<&(DateTime<Utc>, String)>,
    examine: i64,
    last: Option<&(DateTime<Utc>, String)>,
) -> QueryBuilder<'static, Postgres> {
    let mut qb = QueryBuilder::new(prefix);
    qb.push("WITH k AS (SELECT a.published_at, a.id FROM articles a WHERE TRUE");
    push_filters(&mut qb, filters);
    push_before(&mut qb, before);
    qb.push(" ORDER BY a.published_at DESC, a.id DESC OFFSET ")
        .push_bind(examine - 1)
        .push(" LIMIT 1) SELECT b.published_at, b.id FROM (SELECT * FROM k");
    if let Some((published_at, id)) = last {
        qb.push(" UNION ALL SELECT ")
            .push_bind(*published_at)
            .push("::timestamptz, ")
            .push_bind(id.clone())
            .push("::text FROM k");
    }
    qb.push(") b ORDER BY b.published_at, b.id LIMIT 1");
    qb
}

/// A `sort=newest` page in one statement: the matches newest first (strictly before `before`
/// when given) with their items and what their highlights need (no second statement to read
/// the items by id). `prefix` as above.
pub fn newest_hits_query(
    prefix: &str,
    languages: &[LanguageQuery],
    filters: &Filters,
    before: Option<&(DateTime<Utc>, String)>,
    limit: i64,
    viewer: Option<&str>,
    access: Access,
) -> QueryBuilder<'static, Postgres> {
    let mut qb = articles::items_query(
        prefix,
        viewer,
        |qb| push_newest(qb, languages, filters, before, limit, access),
        |qb| push_hit_columns(qb, languages),
    );
    qb.push(" ORDER BY a.published_at DESC, a.id DESC");
    qb
}

/// A match as its page's statement read it: its place in the list, its item, and what its
/// highlights need.
pub(super) struct ReadHit {
    pub(super) position: Position,
    pub(super) item: ArticleItem,
    pub(super) columns: HitColumns,
}

/// Whether a page statement is kept prepared on its connection (one round trip, not parsed
/// again) rather than parsed and planned anew with its values. Only a walk without an
/// organisation or journalist filter: its plan is the same whatever values are bound (the
/// `published_at` index, newest first from the page's bound, the match a filter on what it
/// reads), so a plan PostgreSQL makes without the values, which it may switch a prepared
/// statement to after five runs, is that plan too. The GIN index's statements hide their tsquery
/// from the planner, and with its value gone a date bound's could choose another index (a
/// `published_at` range it takes for narrow, read whole for a rare word); an organisation's or a
/// journalist's articles can be found by their own index or the walk, by their number.
pub(super) fn keep_prepared(access: Access, filters: &Filters) -> bool {
    matches!(access, Access::Walk(_))
        && filters.organization_id.is_none()
        && filters.journalist_id.is_none()
}

/// What [`ranked_hits_query`] reads beside a hit's item.
#[derive(Debug, FromRow)]
pub(super) struct RankedColumns {
    pub(super) rank_score: i16,
    pub(super) window_end_at: DateTime<Utc>,
    pub(super) window_end_id: String,
    pub(super) window_size: i64,
    #[sqlx(flatten)]
    pub(super) hit: HitColumns,
}

/// What a page's statement reads beside an article's item: its language, per field whether the
/// stored vector holds one of the query's positive lexemes with the field's weight (a field
/// without one gets no highlight, whatever its words look like), and the body only when it is
/// such a field (it is often stored out of line: a title match does not read it).
#[derive(Debug, FromRow)]
pub(super) struct HitColumns {
    pub(super) language: String,
    pub(super) in_title: bool,
    pub(super) in_summary: bool,
    pub(super) matched_body: Option<String>,
}

/// `a.language, <in title>, <in summary>, <the body if in body>` (see [`HitColumns`]).
fn push_hit_columns(qb: &mut QueryBuilder<'static, Postgres>, languages: &[LanguageQuery]) {
    qb.push("a.language, ");
    push_in_field(qb, languages, 'A');
    qb.push(" AS in_title, ");
    push_in_field(qb, languages, 'B');
    qb.push(" AS in_summary, CASE WHEN ");
    push_in_field(qb, languages, 'C');
    qb.push(" THEN a.body END AS matched_body");
}

/// `coalesce(CASE a.language WHEN $l THEN a.search_vector @@ $any_lexeme_of_l::tsquery ...
/// END, false)`, the field-weight test for each language.
fn push_in_field(
    qb: &mut QueryBuilder<'static, Postgres>,
    languages: &[LanguageQuery],
    weight: char,
) {
    qb.push("coalesce(CASE a.language");
    for l in languages {
        qb.push(" WHEN ")
            .push_bind(l.language.clone())
            .push(" THEN a.search_vector @@ ")
            .push_bind(any_lexeme(&l.positive, weight))
            .push("::tsquery");
    }
    qb.push(" END, false)");
}
