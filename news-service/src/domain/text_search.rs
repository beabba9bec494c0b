//! The articles' text search configurations (migration `search`) modelled in Rust, so that a
//! search page marks its highlights without `ts_headline` (which read each field again in
//! PostgreSQL and was most of a page's cost): a word is marked when its lexeme is one of the
//! query's, which is what `ts_headline` with `HighlightAll` does.
//!
//! The model covers what news text mostly is, and says so when a text holds anything else:
//! - The text folded first ([`search_fold`], as the schema's function of that name, one code
//!   point for one): punctuation and white space beyond ASCII become spaces, and letters lower
//!   case by Unicode rules.
//! - PostgreSQL 15's default parser in a database whose `LC_CTYPE` is `C` (the store checks both):
//!   a word is a run of ASCII letters and digits and of any non-ASCII characters (to the parser
//!   in that locale every non-ASCII character is a letter: emoji, combining accents, curly
//!   quotes); a decimal number (`12.5`) is one word. The separators modelled are ASCII spaces,
//!   `, ; ! ? " ' ( ) %`, a `:` not followed by a word, a `.` not followed by a word, and a `-`
//!   between letters (a hyphenated
//!   word: `ts_headline` shows and marks its parts, which are words of their own). A text with
//!   any other ASCII character between words (`/ @ < & _ ...`, a `.` inside a word as in
//!   `example.com`, a `-` next to a digit), or a very long word, is not modelled:
//!   [`word_spans`] answers `None` and the store asks `ts_headline` for that field.
//! - Per word, as the configuration maps its token type: with a digit (`numword`, `uint`, `float`)
//!   the `simple` dictionary (ASCII lower case); else (`asciiword`, `word`, hyphenated parts)
//!   `unaccent` (PostgreSQL's `unaccent.rules`, copied here) then the language's Snowball
//!   stemmer after ASCII lower case (the `C` locale's), no lexeme for a stop word (PostgreSQL's
//!   stop word files, copied here).
//! - Languages: English and Spanish, whose stemmers (`rust-stemmers`) are checked against
//!   PostgreSQL's in `tests/api/highlight_model.rs`; any other language is left to `ts_headline`.
//!
//! The store keeps this exact: a field whose stored vector holds a query lexeme but where this
//! marks nothing is highlighted by `ts_headline`, and a field whose vector holds none is not
//! highlighted whatever this marks; so a difference in a stemmer costs speed, not a mark.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use rust_stemmers::{Algorithm, Stemmer};
use unicode_properties::{GeneralCategoryGroup, UnicodeGeneralCategory};

/// Longer words are left to PostgreSQL (it skips tokens of 2,047 bytes and more, and such a
/// word is no word of news text).
const MAX_WORD_CHARS: usize = 100;

/// How one article language folds a word into its lexeme.
pub struct Folding {
    stemmer: Stemmer,
    stop_words: &'static HashSet<String>,
}

static ENGLISH_STOP: LazyLock<HashSet<String>> =
    LazyLock::new(|| stop_words(include_str!("tsearch/english.stop")));
static SPANISH_STOP: LazyLock<HashSet<String>> =
    LazyLock::new(|| stop_words(include_str!("tsearch/spanish.stop")));
static UNACCENT: LazyLock<Unaccent> =
    LazyLock::new(|| Unaccent::parse(include_str!("tsearch/unaccent.rules")));

fn stop_words(file: &str) -> HashSet<String> {
    file.lines()
        .map(|l| l.trim().to_ascii_lowercase())
        .filter(|l| !l.is_empty())
        .collect()
}

impl Folding {
    /// The folding of an article language (ISO 639-1), when it is modelled.
    pub fn of_language(language: &str) -> Option<Self> {
        let (algorithm, stop_words) = match language {
            "en" => (Algorithm::English, &*ENGLISH_STOP),
            "es" => (Algorithm::Spanish, &*SPANISH_STOP),
            _ => return None,
        };
        Some(Self {
            stemmer: Stemmer::create(algorithm),
            stop_words,
        })
    }

