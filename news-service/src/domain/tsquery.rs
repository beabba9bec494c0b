//! A `tsquery` as PostgreSQL prints it, and the parts of it that can never match a document.
//!
//! Why: a query that excludes a word it also requires (`officials -officials`, `officials
//! -official`: both stem to `offici`) matches nothing, but PostgreSQL estimates it as about as
//! frequent as the word itself, so it walks the newest-first index looking for matches and
//! reads every article (7.5 s on 1,000,000 articles, past the request deadline). Removing what
//! cannot match before the database plans the query gives it an honest query: nothing at all
//! (no statement is run), or only the alternatives that can match (`(a | b) & !a` is asked as
//! `b & !a`).

use std::collections::HashSet;

/// A parsed `tsquery`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    /// A lexeme as written, quotes and `:labels` included, and its text when it is a whole
    /// word (no `:*` prefix): only whole words are matched by an exclusion.
    Lexeme {
        written: String,
        word: Option<String>,
    },
    Not(Box<Node>),
    And(Vec<Node>),
    Or(Vec<Node>),
    /// `left <N> right` (`<->` is `<1>`), the operator as written.
    Phrase(Box<Node>, String, Box<Node>),
}

/// What a part of a query is once the words it may not contain are known.
enum Truth {
    Never,
    Always,
    Maybe(Node),
}

/// `query` (tsquery text as PostgreSQL prints it) without the parts that can never match:
/// `None` when nothing can match it, else the query to ask (unchanged when nothing could be
/// removed, or when the text is not one this parser reads).
pub fn without_contradictions(query: &str) -> Option<String> {
    let Some(node) = Parser::new(query).parse() else {
        return Some(query.to_owned());
    };
    match simplify(&node, &HashSet::new()) {
        Truth::Never => None,
        // Only a negation of something that never matches is always true; a query that
        // matches every document is not what was asked: keep it as written.
        Truth::Always => Some(query.to_owned()),
        Truth::Maybe(simpler) if simpler == node => Some(query.to_owned()),
        Truth::Maybe(simpler) => Some(print(&simpler)),
    }
}

/// Whether `query` (tsquery text as PostgreSQL prints it) asks for a word: `false` when it is
/// made of exclusions only (`!'rain'`, `!'rain' & !'strike'`), which would match every document
/// without them. PostgreSQL's web-search syntax reads `-` as "not" in more places than before a
/// word (`(-rain)`, `- rain`), so this is judged on the query it made. `true` for text this
/// parser cannot read.
pub fn asks_for_a_word(query: &str) -> bool {
    fn asks(node: &Node) -> bool {
        match node {
            Node::Lexeme { .. } => true,
            Node::Not(_) => false,
            Node::And(children) | Node::Or(children) => children.iter().any(asks),
            Node::Phrase(left, _, right) => asks(left) || asks(right),
        }
    }
    Parser::new(query).parse().is_none_or(|node| asks(&node))
}

/// Whether `query` (tsquery text as PostgreSQL prints it) can match a document, given
/// `documents(lexeme)`, the exact number of documents holding a whole-word lexeme: not when it
/// requires a lexeme no document holds (`'carrer'` among English articles, `'a' & 'carrer'`,
/// `'a' <-> 'carrer'`, `'carrer' | 'other'` when neither is held). A lexeme not counted, a
/// prefix, or text this parser cannot read can match.
pub fn can_match(query: &str, documents: impl Fn(&str) -> Option<u64>) -> bool {
    fn can(node: &Node, documents: &impl Fn(&str) -> Option<u64>) -> bool {
        match node {
            Node::Lexeme { word, .. } => word.as_deref().and_then(documents) != Some(0),
            // An exclusion matches every document without its words.
            Node::Not(_) => true,
            Node::And(children) => children.iter().all(|c| can(c, documents)),
            Node::Phrase(left, _, right) => can(left, documents) && can(right, documents),
            Node::Or(children) => children.iter().any(|c| can(c, documents)),
        }
    }
    Parser::new(query)
        .parse()
        .is_none_or(|node| can(&node, &documents))
}

