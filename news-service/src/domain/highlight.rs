//! Highlights: PostgreSQL's `ts_headline` marks the matched words of a fragment with two
//! private-use characters (the store replaces any in the article's own text first); this turns
//! such a fragment into plain text and `[start, end)` spans counted in code points, cut to at
//! most [`MAX_FRAGMENT_CHARS`] without cutting a code point, a marked word or a word's
//! combining marks.

use crate::domain::search::is_combining_mark;

/// Before a matched word in `ts_headline`'s output.
pub const START: char = '\u{E000}';
/// After a matched word.
pub const STOP: char = '\u{E001}';
/// What the store puts in place of a marker character found in an article's own text (one code
/// point for one, so the text keeps its length).
pub const REPLACEMENT: char = '\u{FFFD}';
/// `text` is at most this many characters.
pub const MAX_FRAGMENT_CHARS: usize = 200;
/// Characters of context kept before the first mark when a fragment must be cut.
const LEAD: usize = 40;

/// A piece of a field with the spans of its matched words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fragment {
    pub text: String,
    /// `[start, end)` in code points of `text`, in order, not overlapping.
    pub marks: Vec<[usize; 2]>,
}

/// The fragment `ts_headline` marked, cut to length; `None` when no word is marked (the field
/// did not match).
pub fn fragment(marked: &str) -> Option<Fragment> {
    let (chars, marks) = unmark(marked);
    if marks.is_empty() {
        return None;
    }
    Some(cut(&chars, &marks))
}

/// The fragment of `written` whose words are those `ts_headline` marked in `marked`, a copy of
/// `written` with other letters (lowered, one code point for one) and the markers added; `None`
/// when no word is marked.
pub fn fragment_of(written: &str, marked: &str) -> Option<Fragment> {
    let (chars, marks) = unmark(marked);
    if chars.len() != written.chars().count() {
        // A lowering that changed a length (a Unicode version apart): the lowered fragment.
        return fragment(marked);
    }
    fragment_at(written, &marks)
}

/// The fragment of `text` whose words at `marks` (`[start, end)` code points, in order) matched,
/// cut to length; `None` when nothing is marked. Marker characters in the text become
/// [`REPLACEMENT`], as in a fragment `ts_headline` marked.
pub fn fragment_at(text: &str, marks: &[[usize; 2]]) -> Option<Fragment> {
    let first_mark = marks.first()?[0];
    // The cut reads at most one character past the farthest end a fragment around the first
    // mark can have: the rest of a long body is not copied.
    let chars: Vec<char> = text
        .chars()
        .take(first_mark + MAX_FRAGMENT_CHARS + 1)
        .map(|c| {
            if c == START || c == STOP {
                REPLACEMENT
            } else {
                c
            }
        })
        .collect();
    Some(cut(&chars, marks))
}

/// The characters without markers, and the marked spans in them.
fn unmark(marked: &str) -> (Vec<char>, Vec<[usize; 2]>) {
    let mut chars = Vec::with_capacity(marked.len());
    let mut marks = Vec::new();
    let mut open = None;
    for c in marked.chars() {
        match c {
            START => open = Some(chars.len()),
            STOP => {
                if let Some(start) = open.take()
                    && start < chars.len()
                {
                    marks.push([start, chars.len()]);
                }
            }
            _ => chars.push(c),
        }
    }
    (chars, marks)
}

/// At most `MAX_FRAGMENT_CHARS` around the first mark, starting and ending at word boundaries
/// where the text allows it, with the marks that fit.
fn cut(chars: &[char], marks: &[[usize; 2]]) -> Fragment {
    let (start, end) = if chars.len() <= MAX_FRAGMENT_CHARS {
        (0, chars.len())
    } else {
        window(chars, marks[0][0])
    };
    let marks = marks
        .iter()
        .filter(|[s, e]| *s >= start && *e <= end)
        .map(|[s, e]| [s - start, e - start])
        .collect::<Vec<_>>();
    let marks = if marks.is_empty() {
        // A single marked word longer than the fragment: mark what fits of it.
        vec![[0, end - start]]
    } else {
        marks
    };
    Fragment {
        text: chars[start..end].iter().collect(),
        marks,
    }
}

