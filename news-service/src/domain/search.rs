//! Search rules (docs/news.md, "GET /v1/news/search"): what a query may be, which of its words a highlight may mark, the
//! relevance order and its bounded window, the keyset cursor that keeps `q`, filters and sort,
//! and the words a suggestion respells; and the page of matches it answers. Pure functions; the
//! SQL is in `store::search`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared_auth::Problem;
use shared_auth::http::cursor;
use utoipa::ToSchema;

use crate::domain::articles::ArticleItem;
use crate::domain::ids::can_exist;
use crate::error::ErrorCode;

/// `q` is 1..=200 characters (code points) after trimming.
pub const MAX_QUERY_CHARS: usize = 200;

/// `sort=relevance` ranks the newest this-many matches of a query (after its filters); older
/// matches follow them, newest first, with score 0. Keeps a frequent word as cheap as a rare one.
pub const RANKED_MATCHES: i64 = 500;

/// A statement that walks the articles newest first (testing each against the query) examines
/// at most this many articles (of the search's filters, from where its page starts). A page that
/// finds fewer matches than it holds within them stops there: it answers the matches it found
/// (maybe none) and a `next_cursor` that goes on after the last article examined. Keeps a query
/// whose words are frequent but whose matches are rare (`"said said"`: a phrase the words of
/// which are in most articles, side by side in none) from reading every article in one request.
pub const WALK_EXAMINES: i64 = 50_000;

/// How a statement finds a search's matches. The service chooses, not PostgreSQL: the planner
/// estimates a tsquery over every language's articles at once (a lexeme frequent in Spanish
/// articles is taken as frequent in English ones too) and costs a query of many alternatives
/// as one test per row, so it walked the whole table for queries that match a few articles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// The GIN index's matches, then sorted: costs about one row per article that can match.
    Index,
    /// The articles newest first, each tested, examining at most this many: costs about
    /// `wanted × articles ÷ matches` rows when the matches are spread in time.
    Walk(i64),
}

impl Access {
    /// The cheaper access for `wanted` matches (newest first) when about `matches` of
    /// `articles` articles match: the index unless its `matches` rows cost more than the
    /// walk's expected `wanted × articles ÷ matches`; a walk examines at most `examine`
    /// articles (the service's: [`WALK_EXAMINES`]).
    pub fn for_matches(matches: u64, articles: u64, wanted: i64, examine: i64) -> Self {
        let matches = u128::from(matches);
        let walked = u128::from(wanted.max(1).unsigned_abs()) * u128::from(articles);
        if matches * matches <= walked {
            Access::Index
        } else {
            Access::Walk(examine)
        }
    }
}

/// The trimmed query, or the contract's 400.
pub fn parse_query(q: &str) -> Result<String, Problem> {
    let q = q.trim();
    let chars = q.chars().count();
    if chars == 0 || chars > MAX_QUERY_CHARS {
        return Err(Problem::invalid_query(format!(
            "q must be 1 to {MAX_QUERY_CHARS} characters after trimming"
        )));
    }
    if q.contains('\0') {
        return Err(Problem::invalid_query("q must not contain NUL"));
    }
    Ok(q.to_owned())
}

/// The query without its exclusions (`-word`, `-"some words"`): the words a match may be
/// highlighted for, and what decides whether the query asks for anything at all (a query of
/// exclusions or stop words only matches nothing).
pub fn positive_query(q: &str) -> String {
    let mut kept = String::with_capacity(q.len());
    let mut at = 0;
    for excluded in exclusions(q) {
        kept.push_str(&q[at..excluded.start]);
        at = excluded.end;
    }
    kept.push_str(&q[at..]);
    kept
}

/// The byte ranges of `q`'s exclusions, each from its `-` to the end of the word or closing
/// quote it negates: websearch_to_tsquery reads `-` at a word's start, before a word or a quote,
/// as "not".
pub fn exclusions(q: &str) -> Vec<std::ops::Range<usize>> {
    let mut ranges = Vec::new();
    let mut chars = q.char_indices().peekable();
    let mut at_word_start = true;
    while let Some((start, c)) = chars.next() {
        let negates = chars.peek().is_some_and(|&(_, next)| !next.is_whitespace());
        if c == '-' && at_word_start && negates {
            let end = if chars.next_if(|&(_, next)| next == '"').is_some() {
                chars.find(|&(_, inner)| inner == '"').map(|(i, _)| i + 1)
            } else {
                while chars.next_if(|&(_, next)| !next.is_whitespace()).is_some() {}
                chars.peek().map(|&(i, _)| i)
            };
            ranges.push(start..end.unwrap_or(q.len()));
            continue;
        }
        at_word_start = c.is_whitespace();
    }
    ranges
}

