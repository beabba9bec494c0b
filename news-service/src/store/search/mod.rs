//! Search (docs/news.md, "GET /v1/news/search"): the query in each article language's configuration, the matching rows
//! in list order, their highlights, and respellings for a query that matched nothing. The
//! migration `search` explains the columns, configurations and word list this reads.
//!
//! Every article language present gets its own predicate, `(a.language = $l AND
//! a.search_vector @@ $query_l)`, ORed: each article is matched with the tsquery its own
//! configuration makes of `q` (an exclusion then excludes in every language, which one tsquery
//! ORed over languages would not). The service, not the planner, chooses how a statement finds
//! the matches ([`Access`]): the GIN index, or a walk of the `published_at` index with the match
//! as a filter; either way the planner is not shown the tsqueries, so that it cannot choose
//! otherwise, and a walk's plan is the same for any values (see [`keep_prepared`]).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use shared_auth::pg::pool::begin_to_completion;
use sqlx::postgres::PgRow;
use sqlx::postgres::types::Oid;
use sqlx::{FromRow, PgConnection, PgExecutor, PgPool, Postgres, QueryBuilder};

use crate::domain::articles::ArticleItem;
use crate::domain::highlight::{self, MAX_FRAGMENT_CHARS};
use crate::domain::search::{
    Access, Filters, Position, RANKED_MATCHES, SearchCursor, SearchSpec, Sort, WALK_EXAMINES,
    any_lexeme, positive_query, query_lexemes, query_words, respell, restrict_to_weight,
    words_to_respell,
};
use crate::domain::search::{Highlight, HighlightField, SearchHit, SearchPage};
use crate::domain::text_search::{Folding, Marker};
use crate::domain::tsquery::{
    asks_for_a_word, can_match, expected_matches, without_contradictions,
};
use crate::error::Result;
use crate::store::articles;

/// `q` as one article language's configuration reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LanguageQuery {
    pub language: String,
    /// The language's text search configuration (`search_config(language)`), read once per
    /// search: the function looks the name up in the catalogue on every call, which cost more
    /// than the rest of a search page when the highlights called it per article and field.
    pub config: Oid,
    /// The whole query (`tsquery` text).
    pub query: String,
    /// Without exclusions: what highlights mark.
    pub positive: String,
    /// The server is the one the Rust highlights model (`domain::text_search`) copies and is
    /// tested against: PostgreSQL 15 (its `unaccent.rules`, stop word files and Snowball
    /// stemmers) with a UTF-8 database whose `LC_CTYPE` is `C` (in another encoding the parser
    /// reads other characters from the same text). On any other, `ts_headline` marks.
    pub modelled_server: bool,
    /// The language's articles, and about how many of them match `query` (from the counts of
    /// its lexemes, migration `search_lexemes`): what the plan is chosen by.
    pub articles: u64,
    pub expected_matches: u64,
}

/// `q` as one language's configuration reads it: a function of `q` and the configuration
/// alone, so [`QueryParses`] keeps it between searches.
#[derive(Debug, Clone)]
struct LanguageParse {
    language: String,
    config: Oid,
    query: String,
    positive: String,
    /// The lexemes of `q`'s words in the configuration (the tsquery's, and the operators'
    /// words, which cost nothing): those whose articles are counted.
    lexemes: Vec<String>,
}

/// A row of [`language_queries`]' statement.
struct LanguageRow {
    language: String,
    config: Oid,
    query: String,
    positive: String,
    modelled_server: bool,
    articles: i64,
    lexemes: Vec<String>,
    counts: Vec<i64>,
}

/// The query in every article language whose configuration finds something to look for in it
/// that the language's articles hold (none when `q` is stop words or exclusions only, excludes
/// a word it requires, or requires a lexeme none of them holds: then nothing matches), without
/// the alternatives that cannot match.
pub async fn language_queries(db: impl PgExecutor<'_>, q: &str) -> Result<Vec<LanguageQuery>> {
    Ok(parse_and_count(db, q).await?.1)
}