    /// The lexeme of one word as the parser cut it; `None` for a stop word.
    pub fn lexeme(&self, word: &str) -> Option<String> {
        self.with_lexeme(&search_fold(word), str::to_owned)
    }

    /// `f` of the lexeme of one word of a text already folded ([`search_fold`]), without copying
    /// it ([`Marker::marks`] folds the whole text once).
    fn with_lexeme<R>(&self, folded_word: &str, f: impl FnOnce(&str) -> R) -> Option<R> {
        if folded_word.chars().any(|c| c.is_ascii_digit()) {
            // numword / uint: the simple dictionary, without unaccent.
            return Some(f(&folded_word.to_ascii_lowercase()));
        }
        self.with_stem(&UNACCENT.apply(folded_word), f)
    }

    /// The Snowball dictionary: lower case, stop words, stem.
    pub fn stem(&self, word: &str) -> Option<String> {
        self.with_stem(word, str::to_owned)
    }

    fn with_stem<R>(&self, word: &str, f: impl FnOnce(&str) -> R) -> Option<R> {
        let lower = word.to_ascii_lowercase();
        if lower.is_empty() || self.stop_words.contains(&lower) {
            return None;
        }
        Some(f(&self.stemmer.stem(&lower)))
    }
}

/// A text as the schema's `search_fold` (migration `search_fold`) gives it to the parser, one
/// code point for one: punctuation and white space beyond ASCII as ASCII spaces, then lower case
/// by Unicode rules (`İ` as `I` first, so that one code point stays one) and Greek's final sigma
/// `ς` as `σ`. ASCII text is left as it is (the dictionaries lower-case it anyway).
pub fn search_fold(text: &str) -> Cow<'_, str> {
    if text.is_ascii() {
        return Cow::Borrowed(text);
    }
    let split: String = text
        .chars()
        .map(|c| match c {
            '\u{130}' => 'I',
            c if splits_words(c) => ' ',
            c => c,
        })
        .collect();
    Cow::Owned(
        split
            .to_lowercase()
            .chars()
            .map(|c| if c == 'ς' { 'σ' } else { c })
            .collect(),
    )
}

/// Whether `search_fold` writes `c` as a space: punctuation (general category P*) or white space
/// beyond ASCII, which the parser in the `C` locale would read as a letter.
pub fn splits_words(c: char) -> bool {
    !c.is_ascii()
        && (c.is_whitespace() || c.general_category_group() == GeneralCategoryGroup::Punctuation)
}

/// PostgreSQL's `unaccent` dictionary: each character (or longest listed sequence) replaced by
/// its rule's translation, deleted when the rule has none.
struct Unaccent {
    rules: HashMap<String, String>,
    longest: usize,
}

impl Unaccent {
    fn parse(file: &str) -> Self {
        let mut rules = HashMap::new();
        for line in file.lines() {
            // Source, then the translation (absent: delete), split on ASCII white space.
            let mut fields = line.split([' ', '\t', '\r']).filter(|f| !f.is_empty());
            if let Some(source) = fields.next() {
                rules.insert(
                    source.to_owned(),
                    fields.next().unwrap_or_default().to_owned(),
                );
            }
        }
        let longest = rules.keys().map(|k| k.chars().count()).max().unwrap_or(1);
        Self { rules, longest }
    }

    fn apply<'a>(&self, word: &'a str) -> Cow<'a, str> {
        if word.is_ascii() {
            return Cow::Borrowed(word);
        }
        let chars: Vec<char> = word.chars().collect();
        let mut out = String::with_capacity(word.len());
        let mut i = 0;
        while i < chars.len() {
            let found = (1..=self.longest.min(chars.len() - i)).rev().find_map(|n| {
                let source: String = chars[i..i + n].iter().collect();
                self.rules.get(&source).map(|t| (n, t))
            });
            match found {
                Some((n, translation)) => {
                    out.push_str(translation);
                    i += n;
                }
                None => {
                    out.push(chars[i]);
                    i += 1;
                }
            }
        }
        Cow::Owned(out)
    }
}

/// A word as the parser cuts it: `[start, end)` in code points of the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word<'a> {
    pub start: usize,
    pub end: usize,
    pub text: &'a str,
}