/// About how many of `all` documents match `query` (tsquery text as PostgreSQL prints it),
/// given `documents(lexeme)`, the number of documents holding a whole-word lexeme: PostgreSQL's
/// own estimate (each lexeme's share of the documents; words taken as independent, so a
/// conjunction or a phrase is the product of its parts' shares, an alternative `p + q - pq`, an
/// exclusion `1 - p`), but from counts of the right documents where PostgreSQL has statistics
/// over every language's. A prefix, or a lexeme not counted, is taken to be in every document;
/// text this parser cannot read matches `all`.
pub fn expected_matches(query: &str, all: u64, documents: impl Fn(&str) -> Option<u64>) -> u64 {
    if all == 0 {
        return 0;
    }
    let Some(node) = Parser::new(query).parse() else {
        return all;
    };
    let share = share(&node, all as f64, &documents).clamp(0.0, 1.0);
    (share * all as f64).round() as u64
}

/// The share of the documents `node` matches (see [`expected_matches`]).
fn share(node: &Node, all: f64, documents: &impl Fn(&str) -> Option<u64>) -> f64 {
    match node {
        // With weight labels (`'a':B`) a lexeme matches in one field: at most the word's share.
        Node::Lexeme { word, .. } => word
            .as_deref()
            .and_then(documents)
            .map_or(1.0, |n| (n as f64 / all).min(1.0)),
        Node::Not(inner) => 1.0 - share(inner, all, documents),
        Node::And(children) => children.iter().map(|c| share(c, all, documents)).product(),
        Node::Phrase(left, _, right) => share(left, all, documents) * share(right, all, documents),
        Node::Or(children) => {
            1.0 - children
                .iter()
                .map(|c| 1.0 - share(c, all, documents))
                .product::<f64>()
        }
    }
}

/// `node` where the whole words of `absent` are known not to be in the document.
fn simplify(node: &Node, absent: &HashSet<String>) -> Truth {
    match node {
        Node::Lexeme { word, .. } => match word {
            Some(word) if absent.contains(word) => Truth::Never,
            _ => Truth::Maybe(node.clone()),
        },
        Node::Not(inner) => match simplify(inner, absent) {
            Truth::Never => Truth::Always,
            Truth::Always => Truth::Never,
            Truth::Maybe(inner) => Truth::Maybe(Node::Not(Box::new(inner))),
        },
        Node::Or(children) => {
            let mut kept = Vec::new();
            for child in children {
                match simplify(child, absent) {
                    Truth::Always => return Truth::Always,
                    Truth::Never => {}
                    Truth::Maybe(child) => kept.push(child),
                }
            }
            joined(kept, Node::Or, Truth::Never)
        }
        Node::And(children) => {
            // The words this conjunction excludes are absent wherever it matches.
            let mut absent = absent.clone();
            absent.extend(children.iter().filter_map(excluded_word));
            let mut kept = Vec::new();
            for child in children {
                // An exclusion is not simplified against itself.
                let truth = match excluded_word(child) {
                    Some(_) => Truth::Maybe(child.clone()),
                    None => simplify(child, &absent),
                };
                match truth {
                    Truth::Never => return Truth::Never,
                    Truth::Always => {}
                    Truth::Maybe(child) => kept.push(child),
                }
            }
            joined(kept, Node::And, Truth::Always)
        }
        Node::Phrase(left, op, right) => {
            match (simplify(left, absent), simplify(right, absent)) {
                (Truth::Never, _) | (_, Truth::Never) => Truth::Never,
                (Truth::Maybe(l), Truth::Maybe(r)) => {
                    Truth::Maybe(Node::Phrase(Box::new(l), op.clone(), Box::new(r)))
                }
                // A negation that always holds inside a phrase still counts a position:
                // keep the phrase as written.
                _ => Truth::Maybe(node.clone()),
            }
        }
    }
}