/// [`language_queries`], and what of it is a function of `q` and the configurations alone.
async fn parse_and_count(
    db: impl PgExecutor<'_>,
    q: &str,
) -> Result<(Vec<LanguageParse>, Vec<LanguageQuery>)> {
    let positive = positive_query(q);
    let rows = sqlx::query_as!(
        LanguageRow,
        // OFFSET 0 keeps the subquery whole, so `search_config` runs once per language rather
        // than once per use. The counted lexemes are those of `q`'s words in the language's
        // configuration (the tsquery's, and the operators' words, which cost nothing).
        r#"SELECT l.language AS "language!", c.config::oid AS "config!",
                  websearch_to_tsquery(c.config, $1)::text AS "query!",
                  websearch_to_tsquery(c.config, $2)::text AS "positive!",
                  current_setting('lc_ctype') IN ('C', 'POSIX')
                  AND current_setting('server_encoding') = 'UTF8'
                  AND current_setting('server_version_num')::int / 10000 = 15
                  AS "modelled_server!",
                  coalesce((SELECT t.articles FROM search_lexemes t
                             WHERE t.language = l.language AND t.lexeme = ''), 0) AS "articles!",
                  k.lexemes AS "lexemes!", k.counts AS "counts!"
             FROM search_languages l
            CROSS JOIN LATERAL (SELECT search_config(l.language) AS config OFFSET 0) c
            CROSS JOIN LATERAL (
                  SELECT coalesce(array_agg(w.lexeme), '{}') AS lexemes,
                         coalesce(array_agg(coalesce(s.articles, 0)), '{}') AS counts
                    FROM unnest(tsvector_to_array(to_tsvector(c.config, $1))) AS w (lexeme)
                    LEFT JOIN search_lexemes s
                      ON s.language = l.language AND s.lexeme = w.lexeme) k
            ORDER BY l.language"#,
        q,
        positive
    )
    .fetch_all(db)
    .await?;
    let mut parses = Vec::with_capacity(rows.len());
    let mut queries = Vec::with_capacity(rows.len());
    for row in rows {
        let parse = LanguageParse {
            language: row.language,
            config: row.config,
            query: row.query,
            positive: row.positive,
            lexemes: row.lexemes,
        };
        let counts = counts_by_lexeme(&parse.lexemes, &row.counts);
        queries.extend(counted_query(
            &parse,
            row.modelled_server,
            row.articles,
            |w| counts.get(w).copied(),
        ));
        parses.push(parse);
    }
    Ok((parses, queries))
}

/// A statement's lexemes paired with their article counts (the two arrays it reads side by side).
fn counts_by_lexeme<'a>(lexemes: &'a [String], counts: &[i64]) -> HashMap<&'a str, u64> {
    lexemes
        .iter()
        .map(String::as_str)
        .zip(counts.iter().map(|&n| u64::try_from(n).unwrap_or(0)))
        .collect()
}

/// One language's query with its counts (`documents(lexeme)`: the language's articles holding
/// one of `parse.lexemes`), or `None` when nothing of the language can match it.
fn counted_query(
    parse: &LanguageParse,
    modelled_server: bool,
    articles: i64,
    documents: impl Fn(&str) -> Option<u64>,
) -> Option<LanguageQuery> {
    // An empty tsquery prints as '' (and asks for no word). A query of exclusions only, one
    // that excludes what it requires, or one that requires a lexeme no article of the language
    // holds, matches nothing in that language, and is not asked (see `domain::tsquery`).
    if parse.positive.is_empty() || parse.query.is_empty() {
        return None;
    }
    let query = without_contradictions(&parse.query).filter(|q| asks_for_a_word(q))?;
    let articles = u64::try_from(articles).unwrap_or(0);
    // The counts are exact: a lexeme no article of the language holds is in none of them, and
    // a query that requires one is not asked in that language (a reading of the word that is
    // frequent in another language's articles cost a heap check per such article through the
    // one GIN index: `decis`, an English stem in 294,000 articles and the Spanish reading of
    // `decis`, 0.9 s).
    if !can_match(&query, &documents) {
        return None;
    }
    let expected_matches = expected_matches(&query, articles, &documents);
    Some(LanguageQuery {
        query,
        language: parse.language.clone(),
        config: parse.config,
        positive: parse.positive.clone(),
        modelled_server,
        articles,
        expected_matches,
    })
}