/// The parser's word characters, read byte by byte: every non-ASCII character is one (so are
/// all the bytes of its UTF-8 encoding), and every separator the model knows is ASCII.
fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || !b.is_ascii()
}

/// Whether a byte starts a character (is not a UTF-8 continuation byte).
fn starts_char(b: u8) -> bool {
    b & 0xC0 != 0x80
}

/// Where the run of word bytes from byte `i` ends, and how many characters it holds.
fn word_run_end(bytes: &[u8], mut i: usize) -> (usize, usize) {
    let mut chars = 0;
    while i < bytes.len() && is_word_byte(bytes[i]) {
        chars += usize::from(starts_char(bytes[i]));
        i += 1;
    }
    (i, chars)
}

/// A `.` and a digit at `i`: after a number, the parser reads a decimal (`12.5`, one token).
fn starts_decimals(bytes: &[u8], i: usize) -> bool {
    bytes.get(i) == Some(&b'.') && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)
}

/// The end of a decimal number's fraction starting at the `.` at byte `i` (all ASCII, so bytes
/// are characters), or `None` for what the model leaves to PostgreSQL: letters in the fraction
/// (`1.5e3`) or a second `.` and digit (a version number, `8.3.0`).
fn decimal_end(bytes: &[u8], i: usize) -> Option<usize> {
    let (end, _) = word_run_end(bytes, i + 1);
    let digits_only = bytes[i + 1..end].iter().all(u8::is_ascii_digit);
    (digits_only && !starts_decimals(bytes, end)).then_some(end)
}

/// The words of `text` in order (the parts of a hyphenated word as words), or `None` when the
/// text holds something this model does not cover (module docs). One pass over the bytes,
/// counting characters for the spans.
pub fn word_spans(text: &str) -> Option<Vec<Word<'_>>> {
    let mut words = Vec::new();
    for_each_word(text, |word| words.push(word))?;
    Some(words)
}

/// Calls `on_word` with each word of `text` in order (as [`word_spans`], without collecting
/// them), or stops with `None` at the first thing the model does not cover; the words seen
/// before it were passed already.
fn for_each_word<'t>(text: &'t str, mut on_word: impl FnMut(Word<'t>)) -> Option<()> {
    let bytes = text.as_bytes();
    // The byte at `i` starts character number `at`.
    let (mut i, mut at) = (0, 0);
    while i < bytes.len() {
        if is_word_byte(bytes[i]) {
            let start = (i, at);
            let (mut end, mut chars) = word_run_end(bytes, i);
            if bytes[i..end].iter().all(u8::is_ascii_digit) && starts_decimals(bytes, end) {
                let fraction_end = decimal_end(bytes, end)?;
                chars += fraction_end - end;
                end = fraction_end;
            }
            if chars > MAX_WORD_CHARS {
                return None;
            }
            (i, at) = (end, at + chars);
            on_word(Word {
                start: start.1,
                end: at,
                text: &text[start.0..end],
            });
            continue;
        }
        // Not a word byte: an ASCII character, whose neighbours are the bytes beside it (a
        // non-ASCII neighbour is a word character and no digit, whichever of its bytes is read).
        let before = i.checked_sub(1).map(|j| bytes[j]);
        let after = bytes.get(i + 1).copied();
        let next_is_word = after.is_some_and(is_word_byte);
        let digit = |b: Option<u8>| b.is_some_and(|b| b.is_ascii_digit());
        let modelled = match bytes[i] {
            b' ' | b'\t' | b'\n' | b'\r' | b'\x0b' | b'\x0c' => true,
            b',' | b';' | b'!' | b'?' | b'"' | b'\'' | b'(' | b')' => true,
            b':' => !next_is_word,
            b'.' => !next_is_word,
            b'%' => true,
            b'-' => !digit(before) && !digit(after),
            _ => false,
        };
        if !modelled {
            return None;
        }
        i += 1;
        at += 1;
    }
    Some(())
}

/// The `[start, end)` code-point spans of the words of `text` whose lexeme is in `lexemes`, or
/// `None` when the text is not modelled.
pub fn marks(text: &str, folding: &Folding, lexemes: &HashSet<String>) -> Option<Vec<[usize; 2]>> {
    Marker::new(folding, lexemes).marks(text)
}

