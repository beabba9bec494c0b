//! The Rust model of the articles' text search configurations (`domain::text_search`), which
//! marks search highlights without `ts_headline`, against PostgreSQL itself: its stemmers
//! against `ts_lexize` over a large word list, its words and lexemes against `to_tsvector`, and
//! its marks against `ts_headline` with `HighlightAll`, over the seed corpus and hand-made texts
//! with emoji, combining accents, curly quotes and hyphens.

use std::collections::{BTreeSet, HashSet};

use news_service::domain::highlight::{START, STOP};
use news_service::domain::text_search::{Folding, marks, search_fold, word_spans};
use news_service::seed;
use sqlx::PgPool;

use crate::helpers::spawn_app;

/// Texts the seed does not write: what the must-shows and real news put in a field.
const HAND_MADE: [(&str, &str); 15] = [
    ("en", "🎉 Cafe\u{301} culture returns"),
    ("en", "ΟΔΟΣ ΣΤΑΔΙΟΥ closed as МОСКВА and İSTANBUL vote"),
    (
        "en",
        "Turnout rose 12.5% to 3,400 in 2019. Officials said 0.75 was low.",
    ),
    (
        "es",
        "La participación subió un 12,5% y el presupuesto 3.5 millones en 2019.",
    ),
    ("en", "Reopened 👩\u{200d}👩\u{200d}👧 cafés downtown."),
    ("en", "A cafe\u{301} owner said: “the CAFÉ is full”."),
    (
        "en",
        "The well-known e-mail from Zoë's co-op (Ærø) — don't panic!",
    ),
    (
        "en",
        "Elections, elected; electing? ELECTION. Re-election: yes",
    ),
    ("en", "Naïve façade, rôle, Ångström; œuvre; straße"),
    (
        "en",
        "Twelve days\u{a0}of strikes, 12 days of talks, covid19 cases",
    ),
    (
        "es",
        "Las elecciones municipales; la elección en la ciudad.",
    ),
    (
        "es",
        "El café del puerto cerró durante la huelga. ¿Qué pasó? ¡Él está aquí!",
    ),
    (
        "es",
        "Año nuevo: niños, pingüinos y acción — según el alcalde",
    ),
    (
        "es",
        "Resultados de la elección en Riverside, dijo Kofi Ibrahim",
    ),
    ("en", "x-ray — a – b ‘quoted’ \"plain\" it's"),
];

/// Suffixes that make inflected and derived forms of the corpus's words, so the stemmers meet
/// many more endings than the seed's own words.
const SUFFIXES: [&str; 30] = [
    "", "s", "es", "ed", "ing", "ly", "er", "est", "ness", "ation", "ational", "ement", "ment",
    "ful", "fulness", "ive", "ize", "ization", "ies", "y", "iones", "ción", "mente", "ando",
    "iendo", "ados", "idas", "aron", "aría", "ísimo",
];

async fn seed_texts(count: u64) -> Vec<(String, String)> {
    let journalists = seed::journalists();
    let mut texts: Vec<(String, String)> = (1..=count)
        .flat_map(|n| {
            let a = seed::article(n, &journalists);
            [a.title, a.summary, a.body]
                .into_iter()
                .map(move |t| (a.language.clone(), t))
        })
        .collect();
    texts.extend(
        HAND_MADE
            .iter()
            .map(|(l, t)| ((*l).to_owned(), (*t).to_owned())),
    );
    texts
}

/// `ts_lexize`'s answer as the model gives it: the one lexeme, or none for a stop word.
async fn lexize(db: &PgPool, dictionary: &str, words: &[String]) -> Vec<Option<String>> {
    sqlx::query_scalar::<_, Option<String>>(
        "SELECT (ts_lexize($1::regdictionary, w))[1] FROM unnest($2::text[]) WITH ORDINALITY AS u (w, n) ORDER BY n",
    )
    .bind(dictionary)
    .bind(words)
    .fetch_all(db)
    .await
    .unwrap()
}