/// Queries seen lately as each language's configuration read them (the `q` of a search and of
/// its next pages, or a popular query): [`cached_language_queries`] then asks the database
/// only for what changes with the articles (the languages present and the counts of the
/// query's lexemes), in a statement a fifth of the cost of the one that parses `q` again. An
/// entry is a function of `q` and the text search configurations: it is used only while each
/// language's configuration is the same one (its OID, read with the counts), so a language
/// given a configuration of its own by a migration is read with it at once; a configuration
/// edited in place (`ALTER TEXT SEARCH CONFIGURATION`, which also needs every stored vector
/// rebuilt) is read after a restart. Bounded: emptied when it holds [`Self::CAPACITY`] queries.
#[derive(Debug, Default)]
pub struct QueryParses {
    entries: Mutex<HashMap<String, Arc<[LanguageParse]>>>,
}

impl QueryParses {
    /// At most this many queries are kept (each a few hundred bytes per language).
    pub const CAPACITY: usize = 4096;

    fn get(&self, q: &str) -> Option<Arc<[LanguageParse]>> {
        self.lock().get(q).cloned()
    }

    fn put(&self, q: &str, parses: Vec<LanguageParse>) {
        let mut entries = self.lock();
        if entries.len() >= Self::CAPACITY {
            entries.clear();
        }
        entries.insert(q.to_owned(), parses.into());
    }

    /// How many queries are kept (tests).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<[LanguageParse]>>> {
        // A panic while holding the lock left a map that is still whole: keep using it.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A row of [`cached_language_queries`]' statement: a language present, its configuration, and
/// the counts of the asked lexemes its articles hold ('' is the language's articles).
struct CountRow {
    language: String,
    config: Oid,
    modelled_server: bool,
    lexemes: Vec<String>,
    counts: Vec<i64>,
}

/// [`language_queries`], with `q`'s parse per configuration taken from `parses` when it holds
/// one for every language present (with the same configuration), else read and kept there.
pub async fn cached_language_queries(
    db: &PgPool,
    parses: &QueryParses,
    q: &str,
) -> Result<Vec<LanguageQuery>> {
    let Some(known) = parses.get(q) else {
        let (read, queries) = parse_and_count(db, q).await?;
        parses.put(q, read);
        return Ok(queries);
    };
    let mut asked: Vec<&str> = vec![""];
    asked.extend(
        known
            .iter()
            .flat_map(|p| p.lexemes.iter().map(String::as_str)),
    );
    asked.sort_unstable();
    asked.dedup();
    let rows = sqlx::query_as!(
        CountRow,
        // What `parse_and_count`'s statement reads beside the parse (the counts of lexemes one
        // language's configuration does not make are read for the others too, and not used).
        // The lexemes are a subquery's value, so the plan made without the values (an index
        // lookup a lexeme) costs what a plan made with them does and PostgreSQL keeps it: seen
        // as an array of two, the statement was planned again each run, 0.17 ms.
        r#"SELECT l.language AS "language!", search_config(l.language)::oid AS "config!",
                  current_setting('lc_ctype') IN ('C', 'POSIX')
                  AND current_setting('server_encoding') = 'UTF8'
                  AND current_setting('server_version_num')::int / 10000 = 15
                  AS "modelled_server!",
                  k.lexemes AS "lexemes!", k.counts AS "counts!"
             FROM search_languages l
            CROSS JOIN LATERAL (
                  SELECT coalesce(array_agg(w.lexeme), '{}') AS lexemes,
                         coalesce(array_agg(coalesce(s.articles, 0)), '{}') AS counts
                    FROM unnest((SELECT $1::text[])) AS w (lexeme)
                    LEFT JOIN search_lexemes s
                      ON s.language = l.language AND s.lexeme = w.lexeme) k
            ORDER BY l.language"#,
        &asked as &[&str]
    )
    .fetch_all(db)
    .await?;
    let mut queries = Vec::with_capacity(rows.len());
    for row in &rows {
        let same = known
            .iter()
            .find(|p| p.language == row.language && p.config == row.config);
        let Some(parse) = same else {
            // A language new since, or given another configuration: parse `q` again.
            let (read, queries) = parse_and_count(db, q).await?;
            parses.put(q, read);
            return Ok(queries);
        };
        let counts = counts_by_lexeme(&row.lexemes, &row.counts);
        let articles = counts.get("").copied().unwrap_or(0);
        let held = |w: &str| {
            parse
                .lexemes
                .iter()
                .any(|l| l == w)
                .then(|| counts.get(w).copied().unwrap_or(0))
        };
        queries.extend(counted_query(
            parse,
            row.modelled_server,
            i64::try_from(articles).unwrap_or(i64::MAX),
            held,
        ));
    }
    Ok(queries)
}

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
/// after the walk in the walk's snapshot (see [`page_examining`]): in another, an article
/// written within the walked range meanwhile moved the end newer (the walk's last match `last`,
/// its oldest, is returned when it is older, so no match is served twice) and one deleted moved
/// it past articles the walk never examined (skipped).
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

/// The connection a page's statements run on, and whether they share one snapshot.
struct PageReader<'c> {
    db: &'c mut PgConnection,
    /// The statements run in one read-only REPEATABLE READ transaction: only then may where a
    /// walk stopped be looked up by a statement of its own. In two snapshots, an article deleted
    /// in between moved the end found past the last article the walk examined, and the next
    /// page started after articles never read.
    one_snapshot: bool,
    /// A walk stopped short outside one snapshot: the page is to be read again in one.
    read_again: bool,
}