/// The order of a search: `relevance` (the default) or `newest`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Sort {
    #[default]
    Relevance,
    Newest,
}

/// Filters of a search; together with `q` and the sort they are what a cursor keeps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filters {
    pub organization_id: Option<String>,
    pub journalist_id: Option<String>,
    /// Inclusive.
    pub published_after: Option<DateTime<Utc>>,
    /// Exclusive.
    pub published_before: Option<DateTime<Utc>>,
}

impl Filters {
    /// Whether a filter names an id no row can have, or the date range is empty.
    pub fn matches_nothing(&self) -> bool {
        let impossible_id = [&self.organization_id, &self.journalist_id]
            .into_iter()
            .flatten()
            .any(|id| !can_exist(id));
        let empty_range = matches!(
            (self.published_after, self.published_before),
            (Some(after), Some(before)) if after >= before
        );
        impossible_id || empty_range
    }
}

/// An RFC 3339 bound that PostgreSQL can hold, as UTC; else the contract's 400.
///
/// PostgreSQL keeps microseconds, and a finer bound sent as is would be truncated. Rounded up
/// to the microsecond instead, both bounds keep their meaning for every stored time `t`:
/// `t >= after` and `t < before` hold exactly when they hold for the bound as written. And the
/// value a cursor keeps is the one the same bound sent again parses to.
pub fn parse_time(name: &str, text: &str) -> Result<DateTime<Utc>, Problem> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
        .and_then(|t| {
            // chrono reads nanoseconds and drops finer digits: a bound written finer still
            // lies after the nanosecond chrono read, so it counts as the next one.
            let finer = i64::from(written_finer_than_nanoseconds(text));
            t.checked_add_signed(chrono::TimeDelta::nanoseconds(finer))
        })
        .and_then(ceil_to_micros)
        .filter(|t| cursor::timestamp(t.timestamp_micros()).is_some())
        .ok_or_else(|| {
            Problem::invalid_query(format!(
                "{name} must be an RFC 3339 date-time (2026-11-21T09:30:00Z)"
            ))
        })
}

/// Whether an RFC 3339 text has a non-zero digit past the ninth of its fraction of a second
/// (its only `.` starts the fraction).
fn written_finer_than_nanoseconds(text: &str) -> bool {
    text.split_once('.').is_some_and(|(_, fraction)| {
        fraction
            .chars()
            .take_while(char::is_ascii_digit)
            .skip(9)
            .any(|digit| digit != '0')
    })
}

/// The first whole microsecond at or after `t` (`None` past chrono's range).
fn ceil_to_micros(t: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let below = i64::from(t.timestamp_subsec_nanos() % 1_000);
    if below == 0 {
        return Some(t);
    }
    t.checked_add_signed(chrono::TimeDelta::nanoseconds(1_000 - below))
}

/// One match as ordered: its score and its place in time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    /// 3 title, 2 summary, 1 body (the best field the query matches in), 0 outside the ranked
    /// window (or for `sort=newest`, which does not rank).
    pub score: i16,
    pub published_at: DateTime<Utc>,
    pub id: String,
}

/// Which list a cursor belongs to: only this one value, so an article-list cursor (whose `k` is
/// another letter) fails to decode here, and a search cursor fails there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum SearchKind {
    #[serde(rename = "s")]
    Search,
}

/// The keyset cursor of a search: the query it continues, and where its next page starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchCursor {
    k: SearchKind,
    pub q: String,
    #[serde(rename = "s")]
    pub sort: Sort,
    #[serde(rename = "o", default, skip_serializing_if = "Option::is_none")]
    pub organization_id: Option<String>,
    #[serde(rename = "j", default, skip_serializing_if = "Option::is_none")]
    pub journalist_id: Option<String>,
    #[serde(rename = "a", default, skip_serializing_if = "Option::is_none")]
    published_after: Option<i64>,
    #[serde(rename = "b", default, skip_serializing_if = "Option::is_none")]
    published_before: Option<i64>,
    /// The last row served: score, `published_at` (microseconds), id.
    #[serde(rename = "p")]
    last: (i16, i64, String),
    /// `sort=relevance`: the oldest row of the ranked window as page 1 found it (time, id). The
    /// window stays the matches at or after it, so later pages rank the same rows.
    #[serde(rename = "w", default, skip_serializing_if = "Option::is_none")]
    window_end: Option<(i64, String)>,
}

