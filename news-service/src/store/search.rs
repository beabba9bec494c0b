//! Search (docs/news.md, "GET /v1/news/search"): the query in each article language's configuration, the matching rows
//! in list order, their highlights, and respellings for a query that matched nothing. The
//! migration `search` explains the columns, configurations and word list this reads.
//!
//! Every article language present gets its own predicate, `(a.language = $l AND
//! a.search_vector @@ $query_l)`, ORed: each article is matched with the tsquery its own
//! configuration makes of `q` (an exclusion then excludes in every language, which one tsquery
//! ORed over languages would not), and each predicate can use the GIN index (a BitmapOr) or be
//! a filter on a walk of the `published_at` index when the words are frequent: the planner sees
//! the tsqueries' values (the statements are not kept prepared, so no generic plan forgets them).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sqlx::postgres::types::Oid;
use sqlx::{FromRow, PgExecutor, PgPool, Postgres, QueryBuilder};

use crate::domain::articles::ArticleItem;
use crate::domain::highlight::{self, MAX_FRAGMENT_CHARS};
use crate::domain::search::{
    Filters, Position, RANKED_MATCHES, SearchCursor, SearchSpec, Sort, any_lexeme, positive_query,
    query_words, rank_window, respell, restrict_to_weight,
};
use crate::domain::search::{Highlight, HighlightField, SearchHit, SearchPage};
use crate::error::Result;
use crate::store::articles;

/// `q` as one article language's configuration reads it.
#[derive(Debug, Clone)]
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
}

/// The query in every article language whose configuration finds something to look for in it
/// (none when `q` is stop words or exclusions only: then nothing matches).
pub async fn language_queries(db: impl PgExecutor<'_>, q: &str) -> Result<Vec<LanguageQuery>> {
    let positive = positive_query(q);
    let rows = sqlx::query_as!(
        LanguageQuery,
        // OFFSET 0 keeps the subquery whole, so `search_config` runs once per language rather
        // than once per use.
        r#"SELECT l.language AS "language!", c.config::oid AS "config!",
                  websearch_to_tsquery(c.config, $1)::text AS "query!",
                  websearch_to_tsquery(c.config, $2)::text AS "positive!"
             FROM search_languages l
            CROSS JOIN LATERAL (SELECT search_config(l.language) AS config OFFSET 0) c
            ORDER BY l.language"#,
        q,
        positive
    )
    .fetch_all(db)
    .await?;
    // An empty tsquery prints as ''.
    Ok(rows
        .into_iter()
        .filter(|l| !l.positive.is_empty() && !l.query.is_empty())
        .collect())
}

#[derive(Debug, FromRow)]
struct PositionRow {
    id: String,
    published_at: DateTime<Utc>,
    score: i16,
}

impl From<PositionRow> for Position {
    fn from(row: PositionRow) -> Self {
        Self {
            score: row.score,
            published_at: row.published_at,
            id: row.id,
        }
    }
}

/// `(a.language = $l AND a.search_vector @@ $q::tsquery) OR ...` over the languages.
fn push_match(qb: &mut QueryBuilder<'_, Postgres>, languages: &[LanguageQuery]) {
    qb.push("(");
    for (i, l) in languages.iter().enumerate() {
        if i > 0 {
            qb.push(" OR ");
        }
        qb.push("(a.language = ")
            .push_bind(l.language.clone())
            .push(" AND a.search_vector @@ ")
            .push_bind(l.query.clone())
            .push("::tsquery)");
    }
    qb.push(")");
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
) -> QueryBuilder<'static, Postgres> {
    let mut qb = QueryBuilder::new(prefix);
    qb.push("SELECT a.id, a.published_at, ");
    push_score(&mut qb, languages);
    qb.push(" AS score FROM articles a WHERE ");
    push_match(&mut qb, languages);
    push_filters(&mut qb, filters);
    if let Some((published_at, id)) = window_end {
        qb.push(" AND (a.published_at, a.id) >= (")
            .push_bind(*published_at)
            .push(", ")
            .push_bind(id.clone())
            .push(")");
    }
    // With an end, the window is page 1's rows plus any match published since: bounded again
    // so a flood of new matches cannot make a later page slow.
    let limit = if window_end.is_some() {
        2 * RANKED_MATCHES
    } else {
        RANKED_MATCHES
    };
    qb.push(" ORDER BY a.published_at DESC, a.id DESC LIMIT ")
        .push_bind(limit);
    qb
}