/// See [`walk_end_query`]; `None` for [`Access::Index`], which reads every match, and when
/// `reader` is not in one snapshot (it is then marked to read the page again in one).
async fn walk_end(
    reader: &mut PageReader<'_>,
    filters: &Filters,
    before: Option<&(DateTime<Utc>, String)>,
    access: Access,
    last: Option<&(DateTime<Utc>, String)>,
) -> Result<Option<(DateTime<Utc>, String)>> {
    let Access::Walk(examine) = access else {
        return Ok(None);
    };
    if !reader.one_snapshot {
        reader.read_again = true;
        return Ok(None);
    }
    let mut qb = walk_end_query("", filters, before, examine, last);
    let end: Option<(DateTime<Utc>, String)> = qb
        .build_query_as()
        .persistent(false)
        .fetch_optional(&mut *reader.db)
        .await?;
    Ok(end)
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
struct ReadHit {
    position: Position,
    item: ArticleItem,
    columns: HitColumns,
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
fn keep_prepared(access: Access, filters: &Filters) -> bool {
    matches!(access, Access::Walk(_))
        && filters.organization_id.is_none()
        && filters.journalist_id.is_none()
}

/// Runs a page statement whose extra columns are `T`, each row's place taken from the row;
/// prepared once and kept on the connection when `prepared` (see [`keep_prepared`]).
async fn read_hits<T>(
    db: &mut PgConnection,
    mut qb: QueryBuilder<'static, Postgres>,
    prepared: bool,
    mut split: impl FnMut(T) -> (i16, HitColumns),
) -> Result<Vec<ReadHit>>
where
    T: for<'r> FromRow<'r, PgRow>,
{
    let read: Vec<(ArticleItem, T)> =
        articles::fetch_items(db, qb.build().persistent(prepared)).await?;
    Ok(read
        .into_iter()
        .map(|(item, extra)| {
            let (score, columns) = split(extra);
            ReadHit {
                position: Position {
                    score,
                    published_at: item.published_at,
                    id: item.id.clone(),
                },
                item,
                columns,
            }
        })
        .collect())
}

/// Matches newest first (score 0), strictly before `before` when given, with their items;
/// and, when a walk stopped at its limit before it found `wanted`, where it stopped.
async fn newest_hits(
    reader: &mut PageReader<'_>,
    spec: &SearchSpec,
    languages: &[LanguageQuery],
    before: Option<&(DateTime<Utc>, String)>,
    wanted: usize,
    viewer: Option<&str>,
    examine: i64,
) -> Result<(Vec<ReadHit>, Option<(DateTime<Utc>, String)>)> {
    let access = access(languages, wanted as i64, examine);
    let qb = newest_hits_query(
        "",
        languages,
        &spec.filters,
        before,
        wanted as i64,
        viewer,
        access,
    );
    let prepared = keep_prepared(access, &spec.filters);
    let hits = read_hits(&mut *reader.db, qb, prepared, |columns: HitColumns| {
        (0, columns)
    })
    .await?;
    let stopped = if hits.len() < wanted {
        let last = hits
            .last()
            .map(|h| (h.position.published_at, h.position.id.clone()));
        walk_end(reader, &spec.filters, before, access, last.as_ref()).await?
    } else {
        None
    };
    Ok((hits, stopped))
}

/// What [`ranked_hits_query`] reads beside a hit's item.
#[derive(Debug, FromRow)]
struct RankedColumns {
    rank_score: i16,
    window_end_at: DateTime<Utc>,
    window_end_id: String,
    window_size: i64,
    #[sqlx(flatten)]
    hit: HitColumns,
}

/// The rows of a page and where the next one starts.
struct ReadPage {
    hits: Vec<ReadHit>,
    /// `sort=relevance`: the ranked window's end, which the cursor keeps.
    window_end: Option<(DateTime<Utc>, String)>,
    /// Where a walk stopped at its limit before it filled the page: the next page starts
    /// strictly after it (score 0), whether or not this one is full.
    stopped: Option<(DateTime<Utc>, String)>,
}

/// The hits of a `sort=relevance` page (and one more, to know whether another page follows),
/// and the ranked window's end its cursor keeps.
async fn ranked_hits(
    reader: &mut PageReader<'_>,
    spec: &SearchSpec,
    languages: &[LanguageQuery],
    wanted: usize,
    viewer: Option<&str>,
    examine: i64,
) -> Result<ReadPage> {
    let mut window_end = spec.window_end.clone();
    let mut hits = Vec::new();
    // Page 1's window holds every match when the page is not full: `wanted` is at most a page
    // and one row, far fewer than the window's `RANKED_MATCHES`, so the window was not full
    // either; then nothing is older, and a rare query is spared a second index scan. Unless a
    // walk stopped at its limit: then the window is the matches among the articles it examined.
    debug_assert!(wanted as i64 <= RANKED_MATCHES);
    let mut all_matches = false;
    let in_window = spec.after.as_ref().is_none_or(|after| after.score > 0);
    if in_window {
        let access = access(languages, RANKED_MATCHES, examine);
        let page = RankedPage {
            window_end: window_end.as_ref(),
            after: spec.after.as_ref(),
            wanted: wanted as i64,
        };
        let qb = ranked_hits_query("", languages, &spec.filters, page, viewer, access);
        let mut end = None;
        let mut size = 0;
        let prepared = keep_prepared(access, &spec.filters);
        hits = read_hits(&mut *reader.db, qb, prepared, |ranked: RankedColumns| {
            end.get_or_insert((ranked.window_end_at, ranked.window_end_id));
            size = ranked.window_size;
            (ranked.rank_score, ranked.hit)
        })
        .await?;
        if window_end.is_none() {
            if size < RANKED_MATCHES
                && let Some(stopped) =
                    walk_end(reader, &spec.filters, None, access, end.as_ref()).await?
            {
                // The window is the matches at or after where the walk stopped.
                if hits.len() < wanted {
                    return Ok(ReadPage {
                        hits,
                        window_end: Some(stopped.clone()),
                        stopped: Some(stopped),
                    });
                }
                end = Some(stopped);
            }
            all_matches = hits.len() < wanted;
            window_end = end;
        }
    }
    let mut stopped = None;
    if hits.len() < wanted
        && !all_matches
        && let Some(end) = &window_end
    {
        // Past the window: older matches, newest first, unranked.
        let before = match &spec.after {
            Some(after) if after.score == 0 => (after.published_at, after.id.clone()),
            _ => end.clone(),
        };
        let more = wanted - hits.len();
        let (older, stop) = newest_hits(
            reader,
            spec,
            languages,
            Some(&before),
            more,
            viewer,
            examine,
        )
        .await?;
        hits.extend(older);
        stopped = stop;
    }
    Ok(ReadPage {
        hits,
        window_end,
        stopped,
    })
}

/// Begins the transaction a page's walks and the statements finding where they stopped share.
const ONE_SNAPSHOT: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";

/// The rows of a page (`limit` and one more) for `languages`' queries.
async fn read_page(
    reader: &mut PageReader<'_>,
    spec: &SearchSpec,
    languages: &[LanguageQuery],
    limit: usize,
    viewer: Option<&str>,
    examine: i64,
) -> Result<ReadPage> {
    if spec.sort == Sort::Relevance {
        return ranked_hits(reader, spec, languages, limit + 1, viewer, examine).await;
    }
    let before = spec.after.as_ref().map(|p| (p.published_at, p.id.clone()));
    let (hits, stopped) = newest_hits(
        reader,
        spec,
        languages,
        before.as_ref(),
        limit + 1,
        viewer,
        examine,
    )
    .await?;
    Ok(ReadPage {
        hits,
        window_end: None,
        stopped,
    })
}

/// [`read_page`] on a pooled connection, statement by statement; again in one read-only
/// REPEATABLE READ transaction when a walk stopped short and where it stopped is needed (see
/// [`PageReader`]). Most pages never need it: a frequent word fills a page long before a
/// walk's limit, and the GIN index reads every match at once. The transaction's two round
/// trips cost a walked page about 8% (`sort=newest` of a frequent word).
async fn read_in_snapshot(
    pool: &PgPool,
    spec: &SearchSpec,
    languages: &[LanguageQuery],
    limit: usize,
    viewer: Option<&str>,
    examine: i64,
) -> Result<ReadPage> {
    let mut db = pool.acquire().await?;
    let mut reader = PageReader {
        db: &mut db,
        one_snapshot: false,
        read_again: false,
    };
    let read = read_page(&mut reader, spec, languages, limit, viewer, examine).await?;
    if !reader.read_again {
        return Ok(read);
    }
    drop(db);
    // Begun to completion even if this request is cancelled meanwhile, so the connection
    // never goes back to the pool inside a transaction the server has begun.
    let mut snapshot = begin_to_completion(pool, Some(ONE_SNAPSHOT)).await?;
    let mut reader = PageReader {
        db: &mut snapshot,
        one_snapshot: true,
        read_again: false,
    };
    let read = read_page(&mut reader, spec, languages, limit, viewer, examine).await?;
    snapshot.commit().await?;
    Ok(read)
}

/// One page of a search, as `viewer` sees it.
pub async fn page(
    pool: &PgPool,
    parses: &QueryParses,
    spec: &SearchSpec,
    limit: i64,
    viewer: Option<&str>,
) -> Result<SearchPage> {
    page_examining(pool, parses, spec, limit, viewer, WALK_EXAMINES).await
}

/// [`page`] with walks that examine at most `examine` articles (tests use a small one).
pub async fn page_examining(
    pool: &PgPool,
    parses: &QueryParses,
    spec: &SearchSpec,
    limit: i64,
    viewer: Option<&str>,
    examine: i64,
) -> Result<SearchPage> {
    let languages = cached_language_queries(pool, parses, &spec.q).await?;
    let limit = limit as usize;
    // The page's hits (and one more, to know whether another page follows), the ranked
    // window's end a `sort=relevance` cursor keeps, and where a walk stopped short.
    let ReadPage {
        hits: mut read,
        window_end,
        stopped,
    } = if languages.is_empty() || spec.filters.matches_nothing() {
        ReadPage {
            hits: Vec::new(),
            window_end: None,
            stopped: None,
        }
    } else {
        read_in_snapshot(pool, spec, &languages, limit, viewer, examine).await?
    };
    // In list order: the statements order their rows, in the database's collation as the
    // article list and the cursors' comparisons do (sorting again here, by bytes, disagreed with
    // them in another collation than "C": a walk skipped or repeated articles tied on
    // `published_at`).
    let spec = SearchSpec {
        window_end,
        ..spec.clone()
    };
    let next_cursor = if read.len() > limit {
        Some(SearchCursor::after(&spec, &read[limit - 1].position).encode())
    } else {
        stopped.map(|(published_at, id)| {
            let at = Position {
                score: 0,
                published_at,
                id,
            };
            SearchCursor::after(&spec, &at).encode()
        })
    };
    read.truncate(limit);
    let data = hits(pool, read, &languages).await?;
    // A page cut short by the walk's limit does not know that nothing matches.
    let suggestion = if data.is_empty() && spec.after.is_none() && next_cursor.is_none() {
        suggestion(pool, &spec.q).await?
    } else {
        None
    };
    Ok(SearchPage {
        count: data.len(),
        data,
        next_cursor,
        suggestion,
    })
}

/// What a page's statement reads beside an article's item: its language, per field whether the
/// stored vector holds one of the query's positive lexemes with the field's weight (a field
/// without one gets no highlight, whatever its words look like), and the body only when it is
/// such a field (it is often stored out of line: a title match does not read it).
#[derive(Debug, FromRow)]
struct HitColumns {
    language: String,
    in_title: bool,
    in_summary: bool,
    matched_body: Option<String>,
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

/// The page's hits with scores and highlights, in the rows' order, from what their statement
/// read: the highlights are marked here (`domain::text_search`), and only fields the model does
/// not cover ask `ts_headline`.
async fn hits(
    pool: &PgPool,
    read: Vec<ReadHit>,
    languages: &[LanguageQuery],
) -> Result<Vec<SearchHit>> {
    let marking = Marking::new(languages);
    let mut markers = marking.markers();
    let mut found = Vec::with_capacity(read.len());
    let mut left = Vec::new();
    for ReadHit {
        position,
        item,
        columns,
    } in read
    {
        let fields = [
            (
                HighlightField::Title,
                columns.in_title.then_some(item.title.as_str()),
            ),
            (
                HighlightField::Summary,
                columns.in_summary.then_some(item.summary.as_str()),
            ),
            (HighlightField::Body, columns.matched_body.as_deref()),
        ];
        let mut highlights = Vec::new();
        for (field, text) in fields {
            let Some(text) = text else { continue };
            match markers.fragment(&columns.language, text) {
                Some(fragment) => highlights.push(Highlight {
                    field,
                    text: fragment.text,
                    marks: fragment.marks,
                }),
                None => left.push((item.id.clone(), field)),
            }
        }
        found.push(SearchHit {
            item,
            score: f64::from(position.score),
            highlights,
        });
    }
    if !left.is_empty() {
        let mut marked: HashMap<String, Vec<Highlight>> = HashMap::new();
        for (id, highlight) in headlines(pool, &left, languages).await? {
            marked.entry(id).or_default().push(highlight);
        }
        for hit in &mut found {
            if let Some(more) = marked.remove(&hit.item.id) {
                hit.highlights.extend(more);
                hit.highlights.sort_by_key(|h| h.field);
            }
        }
    }
    Ok(found)
}

/// Per article language the Rust model of its configuration and the query's positive lexemes.
struct Marking {
    languages: HashMap<String, (Folding, HashSet<String>)>,
}

impl Marking {
    fn new(languages: &[LanguageQuery]) -> Self {
        let languages = languages
            .iter()
            .filter(|l| l.modelled_server)
            .filter_map(|l| {
                let folding = Folding::of_language(&l.language)?;
                let lexemes = query_lexemes(&l.positive).into_iter().collect();
                Some((l.language.clone(), (folding, lexemes)))
            })
            .collect();
        Self { languages }
    }

    /// A marker per modelled language, for one page's fields.
    fn markers(&self) -> Markers<'_> {
        Markers(
            self.languages
                .iter()
                .map(|(language, (folding, lexemes))| {
                    (language.as_str(), Marker::new(folding, lexemes))
                })
                .collect(),
        )
    }
}

/// The markers of one page, per language (they remember the words they have seen).
struct Markers<'a>(HashMap<&'a str, Marker<'a>>);

impl Markers<'_> {
    /// The highlight of a field whose stored vector holds a query lexeme, or `None` when the
    /// model does not cover the language or the text, or marks nothing there (a stemmer
    /// differing from PostgreSQL's): then `ts_headline` decides.
    fn fragment(&mut self, language: &str, text: &str) -> Option<highlight::Fragment> {
        let marks = self.0.get_mut(language)?.marks(text)?;
        highlight::fragment_at(text, &marks)
    }
}

/// `ts_headline` options: the marker characters, and the whole field marked (then cut to 200
/// characters around its first mark, as a field marked in Rust is).
fn headline_options() -> String {
    format!(
        "StartSel={}, StopSel={}, HighlightAll=true",
        highlight::START,
        highlight::STOP
    )
}

/// `ts_headline`'s highlights of these fields (of articles of the page), for the fields the
/// Rust model leaves to PostgreSQL.
async fn headlines(
    pool: &PgPool,
    fields: &[(String, HighlightField)],
    languages: &[LanguageQuery],
) -> Result<Vec<(String, Highlight)>> {
    let codes: Vec<String> = languages.iter().map(|l| l.language.clone()).collect();
    let configs: Vec<Oid> = languages.iter().map(|l| l.config).collect();
    let positives: Vec<String> = languages.iter().map(|l| l.positive.clone()).collect();
    let ids: Vec<String> = fields.iter().map(|(id, _)| id.clone()).collect();
    let names: Vec<String> = fields.iter().map(|(_, f)| f.name().to_owned()).collect();
    // Marker characters in the text itself become U+FFFD (one code point for one) so they
    // cannot fake a mark.
    let rows = sqlx::query!(
        r#"SELECT f.id AS "id!", f.field AS "field!",
                  ts_headline(l.config::regconfig,
                              translate(CASE f.field WHEN 'title' THEN a.title
                                                     WHEN 'summary' THEN a.summary
                                                     ELSE a.body END,
                                        U&'\E000\E001', U&'\FFFD\FFFD'),
                              l.positive::tsquery, $4) AS "marked!"
             FROM unnest($1::text[], $5::text[]) AS f (id, field)
             JOIN articles a ON a.id = f.id
             JOIN unnest($2::text[], $3::text[], $6::oid[]) AS l (language, positive, config)
               ON l.language = a.language"#,
        &ids,
        &codes,
        &positives,
        headline_options(),
        &names,
        &configs,
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|row| {
            let field = HighlightField::from_name(&row.field)?;
            let fragment = highlight::fragment(&row.marked)?;
            debug_assert!(fragment.text.chars().count() <= MAX_FRAGMENT_CHARS);
            Some((
                row.id,
                Highlight {
                    field,
                    text: fragment.text,
                    marks: fragment.marks,
                },
            ))
        })
        .collect())
}

