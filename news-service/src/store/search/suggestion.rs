//! Respellings for a query that matched nothing: each unknown word as the closest word of the
//! articles' word list (trigram similarity).

use sqlx::PgExecutor;

use crate::domain::search::{query_words, respell, words_to_respell};
use crate::error::Result;

/// `q` with its unknown words respelt as the closest word of the articles (trigram
/// similarity) that is no stop word, or `None` when no word has a close one.
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
                       -- the closest of the five closest words that is no stop word (a query
                       -- respelt into one would match nothing either)
                       ELSE (SELECT c.word
                               FROM (SELECT s.word, public.similarity(s.word, f.folded) AS likeness
                                       FROM search_words s
                                      WHERE s.word OPERATOR(public.%) f.folded
                                      ORDER BY likeness DESC, s.word
                                      LIMIT 5) c
                              WHERE NOT EXISTS (SELECT 1 FROM search_languages l
                                                 WHERE numnode(plainto_tsquery(search_config(l.language), c.word)) = 0)
                              ORDER BY c.likeness DESC, c.word
                              LIMIT 1)
                  END AS respelling
             FROM unnest($1::text[]) WITH ORDINALITY AS w (word, ord)
            -- folded as the word list's words are (migration `search_fold`)
            CROSS JOIN LATERAL (SELECT lower(public.unaccent('public.unaccent'::regdictionary, search_fold(w.word))) AS folded) f
            ORDER BY w.ord"#,
        &asked
    )
    .fetch_all(db)
    .await?;
    let respellings: Vec<Option<String>> = rows.into_iter().map(|r| r.respelling).collect();
    Ok(respell(q, &words, &respellings))
}