/// The word `!'word'` excludes, for a child of a conjunction: a whole word without weights (a
/// weight, `!'a':B`, excludes the word in one field only).
fn excluded_word(node: &Node) -> Option<String> {
    let Node::Not(inner) = node else { return None };
    match inner.as_ref() {
        Node::Lexeme {
            written,
            word: Some(word),
        } if !has_weights(written) => Some(word.clone()),
        _ => None,
    }
}

/// Whether a lexeme as written carries weight labels (`'a':AB`).
fn has_weights(written: &str) -> bool {
    let labels = &written[written.rfind('\'').map_or(written.len(), |i| i + 1)..];
    labels.chars().any(|c| c.is_ascii_alphabetic())
}

/// One node of what is left, or `empty` when nothing is.
fn joined(mut kept: Vec<Node>, make: fn(Vec<Node>) -> Node, empty: Truth) -> Truth {
    match kept.len() {
        0 => empty,
        1 => Truth::Maybe(kept.remove(0)),
        _ => Truth::Maybe(make(kept)),
    }
}

/// Tsquery text: compound operands in parentheses, so no precedence is relied on.
fn print(node: &Node) -> String {
    fn operand(node: &Node) -> String {
        match node {
            Node::Lexeme { .. } | Node::Not(_) => print(node),
            _ => format!("( {} )", print(node)),
        }
    }
    match node {
        Node::Lexeme { written, .. } => written.clone(),
        Node::Not(inner) => format!("!{}", operand(inner)),
        Node::And(children) => children.iter().map(operand).collect::<Vec<_>>().join(" & "),
        Node::Or(children) => children.iter().map(operand).collect::<Vec<_>>().join(" | "),
        Node::Phrase(left, op, right) => format!("{} {op} {}", operand(left), operand(right)),
    }
}

/// A recursive-descent reader of PostgreSQL's tsquery output: `|` binds loosest, then `&`,
/// then the phrase operators, then `!`.
struct Parser<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Self {
        Self { text, at: 0 }
    }

    /// The whole text as one query, or `None` when it is not one this parser reads.
    fn parse(mut self) -> Option<Node> {
        let node = self.or()?;
        self.skip_spaces();
        (self.at == self.text.len()).then_some(node)
    }

    fn rest(&self) -> &'a str {
        &self.text[self.at..]
    }

    fn skip_spaces(&mut self) {
        let rest = self.rest();
        self.at += rest.len() - rest.trim_start().len();
    }

    /// Consumes `token` (after spaces) when it comes next.
    fn eat(&mut self, token: &str) -> bool {
        self.skip_spaces();
        let found = self.rest().starts_with(token);
        if found {
            self.at += token.len();
        }
        found
    }

    fn or(&mut self) -> Option<Node> {
        let mut children = vec![self.and()?];
        while self.eat("|") {
            children.push(self.and()?);
        }
        Some(flatten(children, Node::Or))
    }

    fn and(&mut self) -> Option<Node> {
        let mut children = vec![self.phrase()?];
        while self.eat("&") {
            children.push(self.phrase()?);
        }
        Some(flatten(children, Node::And))
    }

    fn phrase(&mut self) -> Option<Node> {
        let mut left = self.unary()?;
        while let Some(op) = self.phrase_operator() {
            let right = self.unary()?;
            left = Node::Phrase(Box::new(left), op, Box::new(right));
        }
        Some(left)
    }

    /// `<->` or `<N>`.
    fn phrase_operator(&mut self) -> Option<String> {
        self.skip_spaces();
        let rest = self.rest();
        let inner = rest.strip_prefix('<')?;
        let end = inner.find('>')?;
        let distance = &inner[..end];
        if distance != "-" && !distance.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        let op = &rest[..end + 2];
        self.at += op.len();
        Some(op.to_owned())
    }

    fn unary(&mut self) -> Option<Node> {
        if self.eat("!") {
            return Some(Node::Not(Box::new(self.unary()?)));
        }
        if self.eat("(") {
            let inner = self.or()?;
            return self.eat(")").then_some(inner);
        }
        self.lexeme()
    }

    /// `'text'` (`''` a quote, `\` escaping the next character) and its `:labels`.
    fn lexeme(&mut self) -> Option<Node> {
        self.skip_spaces();
        let start = self.at;
        let mut chars = self.rest().char_indices();
        if chars.next()?.1 != '\'' {
            return None;
        }
        let mut word = String::new();
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => word.push(chars.next()?.1),
                '\'' if self.rest()[i + 1..].starts_with('\'') => {
                    word.push('\'');
                    chars.next();
                }
                '\'' => {
                    end = Some(i + 1);
                    break;
                }
                _ => word.push(c),
            }
        }
        let mut end = end?;
        let labels = self.rest()[end..].strip_prefix(':').map_or(0, |after| {
            1 + after
                .find(|c: char| c != '*' && !c.is_ascii_alphabetic())
                .unwrap_or(after.len())
        });
        end += labels;
        let written = &self.rest()[..end];
        self.at = start + end;
        let prefix = written[written.rfind('\'')?..].contains('*');
        Some(Node::Lexeme {
            written: written.to_owned(),
            word: (!prefix).then_some(word),
        })
    }
}