/// A search as a request (and its cursor) describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchSpec {
    pub q: String,
    pub sort: Sort,
    pub filters: Filters,
    /// Rows strictly after this one in list order.
    pub after: Option<Position>,
    /// See [`SearchCursor::window_end`].
    pub window_end: Option<(DateTime<Utc>, String)>,
}

fn micros(t: DateTime<Utc>) -> i64 {
    t.timestamp_micros()
}

fn time(micros: i64) -> Result<DateTime<Utc>, Problem> {
    cursor::timestamp(micros).ok_or_else(undecodable)
}

fn undecodable() -> Problem {
    Problem::from_code(ErrorCode::InvalidCursor)
}

fn other_search() -> Problem {
    Problem::from_code(ErrorCode::InvalidCursor)
        .with_detail("the cursor belongs to another search (other q, filters or sort)")
}

impl SearchCursor {
    /// The cursor continuing `spec` after `last`.
    pub fn after(spec: &SearchSpec, last: &Position) -> Self {
        Self {
            k: SearchKind::Search,
            q: spec.q.clone(),
            sort: spec.sort,
            organization_id: spec.filters.organization_id.clone(),
            journalist_id: spec.filters.journalist_id.clone(),
            published_after: spec.filters.published_after.map(micros),
            published_before: spec.filters.published_before.map(micros),
            last: (last.score, micros(last.published_at), last.id.clone()),
            window_end: spec
                .window_end
                .as_ref()
                .map(|(t, id)| (micros(*t), id.clone())),
        }
    }

    pub fn encode(&self) -> String {
        cursor::encode(self)
    }

    pub fn decode(text: &str) -> Result<Self, Problem> {
        let cursor: Self = cursor::decode(text).ok_or_else(undecodable)?;
        let ids = [
            Some(&cursor.last.2),
            cursor.organization_id.as_ref(),
            cursor.journalist_id.as_ref(),
            cursor.window_end.as_ref().map(|(_, id)| id),
        ];
        let ids_ok = ids.into_iter().flatten().all(|id| can_exist(id));
        let q_ok = parse_query(&cursor.q).is_ok_and(|q| q == cursor.q);
        if !ids_ok || !q_ok || !(0..=3).contains(&cursor.last.0) {
            return Err(undecodable());
        }
        Ok(cursor)
    }

    /// The search this cursor continues, checked against the request: `q`, filters and sort
    /// given must equal the cursor's, those left out come from it.
    pub fn resume(
        self,
        q: Option<&str>,
        sort: Option<Sort>,
        given: &Filters,
    ) -> Result<SearchSpec, Problem> {
        let filters = Filters {
            organization_id: self.organization_id,
            journalist_id: self.journalist_id,
            published_after: self.published_after.map(time).transpose()?,
            published_before: self.published_before.map(time).transpose()?,
        };
        let agrees = q.is_none_or(|q| q == self.q)
            && sort.is_none_or(|s| s == self.sort)
            && given
                .organization_id
                .as_ref()
                .is_none_or(|v| filters.organization_id.as_ref() == Some(v))
            && given
                .journalist_id
                .as_ref()
                .is_none_or(|v| filters.journalist_id.as_ref() == Some(v))
            && given
                .published_after
                .is_none_or(|v| filters.published_after == Some(v))
            && given
                .published_before
                .is_none_or(|v| filters.published_before == Some(v));
        if !agrees {
            return Err(other_search());
        }
        let (score, at, id) = self.last;
        let window_end = match self.window_end {
            Some((t, id)) => Some((time(t)?, id)),
            None => None,
        };
        // A relevance cursor past the window, or a newest cursor, has score 0; a relevance
        // cursor inside the window needs the window's end.
        let consistent = match self.sort {
            Sort::Newest => score == 0 && window_end.is_none(),
            Sort::Relevance => window_end.is_some(),
        };
        if !consistent {
            return Err(undecodable());
        }
        Ok(SearchSpec {
            q: self.q,
            sort: self.sort,
            filters,
            after: Some(Position {
                score,
                published_at: time(at)?,
                id,
            }),
            window_end,
        })
    }
}