#[tokio::test]
async fn the_stemmers_agree_with_postgresql_over_a_large_word_list() {
    let app = spawn_app().await;
    let db = app.admin().await;
    let texts = seed_texts(2000).await;
    let mut stems = BTreeSet::new();
    for (_, text) in &texts {
        for word in text.split(|c: char| !c.is_alphabetic()) {
            if !word.is_empty() {
                stems.insert(word.to_lowercase());
            }
        }
    }
    let words: Vec<String> = stems
        .iter()
        .flat_map(|w| SUFFIXES.iter().map(move |s| format!("{w}{s}")))
        .collect();
    assert!(words.len() > 10_000, "{} words", words.len());
    for (language, dictionary) in [("en", "english_stem"), ("es", "spanish_stem")] {
        let folding = Folding::of_language(language).unwrap();
        let expected = lexize(&db, dictionary, &words).await;
        let differ: Vec<String> = words
            .iter()
            .zip(&expected)
            .filter(|(w, lexeme)| folding.stem(w) != **lexeme)
            .map(|(w, lexeme)| format!("{w}: {:?} != {lexeme:?}", folding.stem(w)))
            .collect();
        assert!(
            differ.is_empty(),
            "{dictionary}: {} of {}: {:?}",
            differ.len(),
            words.len(),
            &differ[..differ.len().min(20)]
        );
        // What `marks` relies on to skip most words: a lexeme keeps its word's first ASCII
        // letter or digit.
        for (word, lexeme) in words.iter().zip(&expected) {
            let first = word.chars().next().filter(char::is_ascii_alphanumeric);
            if let (Some(first), Some(lexeme)) = (first, lexeme) {
                assert!(
                    lexeme.starts_with(first.to_ascii_lowercase()),
                    "{word}: {lexeme}"
                );
            }
        }
    }
}

/// The lexemes PostgreSQL's configuration gives a text (the vector, without positions).
async fn vector_lexemes(db: &PgPool, language: &str, text: &str) -> BTreeSet<String> {
    sqlx::query_scalar::<_, String>(
        "SELECT unnest(tsvector_to_array(to_tsvector(news.search_config($1), news.search_fold($2))))",
    )
    .bind(language)
    .bind(text)
    .fetch_all(db)
    .await
    .unwrap()
    .into_iter()
    .collect()
}

/// The model's lexemes of a text: its words', and its hyphenated words' whole (which the
/// vector holds beside their parts', and `ts_headline` shows as their parts); the words are
/// those of the folded text, as PostgreSQL reads it.
fn model_lexemes(folding: &Folding, text: &str) -> Option<BTreeSet<String>> {
    let text = &*search_fold(text);
    let words = word_spans(text)?;
    let chars: Vec<char> = text.chars().collect();
    let mut lexemes: BTreeSet<String> = words
        .iter()
        .filter_map(|w| folding.lexeme(w.text))
        .collect();
    let mut i = 0;
    while i < words.len() {
        let mut j = i;
        while j + 1 < words.len()
            && words[j].end + 1 == words[j + 1].start
            && chars[words[j].end] == '-'
        {
            j += 1;
        }
        if j > i {
            let whole: String = chars[words[i].start..words[j].end].iter().collect();
            lexemes.extend(folding.lexeme(&whole));
        }
        i = j + 1;
    }
    Some(lexemes)
}

/// `ts_headline`'s marked words of `text` for these lexemes (any of them), as code-point spans.
async fn headline_marks(
    db: &PgPool,
    language: &str,
    text: &str,
    lexemes: &[String],
) -> Vec<[usize; 2]> {
    let marked: String = sqlx::query_scalar(
        "SELECT ts_headline(news.search_config($1), news.search_fold($2),
                            (SELECT string_agg(quote_literal(l), ' | ') FROM unnest($3::text[]) l)::tsquery,
                            $4)",
    )
    .bind(language)
    .bind(text)
    .bind(lexemes)
    .bind(format!("StartSel={START}, StopSel={STOP}, HighlightAll=true"))
    .fetch_one(db)
    .await
    .unwrap();
    let mut spans = Vec::new();
    let (mut at, mut open) = (0, 0);
    for c in marked.chars() {
        match c {
            START => open = at,
            STOP => spans.push([open, at]),
            _ => at += 1,
        }
    }
    spans
}