/// Matches newest first (score 0), strictly before `before` when given. `prefix` as above.
pub fn newest_query(
    prefix: &str,
    languages: &[LanguageQuery],
    filters: &Filters,
    before: Option<&(DateTime<Utc>, String)>,
    limit: i64,
) -> QueryBuilder<'static, Postgres> {
    let mut qb = QueryBuilder::new(prefix);
    qb.push("SELECT a.id, a.published_at, 0::smallint AS score FROM articles a WHERE ");
    push_match(&mut qb, languages);
    push_filters(&mut qb, filters);
    if let Some((published_at, id)) = before {
        qb.push(" AND (a.published_at, a.id) < (")
            .push_bind(*published_at)
            .push(", ")
            .push_bind(id.clone())
            .push(")");
    }
    qb.push(" ORDER BY a.published_at DESC, a.id DESC LIMIT ")
        .push_bind(limit);
    qb
}

async fn positions(
    pool: &PgPool,
    mut qb: QueryBuilder<'static, Postgres>,
) -> Result<Vec<Position>> {
    // Not prepared once and kept: each search is planned with its own words' frequencies.
    let rows: Vec<PositionRow> = qb
        .build_query_as()
        .persistent(false)
        .fetch_all(pool)
        .await?;
    Ok(rows.into_iter().map(Position::from).collect())
}

/// The rows of the page (and one more, to know whether another page follows) in list order,
/// and the ranked window's end a `sort=relevance` cursor keeps.
async fn page_rows(
    pool: &PgPool,
    spec: &SearchSpec,
    languages: &[LanguageQuery],
    wanted: usize,
) -> Result<(Vec<Position>, Option<(DateTime<Utc>, String)>)> {
    let key = |p: &Position| (p.published_at, p.id.clone());
    if spec.sort == Sort::Newest {
        let before = spec.after.as_ref().map(key);
        let qb = newest_query("", languages, &spec.filters, before.as_ref(), wanted as i64);
        return Ok((positions(pool, qb).await?, None));
    }
    let mut window_end = spec.window_end.clone();
    let mut rows = Vec::new();
    let in_window = spec.after.as_ref().is_none_or(|after| after.score > 0);
    if in_window {
        let qb = window_query("", languages, &spec.filters, window_end.as_ref());
        let window = positions(pool, qb).await?;
        if window_end.is_none() {
            window_end = window.last().map(key);
        }
        rows = rank_window(window, spec.after.as_ref());
        rows.truncate(wanted);
    }
    if rows.len() < wanted
        && let Some(end) = &window_end
    {
        // Past the window: older matches, newest first, unranked.
        let before = match &spec.after {
            Some(after) if after.score == 0 => key(after),
            _ => end.clone(),
        };
        let qb = newest_query(
            "",
            languages,
            &spec.filters,
            Some(&before),
            (wanted - rows.len()) as i64,
        );
        rows.extend(positions(pool, qb).await?);
    }
    Ok((rows, window_end))
}