/// The words of `q` a suggestion may respell, as byte ranges of `q`: runs of letters and digits
/// (with their combining marks), except the operator `OR`.
pub fn query_words(q: &str) -> Vec<std::ops::Range<usize>> {
    let is_word_char = |c: char| c.is_alphanumeric() || is_combining_mark(c);
    let mut words = Vec::new();
    let mut start = None;
    for (i, c) in q.char_indices().chain([(q.len(), ' ')]) {
        match (start, is_word_char(c) && i < q.len()) {
            (None, true) => start = Some(i),
            (Some(s), false) => {
                if &q[s..i] != "OR" {
                    words.push(s..i);
                }
                start = None;
            }
            _ => {}
        }
    }
    words
}

/// Combining diacritical marks (the blocks news text uses): part of the word they follow.
pub fn is_combining_mark(c: char) -> bool {
    matches!(c, '\u{0300}'..='\u{036F}' | '\u{1AB0}'..='\u{1AFF}' | '\u{1DC0}'..='\u{1DFF}'
        | '\u{20D0}'..='\u{20FF}' | '\u{FE20}'..='\u{FE2F}')
}

/// A suggestion looks for respellings of at most this many words of `q` (its first ones of 3
/// letters or more): each costs the database a trigram search over the word list (about 2 ms),
/// and a 200-character query can hold 50 words (180 ms of respelling at the service before
/// this bound).
pub const MAX_RESPELT_WORDS: usize = 10;

/// What a suggestion asks the word list about each of `words` (byte ranges of `q`): the word, or
/// "" for a word it does not respell (shorter than 3 letters, with a digit, excluded by `-`: a
/// respelt exclusion still finds nothing; or after the first [`MAX_RESPELT_WORDS`] that it does
/// respell).
pub fn words_to_respell(q: &str, words: &[std::ops::Range<usize>]) -> Vec<String> {
    let excluded = exclusions(q);
    let is_excluded = |word: &std::ops::Range<usize>| {
        excluded
            .iter()
            .any(|e| e.start <= word.start && word.end <= e.end)
    };
    let mut asked = 0;
    words
        .iter()
        .map(|range| {
            let word = &q[range.clone()];
            let plain = word.chars().count() >= 3 && !word.chars().any(|c| c.is_numeric());
            if plain && !is_excluded(range) && asked < MAX_RESPELT_WORDS {
                asked += 1;
                word.to_owned()
            } else {
                String::new()
            }
        })
        .collect()
}

/// `q` with each word replaced by its respelling (`None` keeps the word); `None` when nothing
/// changed, so there is nothing to suggest.
pub fn respell(
    q: &str,
    words: &[std::ops::Range<usize>],
    respellings: &[Option<String>],
) -> Option<String> {
    let mut out = String::with_capacity(q.len());
    let mut changed = false;
    let mut at = 0;
    for (range, respelling) in words.iter().zip(respellings) {
        out.push_str(&q[at..range.start]);
        let word = &q[range.clone()];
        match respelling {
            Some(new) if !new.is_empty() && fold_case(new) != fold_case(word) => {
                out.push_str(new);
                changed = true;
            }
            _ => out.push_str(word),
        }
        at = range.end;
    }
    out.push_str(&q[at..]);
    changed.then_some(out)
}

fn fold_case(word: &str) -> String {
    word.chars()
        .filter(|c| !is_combining_mark(*c))
        .flat_map(char::to_lowercase)
        .collect()
}

/// Which field of an article a highlight is from.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq, PartialOrd, Ord, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum HighlightField {
    Title,
    Summary,
    Body,
}

impl HighlightField {
    pub const ALL: [Self; 3] = [Self::Title, Self::Summary, Self::Body];

    /// The name as serialised.
    pub fn name(self) -> &'static str {
        match self {
            Self::Title => "title",
            Self::Summary => "summary",
            Self::Body => "body",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// A fragment of one field with the words the query matched in it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, ToSchema)]
#[schema(example = json!({"field": "title", "text": "Harbour strike ends after 12 days",
    "marks": [[0, 7], [8, 14]]}))]
pub struct Highlight {
    pub field: HighlightField,
    /// A piece of the field as written, at most 200 characters (Unicode code points).
    #[schema(min_length = 1, max_length = 200)]
    pub text: String,
    /// The matched words of `text` as `[start, end)` pairs counted in Unicode code points (not
    /// bytes, not UTF-16 units), in order.
    #[schema(schema_with = mark_pairs)]
    pub marks: Vec<[usize; 2]>,
}

