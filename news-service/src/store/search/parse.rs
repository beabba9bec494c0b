//! `q` as each article language's configuration reads it ([`LanguageQuery`]), with the counts
//! the access is chosen by, and the parses kept between searches ([`QueryParses`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sqlx::postgres::types::Oid;
use sqlx::{PgExecutor, PgPool};

use crate::domain::search::positive_query;
use crate::domain::tsquery::{
    asks_for_a_word, can_match, expected_matches, without_contradictions,
};
use crate::error::Result;

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
        // than once per use. `q` is lowered as the articles' texts are (migration
        // `search_fold`). The counted lexemes are those of `q`'s words in the language's
        // configuration (the tsquery's, and the operators' words, which cost nothing).
        r#"SELECT l.language AS "language!", c.config::oid AS "config!",
                  websearch_to_tsquery(c.config, search_fold($1))::text AS "query!",
                  websearch_to_tsquery(c.config, search_fold($2))::text AS "positive!",
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
                    FROM unnest(tsvector_to_array(to_tsvector(c.config, search_fold($1)))) AS w (lexeme)
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