/// One page of a search, as `viewer` sees it.
pub async fn page(
    pool: &PgPool,
    spec: &SearchSpec,
    limit: i64,
    viewer: Option<&str>,
) -> Result<SearchPage> {
    let languages = language_queries(pool, &spec.q).await?;
    let limit = limit as usize;
    let (mut rows, window_end) = if languages.is_empty() || spec.filters.matches_nothing() {
        (Vec::new(), None)
    } else {
        page_rows(pool, spec, &languages, limit + 1).await?
    };
    let next_cursor = (rows.len() > limit).then(|| {
        let spec = SearchSpec {
            window_end,
            ..spec.clone()
        };
        SearchCursor::after(&spec, &rows[limit - 1]).encode()
    });
    rows.truncate(limit);
    let data = hits(pool, &rows, &languages, viewer).await?;
    let suggestion = if data.is_empty() && spec.after.is_none() {
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

/// The page's articles with scores and highlights, in the rows' order.
async fn hits(
    pool: &PgPool,
    rows: &[Position],
    languages: &[LanguageQuery],
    viewer: Option<&str>,
) -> Result<Vec<SearchHit>> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<String> = rows.iter().map(|r| r.id.clone()).collect();
    let mut items: HashMap<String, ArticleItem> = articles::items_by_id(pool, &ids, viewer)
        .await?
        .into_iter()
        .map(|item| (item.id.clone(), item))
        .collect();
    let mut highlights = highlights(pool, &ids, languages).await?;
    Ok(rows
        .iter()
        // An article deleted between the two reads is left out rather than half shown.
        .filter_map(|row| {
            Some(SearchHit {
                item: items.remove(&row.id)?,
                score: f64::from(row.score),
                highlights: highlights.remove(&row.id).unwrap_or_default(),
            })
        })
        .collect())
}

/// `ts_headline` options: the marker characters, and for a long body one fragment of about 30
/// words (cut to 200 characters afterwards). Titles, summaries and short bodies are marked
/// whole (then cut when over 200 characters): a fragment would drop their edge words.
fn headline_options(whole: bool) -> String {
    let markers = format!("StartSel={}, StopSel={}", highlight::START, highlight::STOP);
    if whole {
        format!("{markers}, HighlightAll=true")
    } else {
        format!("{markers}, MaxWords=30, MinWords=12, MaxFragments=1")
    }
}

/// Per article, the highlights of the fields the query's positive words match in.
async fn highlights(
    pool: &PgPool,
    ids: &[String],
    languages: &[LanguageQuery],
) -> Result<HashMap<String, Vec<Highlight>>> {
    let codes: Vec<String> = languages.iter().map(|l| l.language.clone()).collect();
    let configs: Vec<Oid> = languages.iter().map(|l| l.config).collect();
    let positives: Vec<String> = languages.iter().map(|l| l.positive.clone()).collect();
    // Per field (A title, B summary, C body): any positive lexeme there. `ts_headline` reads the
    // whole text again and is most of a page's cost; a field without a lexeme gets no highlight.
    let in_field = |weight| -> Vec<String> {
        languages
            .iter()
            .map(|l| any_lexeme(&l.positive, weight))
            .collect()
    };
    let (in_title, in_summary, in_body) = (in_field('A'), in_field('B'), in_field('C'));
    // Marker characters in the text itself become U+FFFD (one code point for one) so they
    // cannot fake a mark.
    let rows = sqlx::query!(
        r#"SELECT a.id,
                  CASE WHEN a.search_vector @@ l.in_title::tsquery THEN
                  ts_headline(l.config::regconfig,
                              translate(a.title, U&'\E000\E001', U&'\FFFD\FFFD'),
                              l.positive::tsquery, $4) ELSE '' END AS "title!",
                  CASE WHEN a.search_vector @@ l.in_summary::tsquery THEN
                  ts_headline(l.config::regconfig,
                              translate(a.summary, U&'\E000\E001', U&'\FFFD\FFFD'),
                              l.positive::tsquery, $4) ELSE '' END AS "summary!",
                  CASE WHEN a.search_vector @@ l.in_body::tsquery THEN
                  ts_headline(l.config::regconfig,
                              translate(a.body, U&'\E000\E001', U&'\FFFD\FFFD'),
                              l.positive::tsquery,
                              CASE WHEN char_length(a.body) <= $6 THEN $4 ELSE $5 END) ELSE '' END AS "body!"
             FROM articles a
             JOIN unnest($2::text[], $3::text[], $7::oid[], $8::text[], $9::text[], $10::text[])
                  AS l (language, positive, config, in_title, in_summary, in_body)
               ON l.language = a.language
            WHERE a.id = ANY($1)"#,
        ids,
        &codes,
        &positives,
        headline_options(true),
        headline_options(false),
        MAX_FRAGMENT_CHARS as i32,
        &configs,
        &in_title,
        &in_summary,
        &in_body,
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| {
            let fields = [
                (HighlightField::Title, row.title),
                (HighlightField::Summary, row.summary),
                (HighlightField::Body, row.body),
            ];
            let found = fields
                .into_iter()
                .filter_map(|(field, marked)| {
                    let fragment = highlight::fragment(&marked)?;
                    debug_assert!(fragment.text.chars().count() <= MAX_FRAGMENT_CHARS);
                    Some(Highlight {
                        field,
                        text: fragment.text,
                        marks: fragment.marks,
                    })
                })
                .collect();
            (row.id, found)
        })
        .collect())
}

/// `q` with its unknown words respelt as the closest word of the articles (trigram
/// similarity), or `None` when no word has a close one.
pub async fn suggestion(db: impl PgExecutor<'_>, q: &str) -> Result<Option<String>> {
    let words = query_words(q);
    // Numbers and very short words are not respelt (the word list holds neither).
    let asked: Vec<String> = words
        .iter()
        .map(|r| &q[r.clone()])
        .map(|w| {
            let plain = w.chars().count() >= 3 && !w.chars().any(|c| c.is_numeric());
            if plain { w.to_owned() } else { String::new() }
        })
        .collect();
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