/// The schema of [`Highlight::marks`]: at least one mark, each exactly two code-point offsets
/// (a bare nested integer array would let a client's generated type take any length).
fn mark_pairs() -> utoipa::openapi::Array {
    use utoipa::openapi::{ArrayBuilder, ObjectBuilder, Type};
    let offset = ObjectBuilder::new()
        .schema_type(Type::Integer)
        .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(
            utoipa::openapi::KnownFormat::Int32,
        )))
        .minimum(Some(0));
    let pair = ArrayBuilder::new()
        .items(offset)
        .min_items(Some(2))
        .max_items(Some(2))
        .description(Some(
            "`[start, end)`: `start` < `end` <= the code points of `text`.",
        ));
    ArrayBuilder::new()
        .items(pair)
        .min_items(Some(1))
        .description(Some(
            "The matched words of `text` as `[start, end)` pairs counted in Unicode code points \
             (not bytes, not UTF-16 units), in order.",
        ))
        .build()
}

/// A search match: the article as lists show it, its score and its highlights.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SearchHit {
    #[serde(flatten)]
    pub item: ArticleItem,
    /// Higher is better: with `sort=relevance`, 3 when the title matches, 2 the summary, 1 the
    /// body; 0 for a match older than the ranked window and for `sort=newest`.
    #[schema(minimum = 0, maximum = 3)]
    pub score: f64,
    /// Up to 3, at most one per field, in the order title, summary, body.
    #[schema(max_items = 3)]
    pub highlights: Vec<Highlight>,
}

/// A page of search matches.
#[derive(Debug, Serialize, ToSchema)]
pub struct SearchPage {
    pub data: Vec<SearchHit>,
    /// Number of items in `data`.
    #[schema(minimum = 0)]
    pub count: usize,
    /// Opaque: pass it as `cursor` (with the same `q`) for the next page; null at the end.
    #[schema(required = true)]
    pub next_cursor: Option<String>,
    /// When nothing matches: `q` respelt from the words of the articles (`electon` →
    /// `election`), if some word is close to one of them; else null.
    #[schema(required = true)]
    pub suggestion: Option<String>,
}

/// A `tsquery` (as PostgreSQL prints it) with every lexeme restricted to `weight`:
/// `'harbour' & !'strike'` becomes `'harbour':A & !'strike':A`. A document matches it exactly
/// when the original query matches the document's `weight` part alone (its title for `A`), and
/// testing it costs one `@@`, where cutting that part out first (`ts_filter`) copies the vector
/// for every row ranked. `websearch_to_tsquery` writes no labels of its own; a lexeme that has
/// some gets `weight` added to them.
pub fn restrict_to_weight(query: &str, weight: char) -> String {
    let mut out = String::with_capacity(query.len() + 8);
    let mut chars = query.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        if c != '\'' {
            continue;
        }
        // A quoted lexeme: `''` is a quote inside it, `\` escapes the next character.
        while let Some(inner) = chars.next() {
            out.push(inner);
            match inner {
                '\\' => out.extend(chars.next()),
                '\'' if chars.peek() == Some(&'\'') => out.extend(chars.next()),
                '\'' => break,
                _ => {}
            }
        }
        if chars.peek() == Some(&':') {
            out.extend(chars.next());
        } else {
            out.push(':');
        }
        out.push(weight);
    }
    out
}

/// A `tsquery` matching a document that holds any lexeme of `query` with `weight`:
/// `'harbour' <-> 'strike'` gives `'harbour':A | 'strike':A`, and "" when `query` has no lexeme.
/// A field without any of the query's lexemes gets no highlight, so asking this of the stored
/// vector spares `ts_headline` re-reading that field's text.
pub fn any_lexeme(query: &str, weight: char) -> String {
    quoted_lexemes(&restrict_to_weight(query, weight)).join(" | ")
}

