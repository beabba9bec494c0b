//! The highlights of a page's hits ([`hits`]): marked here by the Rust model of the language's
//! configuration, and by `ts_headline` for the fields the model does not cover.

use std::collections::{HashMap, HashSet};

use sqlx::PgPool;
use sqlx::postgres::types::Oid;

use super::parse::LanguageQuery;
use super::statements::ReadHit;
use crate::domain::highlight::{self, MAX_FRAGMENT_CHARS};
use crate::domain::search::{Highlight, HighlightField, SearchHit, query_lexemes};
use crate::domain::text_search::{Folding, Marker};
use crate::error::Result;

/// The page's hits with scores and highlights, in the rows' order, from what their statement
/// read: the highlights are marked here (`domain::text_search`), and only fields the model does
/// not cover ask `ts_headline`.
pub(super) async fn hits(
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
                None => left.push((item.id.clone(), field, text.to_owned())),
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
    fields: &[(String, HighlightField, String)],
    languages: &[LanguageQuery],
) -> Result<Vec<(String, Highlight)>> {
    let codes: Vec<String> = languages.iter().map(|l| l.language.clone()).collect();
    let configs: Vec<Oid> = languages.iter().map(|l| l.config).collect();
    let positives: Vec<String> = languages.iter().map(|l| l.positive.clone()).collect();
    let ids: Vec<String> = fields.iter().map(|(id, _, _)| id.clone()).collect();
    let names: Vec<String> = fields.iter().map(|(_, f, _)| f.name().to_owned()).collect();
    let texts: HashMap<(&str, &str), &str> = fields
        .iter()
        .map(|(id, f, text)| ((id.as_str(), f.name()), text.as_str()))
        .collect();
    // Marker characters in the text itself become U+FFFD (one code point for one) so they
    // cannot fake a mark. The text is lowered as the vector read it (migration
    // `search_fold`), one code point for one: the marks found in it are put on the text
    // as written (`fragment_of`).
    let rows = sqlx::query!(
        r#"SELECT f.id AS "id!", f.field AS "field!",
                  ts_headline(l.config::regconfig,
                              search_fold(translate(CASE f.field WHEN 'title' THEN a.title
                                                                  WHEN 'summary' THEN a.summary
                                                                  ELSE a.body END,
                                                     U&'\E000\E001', U&'\FFFD\FFFD')),
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
            let written = texts.get(&(row.id.as_str(), field.name()))?;
            let fragment = highlight::fragment_of(written, &row.marked)?;
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