#[tokio::test]
async fn words_lexemes_and_marks_agree_with_to_tsvector_and_ts_headline() {
    let app = spawn_app().await;
    let db = app.admin().await;
    let texts = seed_texts(300).await;
    let mut modelled = 0;
    for (n, (language, text)) in texts.iter().enumerate() {
        let folding = Folding::of_language(language).unwrap();
        let Some(lexemes) = model_lexemes(&folding, text) else {
            continue;
        };
        modelled += 1;
        let expected = vector_lexemes(&db, language, text).await;
        assert_eq!(lexemes, expected, "{language}: {text}");
        // Every lexeme asked, then every other one: each word marked exactly when its lexeme
        // is asked.
        let all: Vec<String> = expected.into_iter().collect();
        let some: Vec<String> = all.iter().skip(n % 2).step_by(2).cloned().collect();
        for asked in [all, some] {
            if asked.is_empty() {
                continue;
            }
            let set: HashSet<String> = asked.iter().cloned().collect();
            let ours = marks(text, &folding, &set).unwrap();
            assert_eq!(
                ours,
                headline_marks(&db, language, text, &asked).await,
                "{language}: {text} for {asked:?}"
            );
        }
    }
    // The model is worth having only if it covers nearly every field.
    assert!(
        modelled * 100 >= texts.len() * 95,
        "{modelled} of {} texts modelled",
        texts.len()
    );
}

/// The Rust `search_fold` is the schema's, code point for code point, over every character
/// (surrogates and NUL aside, which a text cannot hold): what lets the model read the words
/// PostgreSQL reads, at the same places, and `ts_headline`'s marks in the folded text be put on
/// the text as written. Only characters the server's ICU does not know yet may differ (Rust's
/// Unicode is newer: letters and punctuation of Unicode 16 are unassigned to ICU 72, which
/// leaves them as they are); the store's checks keep a highlight right there all the same.
#[tokio::test]
async fn the_folding_is_the_schemas_for_every_character() {
    let app = spawn_app().await;
    let db = app.admin().await;
    let every: Vec<char> = (1..=u32::from(char::MAX))
        .filter_map(char::from_u32)
        .collect();
    let mut differ: Vec<i32> = Vec::new();
    for chunk in every.chunks(8192) {
        let text: String = chunk.iter().collect();
        let folded: String = sqlx::query_scalar("SELECT news.search_fold($1)")
            .bind(&text)
            .fetch_one(&db)
            .await
            .unwrap();
        assert_eq!(
            folded.chars().count(),
            chunk.len(),
            "one code point for one"
        );
        let model = search_fold(&text);
        differ.extend(
            chunk
                .iter()
                .zip(folded.chars().zip(model.chars()))
                .filter(|(_, (schema, rust))| schema != rust)
                .map(|(c, _)| i32::try_from(u32::from(*c)).unwrap()),
        );
    }
    let known_to_the_server: Vec<String> = sqlx::query_scalar(
        "SELECT to_hex(c) FROM unnest($1::int[]) AS c \
          WHERE chr(c) COLLATE \"und-x-icu\" ~ '[[:print:]]'",
    )
    .bind(&differ)
    .fetch_all(&db)
    .await
    .unwrap();
    assert!(
        known_to_the_server.is_empty(),
        "folded otherwise than the schema does: {known_to_the_server:?}"
    );
    assert!(differ.len() < 200, "{} characters differ", differ.len());
}