/// Marks the words of several texts for one query and language (a search page's fields),
/// remembering each distinct word's answer: news text repeats its words (the query's among
/// them, in every hit), and stemming is most of the cost. Lives as long as one page.
pub struct Marker<'a> {
    folding: &'a Folding,
    lexemes: &'a HashSet<String>,
    /// The ASCII first characters of the lexemes, by byte (see [`Marker::may_match`]): a table,
    /// not a set, as every word of every field of a page is asked.
    firsts: [bool; 128],
    /// Whether a word (as written) folds to one of the lexemes.
    seen: HashMap<Box<str>, bool>,
}

impl<'a> Marker<'a> {
    pub fn new(folding: &'a Folding, lexemes: &'a HashSet<String>) -> Self {
        Self {
            folding,
            lexemes,
            firsts: ascii_firsts(lexemes),
            seen: HashMap::new(),
        }
    }

    /// Whether a word can fold to one of the lexemes at all. A Snowball stemmer (English,
    /// Spanish) only rewrites a word's end, and the `simple` dictionary only its case, so a word
    /// that starts with an ASCII letter or digit keeps that first character (lower case) in its
    /// lexeme. Words starting with anything else are always folded.
    fn may_match(&self, word: &str) -> bool {
        // A character's first byte is an ASCII letter or digit exactly when the character is.
        word.as_bytes()
            .first()
            .filter(|b| b.is_ascii_alphanumeric())
            .is_none_or(|b| self.firsts[usize::from(b.to_ascii_lowercase())])
    }

    /// Whether `word`, a word of a folded text, is one of the lexemes.
    fn matches(&mut self, word: &str) -> bool {
        if !self.may_match(word) {
            return false;
        }
        if let Some(known) = self.seen.get(word) {
            return *known;
        }
        let lexemes = self.lexemes;
        let found = self.folding.with_lexeme(word, |l| lexemes.contains(l)) == Some(true);
        self.seen.insert(word.into(), found);
        found
    }

    /// As [`marks`].
    pub fn marks(&mut self, text: &str) -> Option<Vec<[usize; 2]>> {
        // The words PostgreSQL reads are those of the folded text, at the same code points.
        let folded = search_fold(text);
        let mut marks = Vec::new();
        for_each_word(&folded, |w| {
            if self.matches(w.text) {
                marks.push([w.start, w.end]);
            }
        })?;
        Some(marks)
    }
}