fn window(chars: &[char], first_mark: usize) -> (usize, usize) {
    let mut start = first_mark.saturating_sub(LEAD);
    // Start after a space when one is near, and never on a combining mark.
    if let Some(space) = (start..first_mark).find(|&i| chars[i].is_whitespace()) {
        start = space + 1;
    }
    while start < first_mark && is_combining_mark(chars[start]) {
        start += 1;
    }
    let mut end = (start + MAX_FRAGMENT_CHARS).min(chars.len());
    if end < chars.len() {
        // End before the word the limit falls in, unless that word is the first mark's.
        let back = (start..end)
            .rev()
            .find(|&i| chars[i].is_whitespace())
            .filter(|&i| i > first_mark);
        if let Some(space) = back {
            end = space;
        }
        while end > start + 1 && is_combining_mark(chars[end]) {
            end -= 1;
        }
    }
    (start, end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marked(text: &str) -> String {
        text.replace('[', &START.to_string())
            .replace(']', &STOP.to_string())
    }

    fn spans(fragment: &Fragment) -> Vec<String> {
        let chars: Vec<char> = fragment.text.chars().collect();
        fragment
            .marks
            .iter()
            .map(|[s, e]| chars[*s..*e].iter().collect())
            .collect()
    }

    #[test]
    fn marks_count_code_points_not_bytes_or_utf16_units() {
        let f = fragment(&marked(
            "🎉🎉 the [election] of the cafe\u{301} [cafe\u{301}s]",
        ))
        .unwrap();
        assert_eq!(f.text, "🎉🎉 the election of the cafe\u{301} cafe\u{301}s");
        // 🎉 is 1 code point (2 UTF-16 units, 4 bytes); the combining accent is its own.
        assert_eq!(f.marks, vec![[7, 15], [29, 35]]);
        assert_eq!(spans(&f), ["election", "cafe\u{301}s"]);
    }

    #[test]
    fn marks_found_in_rust_give_the_fragment_ts_headline_markers_would() {
        let text = format!("🎉 the cafe\u{301} {START}x{STOP}");
        let from_marks = fragment_at(&text, &[[6, 11]]).unwrap();
        let from_markers = fragment(&format!(
            "🎉 the {START}cafe\u{301}{STOP} \u{FFFD}x\u{FFFD}"
        ))
        .unwrap();
        assert_eq!(from_marks, from_markers);
        assert_eq!(fragment_at("text", &[]), None);
    }

    #[test]
    fn marks_found_in_a_lowered_text_are_put_on_the_text_as_written() {
        let marked = format!("{START}москва{STOP} готовится, {START}οδοσ{STOP}");
        let fragment = fragment_of("МОСКВА готовится, ΟΔΟΣ", &marked).unwrap();
        assert_eq!(fragment.text, "МОСКВА готовится, ΟΔΟΣ");
        assert_eq!(fragment.marks, [[0, 6], [18, 22]]);
        // Lengths apart: the lowered fragment rather than marks on other words.
        let lowered = "i\u{307}i\u{307}";
        let fragment = fragment_of("İİ x", &format!("{START}{lowered}{STOP} x")).unwrap();
        assert_eq!(fragment.text, format!("{lowered} x"));
        assert_eq!(fragment.marks, [[0, 4]]);
        assert_eq!(fragment_of("x", "x"), None);
    }

    #[test]
    fn a_long_text_cut_from_marks_is_the_one_cut_from_markers() {
        // Marks near the start, in the middle and at the very end of a long text, words with
        // combining accents at the cut.
        let words: Vec<String> = (0..300)
            .map(|i| {
                if i % 7 == 0 {
                    "cafe\u{301}".to_owned()
                } else {
                    format!("w{i}")
                }
            })
            .collect();
        let text = words.join(" ");
        let starts: Vec<usize> = words
            .iter()
            .scan(0, |at, w| {
                let start = *at;
                *at += w.chars().count() + 1;
                Some(start)
            })
            .collect();
        for first in [0, 5, 150, 299] {
            let marked_words: Vec<usize> = (first..300).step_by(3).collect();
            let marks: Vec<[usize; 2]> = marked_words
                .iter()
                .map(|&w| [starts[w], starts[w] + words[w].chars().count()])
                .collect();
            let with_markers: Vec<String> = words
                .iter()
                .enumerate()
                .map(|(i, w)| {
                    if marked_words.contains(&i) {
                        format!("{START}{w}{STOP}")
                    } else {
                        w.clone()
                    }
                })
                .collect();
            assert_eq!(
                fragment_at(&text, &marks),
                fragment(&with_markers.join(" ")),
                "first mark on word {first}"
            );
        }
    }

    #[test]
    fn no_mark_is_no_fragment() {
        assert_eq!(fragment("nothing matched here"), None);
        assert_eq!(fragment(&marked("empty [] mark")), None);
    }

    #[test]
    fn long_fields_are_cut_around_the_first_mark_at_word_boundaries() {
        let before = "lorem ipsum dolor sit amet ".repeat(10);
        let after = " and then 🎉 more é text".repeat(20);
        let text = format!("{before}the [strike] ended{after} [strike] again");
        let f = fragment(&marked(&text)).unwrap();
        assert!(f.text.chars().count() <= MAX_FRAGMENT_CHARS);
        assert_eq!(spans(&f), ["strike"]);
        let plain = text.replace(['[', ']'], "");
        assert!(
            plain.contains(&f.text),
            "a fragment is a piece of the field"
        );
        assert!(!f.text.starts_with(' ') && !f.text.ends_with(' '));
        assert!(f.marks[0][0] <= LEAD);
    }

    #[test]
    fn an_overlong_marked_word_is_cut_but_stays_marked() {
        let word = "x".repeat(300);
        let f = fragment(&marked(&format!("[{word}]"))).unwrap();
        assert_eq!(f.text.chars().count(), MAX_FRAGMENT_CHARS);
        assert_eq!(f.marks, vec![[0, MAX_FRAGMENT_CHARS]]);
    }

    #[test]
    fn a_cut_never_starts_on_a_combining_mark() {
        let mut text = format!("x{}", "e\u{301}".repeat(150));
        text.push_str("[hit]");
        text.push_str(&"e\u{301}".repeat(150));
        let f = fragment(&marked(&text)).unwrap();
        assert!(!is_combining_mark(f.text.chars().next().unwrap()));
        assert_eq!(spans(&f), ["hit"]);
        assert!(f.text.chars().count() <= MAX_FRAGMENT_CHARS);
    }
}