/// One node for an operator's operands, nested ones of the same operator merged.
fn flatten(children: Vec<Node>, make: fn(Vec<Node>) -> Node) -> Node {
    if children.len() == 1 {
        return children.into_iter().next().expect("one child");
    }
    let is_and = matches!(make(Vec::new()), Node::And(_));
    let mut merged = Vec::with_capacity(children.len());
    for child in children {
        match child {
            Node::And(inner) if is_and => merged.extend(inner),
            Node::Or(inner) if !is_and => merged.extend(inner),
            other => merged.push(other),
        }
    }
    make(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclusions_alone_ask_for_no_word() {
        assert!(!asks_for_a_word("!'rain'"));
        assert!(!asks_for_a_word("!'rain' & !( 'harbour' <-> 'strike' )"));
        assert!(!asks_for_a_word("!!'rain'"));
        assert!(asks_for_a_word("'harbour' & !'rain'"));
        assert!(asks_for_a_word("'harbour' | !'rain'"));
        assert!(asks_for_a_word("'harbour' <-> 'strike'"));
        assert!(asks_for_a_word("'unclosed"));
    }

    #[test]
    fn a_query_requiring_a_lexeme_no_document_holds_cannot_match() {
        let counts = |w: &str| match w {
            "carrer" | "carr" => Some(0),
            "said" => Some(5),
            _ => None,
        };
        for query in [
            "'carrer'",
            "'said' & 'carrer'",
            "'said' <-> 'carrer'",
            "'carrer' | 'carr'",
        ] {
            assert!(!can_match(query, counts), "{query}");
        }
        for query in [
            "'said'",
            "'said' | 'carrer'",
            "'said' & !'carrer'",
            "'other'",
            "'carr':*",
            "'unclosed",
        ] {
            assert!(can_match(query, counts), "{query}");
        }
    }

    #[test]
    fn matches_are_estimated_from_each_lexemes_count() {
        let counts = |w: &str| match w {
            "said" => Some(500_000),
            "offici" => Some(250_000),
            "harbour" => Some(2_000),
            "it's" => Some(7),
            "carrer" => Some(0),
            _ => None,
        };
        let all = 1_000_000;
        let expected = |q: &str| expected_matches(q, all, counts);
        assert_eq!(expected("'said'"), 500_000);
        assert_eq!(expected("'carrer'"), 0);
        assert_eq!(expected("'it''s'"), 7);
        // Independent words: shares multiply.
        assert_eq!(expected("'said' & 'harbour'"), 1_000);
        assert_eq!(expected("'said' <-> 'said'"), 250_000);
        assert_eq!(expected("'said' & !'offici'"), 375_000);
        assert_eq!(expected("'harbour' | 'carrer'"), 2_000);
        assert_eq!(expected("'said' | 'offici'"), 625_000);
        assert_eq!(expected("( 'harbour' | 'carrer' ) & 'said'"), 1_000);
        // Exclusions alone, prefixes, uncounted lexemes and unreadable text: every document.
        assert_eq!(expected("!'carrer'"), all);
        assert_eq!(expected("'harb':*"), all);
        assert_eq!(expected("'unknown'"), all);
        assert_eq!(expected("'unclosed"), all);
        assert_eq!(expected_matches("'said'", 0, counts), 0);
    }

    #[test]
    fn a_word_required_and_excluded_matches_nothing() {
        assert_eq!(without_contradictions("'offici' & !'offici'"), None);
        assert_eq!(
            without_contradictions("'harbour' & 'offici' & !'offici'"),
            None
        );
        // In a phrase, or excluded by a later exclusion.
        assert_eq!(
            without_contradictions("'offici' <-> 'said' & !'said'"),
            None
        );
        assert_eq!(without_contradictions("( 'a' | 'b' ) & !'a' & !'b'"), None);
    }

    #[test]
    fn alternatives_that_cannot_match_are_left_out() {
        assert_eq!(
            without_contradictions("( 'offici' | 'said' ) & !'offici'").as_deref(),
            Some("'said' & !'offici'")
        );
        assert_eq!(
            without_contradictions("( 'a' <-> 'b' | 'c' ) & !'b' & 'd'").as_deref(),
            Some("'c' & !'b' & 'd'")
        );
    }

    #[test]
    fn queries_that_can_match_are_asked_as_written() {
        for query in [
            "'offici'",
            "'offici' | 'said' & !'offici'",
            "'offici' & !( 'offici' <-> 'said' )",
            "'offici' <-> 'said'",
            "'offici':* & !'offici'",
            "'offici' & !'offici':*",
            "'offici' & !'offici':B",
            "'it''s' & !'a\\\\b'",
            "'a' <2> 'b' & !'c'",
            "!'a'",
        ] {
            assert_eq!(
                without_contradictions(query).as_deref(),
                Some(query),
                "{query}"
            );
        }
    }

    #[test]
    fn a_prefix_or_a_weight_is_not_the_excluded_word() {
        // `'offici':*` may match `officially`; `!'offici':B` excludes it in the summary only.
        assert!(without_contradictions("'offici':* & !'offici'").is_some());
        assert!(without_contradictions("'offici' & !'offici':B").is_some());
        // A weighted occurrence of an excluded word cannot match.
        assert_eq!(without_contradictions("'offici':A & !'offici'"), None);
    }

    #[test]
    fn quotes_and_escapes_are_read_as_postgresql_writes_them() {
        assert_eq!(without_contradictions("'it''s' & !'it''s'"), None);
        assert_eq!(without_contradictions("'a\\\\b' & !'a\\\\b'"), None);
        assert_eq!(
            without_contradictions("'it''s' & !'its'").as_deref(),
            Some("'it''s' & !'its'")
        );
    }

    #[test]
    fn text_it_cannot_read_is_asked_as_written() {
        for query in ["", "'unclosed", "'a' & ", "( 'a' ", "'a' <x> 'b'"] {
            assert_eq!(without_contradictions(query).as_deref(), Some(query));
        }
    }

    #[test]
    fn printing_keeps_the_meaning_of_nested_operators() {
        let node = Parser::new("( 'a' | 'b' ) <-> 'c' & !( 'd' & 'e' )")
            .parse()
            .unwrap();
        assert_eq!(print(&node), "( ( 'a' | 'b' ) <-> 'c' ) & !( 'd' & 'e' )");
        assert_eq!(Parser::new(&print(&node)).parse().unwrap(), node);
    }
}