/// Which ASCII characters start one of `lexemes` (a lexeme starting with another character
/// cannot be the fold of a word starting with an ASCII letter or digit).
fn ascii_firsts(lexemes: &HashSet<String>) -> [bool; 128] {
    let mut firsts = [false; 128];
    for first in lexemes.iter().filter_map(|l| l.bytes().next()) {
        if first.is_ascii() {
            firsts[usize::from(first)] = true;
        }
    }
    firsts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_lowered_in_every_script_one_code_point_for_one() {
        for (written, lowered) in [
            ("ΟΔΟΣ οδός Σ", "οδοσ οδόσ σ"),
            ("МОСКВА Ёлка", "москва ёлка"),
            ("İSTANBUL Işık", "istanbul işık"),
            ("GROẞE", "große"),
            ("ASCII Stays", "ASCII Stays"),
            ("“the CAFÉ is full”", " the café is full "),
            ("said—quietly—that l’eau «x»", "said quietly that l eau  x "),
            ("va\u{A0}? 東京、駅。", "va ? 東京 駅 "),
        ] {
            let got = search_fold(written);
            assert_eq!(got, lowered, "{written}");
            assert_eq!(got.chars().count(), written.chars().count(), "{written}");
        }
        let english = Folding::of_language("en").unwrap();
        assert_eq!(english.lexeme("МОСКВА").as_deref(), Some("москва"));
        assert_eq!(english.lexeme("ΟΔΟΣ").as_deref(), Some("οδοσ"));
        assert_eq!(english.lexeme("Ж5").as_deref(), Some("ж5"));
    }

    fn english() -> Folding {
        Folding::of_language("en").unwrap()
    }

    fn lexemes(words: &[&str]) -> HashSet<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    fn marked(text: &str, spans: &[[usize; 2]]) -> Vec<String> {
        let chars: Vec<char> = text.chars().collect();
        spans
            .iter()
            .map(|[s, e]| chars[*s..*e].iter().collect())
            .collect()
    }

    #[test]
    fn folds_case_accents_and_stems() {
        let en = english();
        assert_eq!(en.lexeme("Elections").as_deref(), Some("elect"));
        assert_eq!(en.lexeme("CAFÉ").as_deref(), Some("cafe"));
        assert_eq!(en.lexeme("cafe\u{301}s").as_deref(), Some("cafe"));
        assert_eq!(en.lexeme("the"), None, "a stop word has no lexeme");
        assert_eq!(en.lexeme("Covid19").as_deref(), Some("covid19"));
        let es = Folding::of_language("es").unwrap();
        assert_eq!(es.lexeme("elecciones"), es.lexeme("Elección"));
        assert_eq!(es.lexeme("él"), None, "unaccented, then a stop word");
        assert!(Folding::of_language("de").is_none());
    }

    #[test]
    fn marks_words_in_code_points_with_emoji_and_combining_accents() {
        let text = "🎉 Cafe\u{301} culture: the CAFÉ-owners' cafés";
        let spans = marks(text, &english(), &lexemes(&["cafe"])).unwrap();
        assert_eq!(marked(text, &spans), ["Cafe\u{301}", "CAFÉ", "cafés"]);
        assert_eq!(spans[0], [2, 7]);
    }

    #[test]
    fn a_marker_that_remembers_words_marks_as_a_fresh_one() {
        let en = english();
        let wanted = lexemes(&["offici", "elect"]);
        let mut marker = Marker::new(&en, &wanted);
        let texts = [
            "Officials said the election was fair.",
            "officials, Elections and an officer: official elect",
            "Officials said the election was fair.",
            "see example.com",
        ];
        for text in texts {
            assert_eq!(marker.marks(text), marks(text, &en, &wanted), "{text}");
        }
    }

    #[test]
    fn emoji_and_curly_quotes_are_letters_of_the_word_they_touch() {
        let text = "“the 🎉party";
        let words: Vec<String> = word_spans(text)
            .unwrap()
            .into_iter()
            .map(|w| w.text.to_owned())
            .collect();
        assert_eq!(words, ["“the", "🎉party"]);
    }

    #[test]
    fn texts_the_model_does_not_cover_are_left_to_postgresql() {
        for text in [
            "see example.com",
            "a/b",
            "mail me@x.org",
            "1.5e3 points",
            "version 8.3.0",
            "won -5",
            "<b>bold</b>",
            "a &amp; b",
            "snake_case",
            "U.S. vote",
            &"x".repeat(MAX_WORD_CHARS + 1),
        ] {
            assert_eq!(word_spans(text), None, "{text}");
        }
        for text in [
            "end. Next",
            "3.5 points, 12.5% in 2019.",
            "well-known",
            "said: yes",
            "don't",
            "(a, b; c!?)",
            "— - –",
        ] {
            assert!(word_spans(text).is_some(), "{text}");
        }
    }

    #[test]
    fn stems_keep_the_first_character_of_words_starting_with_an_ascii_letter() {
        for language in ["en", "es"] {
            let folding = Folding::of_language(language).unwrap();
            for word in [
                "Skies",
                "dying",
                "ugly",
                "news",
                "yelled",
                "Ying",
                "idly",
                "acciones",
                "árboles",
                "Xylophones",
                "2026th",
            ] {
                if let Some(lexeme) = folding.lexeme(word) {
                    let first = word.chars().next().unwrap();
                    if first.is_ascii_alphanumeric() {
                        assert_eq!(
                            lexeme.chars().next(),
                            Some(first.to_ascii_lowercase()),
                            "{word}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn unaccent_deletes_combining_marks_and_expands_ligatures() {
        assert_eq!(UNACCENT.apply("e\u{301}læ"), "elae");
        assert_eq!(UNACCENT.apply("plain"), "plain");
    }
}