/// `q` with its unknown words respelt as the closest word of the articles (trigram
/// similarity), or `None` when no word has a close one.
pub async fn suggestion(db: impl PgExecutor<'_>, q: &str) -> Result<Option<String>> {
    let words = query_words(q);
    // Numbers and very short words are not respelt (the word list holds neither), nor words
    // past the first few (each is a trigram search).
    let asked = words_to_respell(q, &words);
    let rows = sqlx::query!(
        r#"SELECT w.ord AS "ord!",
                  CASE WHEN w.word = ''
                         OR EXISTS (SELECT 1 FROM search_words s WHERE s.word = f.folded)
                         -- a stop word in some article language is not a misspelling
                         OR EXISTS (SELECT 1 FROM search_languages l
                                     WHERE numnode(plainto_tsquery(search_config(l.language), w.word)) = 0)
                       THEN NULL
                       ELSE (SELECT s.word FROM search_words s
                              WHERE s.word OPERATOR(public.%) f.folded
                              ORDER BY public.similarity(s.word, f.folded) DESC, s.word
                              LIMIT 1)
                  END AS respelling
             FROM unnest($1::text[]) WITH ORDINALITY AS w (word, ord)
            CROSS JOIN LATERAL (SELECT lower(public.unaccent('public.unaccent'::regdictionary, w.word)) AS folded) f
            ORDER BY w.ord"#,
        &asked
    )
    .fetch_all(db)
    .await?;
    let respellings: Vec<Option<String>> = rows.into_iter().map(|r| r.respelling).collect();
    Ok(respell(q, &words, &respellings))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(q: &str) -> Vec<LanguageParse> {
        vec![LanguageParse {
            language: "en".to_owned(),
            config: Oid(1),
            query: format!("'{q}'"),
            positive: format!("'{q}'"),
            lexemes: vec![q.to_owned()],
        }]
    }

    #[test]
    fn kept_parses_are_bounded() {
        let parses = QueryParses::default();
        for i in 0..QueryParses::CAPACITY {
            parses.put(&format!("w{i}"), parse(&format!("w{i}")));
        }
        assert_eq!(parses.len(), QueryParses::CAPACITY);
        assert!(parses.get("w0").is_some());
        // Full: emptied, then the new query kept.
        parses.put("last", parse("last"));
        assert_eq!(parses.len(), 1);
        assert!(parses.get("w0").is_none());
        assert_eq!(parses.get("last").unwrap()[0].query, "'last'");
    }
}