/// The quoted lexemes of `tsquery` text with their `:labels`, as written.
fn quoted_lexemes(query: &str) -> Vec<&str> {
    let mut lexemes = Vec::new();
    let mut rest = query;
    while let Some(start) = rest.find('\'') {
        let mut end = start + 1;
        let bytes = rest.as_bytes();
        // The closing quote (`''` is a quote inside, `\` escapes), then its `:labels`.
        while end < bytes.len() {
            match bytes[end] {
                b'\\' => end += 2,
                b'\'' if bytes.get(end + 1) == Some(&b'\'') => end += 2,
                b'\'' => break,
                _ => end += 1,
            }
        }
        end += 1;
        while end < bytes.len()
            && (bytes[end] == b':' || bytes[end].is_ascii_alphabetic() || bytes[end] == b'*')
        {
            end += 1;
        }
        let end = end.min(rest.len());
        lexemes.push(&rest[start..end]);
        rest = &rest[end..];
    }
    lexemes
}

/// The lexemes of `tsquery` text (`'it''s' & 'a\\b'` gives `it's` and `a\b`): what a
/// highlight marks the words of.
pub fn query_lexemes(query: &str) -> Vec<String> {
    quoted_lexemes(query)
        .into_iter()
        .map(|quoted| {
            let inner = quoted.strip_prefix('\'').unwrap_or(quoted);
            let inner = &inner[..inner.rfind('\'').unwrap_or(inner.len())];
            let mut lexeme = String::with_capacity(inner.len());
            let mut chars = inner.chars();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => lexeme.extend(chars.next()),
                    // `''` is one quote.
                    '\'' => {
                        lexeme.push('\'');
                        chars.next();
                    }
                    _ => lexeme.push(c),
                }
            }
            lexeme
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use chrono::TimeZone;

    #[test]
    fn the_index_serves_queries_that_few_articles_can_match() {
        let million = 1_000_000;
        // `carrer` in English articles: no article can match.
        assert_eq!(
            Access::for_matches(0, 800_000, 21, WALK_EXAMINES),
            Access::Index
        );
        // A page of 21: the index up to sqrt(21 x 1,000,000), about 4,600 articles.
        assert_eq!(
            Access::for_matches(4_500, million, 21, WALK_EXAMINES),
            Access::Index
        );
        assert_eq!(
            Access::for_matches(4_700, million, 21, WALK_EXAMINES),
            Access::Walk(WALK_EXAMINES)
        );
        // The ranked window of 500: up to about 22,000.
        assert_eq!(
            Access::for_matches(22_000, million, RANKED_MATCHES, WALK_EXAMINES),
            Access::Index
        );
        assert_eq!(
            Access::for_matches(306_687, million, RANKED_MATCHES, WALK_EXAMINES),
            Access::Walk(WALK_EXAMINES)
        );
        // Small collections: a word in every article is walked, a rare one is not.
        assert_eq!(
            Access::for_matches(20, 20_000, 21, WALK_EXAMINES),
            Access::Index
        );
        assert_eq!(
            Access::for_matches(10_000, 20_000, 21, WALK_EXAMINES),
            Access::Walk(WALK_EXAMINES)
        );
    }

    use super::*;

    fn at(minute: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 1, 10, minute, 0).unwrap()
    }

    fn pos(score: i16, minute: u32, id: &str) -> Position {
        Position {
            score,
            published_at: at(minute),
            id: id.into(),
        }
    }

    fn spec() -> SearchSpec {
        SearchSpec {
            q: "harbour strike".into(),
            sort: Sort::Relevance,
            filters: Filters {
                organization_id: Some("org-1".into()),
                published_after: Some(at(0)),
                ..Filters::default()
            },
            after: None,
            window_end: Some((at(1), "a-1".into())),
        }
    }

    /// The window's size is written out in docs/news.md and the endpoint's OpenAPI description:
    /// they must say what `RANKED_MATCHES` is.
    #[test]
    fn the_documents_state_the_ranked_window() {
        let newest = format!("the newest {RANKED_MATCHES} matches");
        // Read when the test runs, not embedded: docs/ is not in the image's build context.
        let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/news.md"))
            .expect("docs/news.md");
        let route = include_str!("../routes/search.rs");
        assert!(docs.contains(&format!("**{newest}**")), "docs/news.md");
        assert!(
            route.contains(&format!("ranks {newest}")),
            "routes/search.rs"
        );
        // And the walk's limit, written with a thousands separator.
        let digits = WALK_EXAMINES.to_string();
        let (head, tail) = digits.split_at(digits.len() - 3);
        let walk = format!("at most {head},{tail} articles");
        assert!(docs.contains(&walk), "docs/news.md: {walk}");
        assert!(route.contains(&walk), "routes/search.rs: {walk}");
    }

    #[test]
    fn query_length_is_counted_in_characters_after_trimming() {
        assert_eq!(parse_query("  harbour  ").unwrap(), "harbour");
        assert!(parse_query("   ").is_err());
        assert!(parse_query("").is_err());
        assert!(parse_query(&"é".repeat(200)).is_ok());
        assert!(parse_query(&"é".repeat(201)).is_err());
        assert_eq!(parse_query("a\0b").unwrap_err().code, "invalid_query");
    }

    #[test]
    fn exclusions_are_left_out_of_the_positive_query() {
        assert_eq!(positive_query("harbour -strike"), "harbour ");
        assert_eq!(positive_query("-\"night ferry\" port"), " port");
        assert_eq!(positive_query("well-known - fact"), "well-known - fact");
        assert_eq!(positive_query("-only"), "");
        assert_eq!(positive_query("a OR b"), "a OR b");
        assert_eq!(positive_query("-a -b c"), "  c");
        assert_eq!(positive_query("x -\"open quote"), "x ");
    }

    #[test]
    fn exclusions_span_the_dash_and_what_it_negates() {
        let q = "harbour -strike -\"night ferry\" e-mail -";
        let texts: Vec<&str> = exclusions(q).into_iter().map(|r| &q[r]).collect();
        assert_eq!(texts, ["-strike", "-\"night ferry\""]);
    }

    #[test]
    fn excluded_words_are_not_respelt() {
        let q = "harbur -strik -\"nigth fery\"";
        let asked = words_to_respell(q, &query_words(q));
        assert_eq!(asked, ["harbur", "", "", ""]);
    }

    #[test]
    fn cursor_round_trips_and_keeps_the_search() {
        let spec = spec();
        let last = pos(2, 3, "a-7");
        let text = SearchCursor::after(&spec, &last).encode();
        let cursor = SearchCursor::decode(&text).unwrap();
        // With its q, or with none: the cursor keeps it.
        for q in [Some("harbour strike"), None] {
            let resumed = cursor.clone().resume(q, None, &Filters::default()).unwrap();
            assert_eq!(resumed.q, spec.q);
            assert_eq!(resumed.filters, spec.filters);
            assert_eq!(resumed.after, Some(last.clone()));
            assert_eq!(resumed.window_end, spec.window_end);
        }
        // Another q, sort or filter is another search.
        let other_org = Filters {
            organization_id: Some("org-2".into()),
            ..Filters::default()
        };
        for (q, sort, given) in [
            (Some("harbour"), None, Filters::default()),
            (
                Some("harbour strike"),
                Some(Sort::Newest),
                Filters::default(),
            ),
            (None, None, other_org),
        ] {
            let refused = cursor.clone().resume(q, sort, &given).unwrap_err();
            assert_eq!(refused.code, "invalid_cursor");
        }
    }

    #[test]
    fn forged_and_foreign_cursors_do_not_decode() {
        let article_cursor = URL_SAFE_NO_PAD.encode(br#"{"k":"a","t":1,"i":"art-1"}"#);
        let bad_score = URL_SAFE_NO_PAD
            .encode(br#"{"k":"s","q":"a","s":"relevance","p":[9,1,"x"],"w":[1,"x"]}"#);
        let blank_q = URL_SAFE_NO_PAD.encode(br#"{"k":"s","q":" ","s":"newest","p":[0,1,"x"]}"#);
        for text in ["", "!!!", "e30", &article_cursor, &bad_score, &blank_q] {
            assert!(SearchCursor::decode(text).is_err(), "{text}");
        }
        // Decodes, but a relevance cursor must name its window.
        let no_window =
            URL_SAFE_NO_PAD.encode(br#"{"k":"s","q":"a","s":"relevance","p":[1,1,"x"]}"#);
        let cursor = SearchCursor::decode(&no_window).unwrap();
        assert!(cursor.resume(Some("a"), None, &Filters::default()).is_err());
    }

    #[test]
    fn a_suggestion_respells_at_most_the_first_words() {
        let q = "ab harbur 2024 x1y ".to_owned() + &"strik ".repeat(MAX_RESPELT_WORDS + 2);
        let asked = words_to_respell(&q, &query_words(&q));
        assert_eq!(asked.len(), 4 + MAX_RESPELT_WORDS + 2);
        // Short words and words with digits are not respelt, nor counted.
        assert_eq!(asked[..4], ["", "harbur", "", ""]);
        assert_eq!(
            asked.iter().filter(|w| !w.is_empty()).count(),
            MAX_RESPELT_WORDS
        );
        assert_eq!(
            asked[4..3 + MAX_RESPELT_WORDS],
            vec!["strik"; MAX_RESPELT_WORDS - 1]
        );
        assert!(asked[3 + MAX_RESPELT_WORDS..].iter().all(String::is_empty));
    }

    #[test]
    fn words_and_respellings_keep_the_query_shape() {
        let q = "\"harbur strike\" OR -cafe\u{301}s";
        let words = query_words(q);
        let texts: Vec<&str> = words.iter().map(|r| &q[r.clone()]).collect();
        assert_eq!(texts, ["harbur", "strike", "cafe\u{301}s"]);
        let respelt = respell(
            q,
            &words,
            &[Some("harbour".into()), Some("strike".into()), None],
        );
        assert_eq!(
            respelt.as_deref(),
            Some("\"harbour strike\" OR -cafe\u{301}s")
        );
        assert_eq!(
            respell(q, &words, &[None, Some("STRIKE".into()), None]),
            None
        );
    }

    #[test]
    fn bounds_parse_as_rfc_3339_and_empty_ranges_match_nothing() {
        assert_eq!(parse_time("t", "2026-11-01T11:00:00+01:00").unwrap(), at(0));
        // Finer than a microsecond: up to the next one, which PostgreSQL holds exactly.
        let micro = chrono::TimeDelta::microseconds(1);
        for text in [
            "2026-11-01T10:00:00.000000001Z",
            "2026-11-01T10:00:00.000000999Z",
            "2026-11-01T10:00:00.0000000001Z",
            "2026-11-01T10:00:00.000000000000000000001+00:00",
        ] {
            assert_eq!(parse_time("t", text).unwrap(), at(0) + micro, "{text}");
        }
        assert_eq!(
            parse_time("t", "2026-11-01T10:00:00.000001Z").unwrap(),
            at(0) + micro
        );
        assert_eq!(
            parse_time("t", "2026-11-01T10:00:00.0000000000000Z").unwrap(),
            at(0)
        );
        assert!(parse_time("t", "2026-11-01").is_err());
        assert!(parse_time("t", "yesterday").is_err());
        let range = |after, before| Filters {
            published_after: Some(after),
            published_before: Some(before),
            ..Filters::default()
        };
        assert!(range(at(5), at(5)).matches_nothing());
        assert!(!range(at(4), at(5)).matches_nothing());
    }

    #[test]
    fn restricting_to_a_weight_labels_every_lexeme() {
        let cases = [
            ("'harbour'", "'harbour':A"),
            (
                "'harbour' & !'strike' | 'port' <-> 'citi'",
                "'harbour':A & !'strike':A | 'port':A <-> 'citi':A",
            ),
            ("( 'a' | 'b' ) & 'c'", "( 'a':A | 'b':A ) & 'c':A"),
            // Quotes and backslashes inside a lexeme are not its end.
            ("'it''s' & 'a\\'b'", "'it''s':A & 'a\\'b':A"),
            ("'pre':*", "'pre':A*"),
            ("", ""),
        ];
        for (query, expected) in cases {
            assert_eq!(restrict_to_weight(query, 'A'), expected, "{query}");
        }
    }
    #[test]
    fn query_lexemes_unquote_the_lexemes() {
        let cases: [(&str, &[&str]); 3] = [
            (
                "'harbour' <-> 'strike' | 'elect'",
                &["harbour", "strike", "elect"],
            ),
            ("'it''s' & !'a\\\\b'", &["it's", "a\\b"]),
            ("", &[]),
        ];
        for (query, expected) in cases {
            assert_eq!(query_lexemes(query), expected, "{query}");
        }
    }

    #[test]
    fn any_lexeme_ors_the_labelled_lexemes() {
        let cases = [
            ("'harbour' <-> 'strike'", "'harbour':B | 'strike':B"),
            ("'a' & !( 'b' | 'it''s' )", "'a':B | 'b':B | 'it''s':B"),
            ("'a\\'b' & 'c'", "'a\\'b':B | 'c':B"),
            ("", ""),
        ];
        for (query, expected) in cases {
            assert_eq!(any_lexeme(query, 'B'), expected, "{query}");
        }
    }
}
