//! Phrase search (`GET /phrases?q=`): what a search string may be. Matching and ranking happen in
//! PostgreSQL (migration `20261127000002_phrase_search.sql`, ranks in
//! [`SearchRank`](crate::domain::cursor::SearchRank)).

use shared_auth::Problem;

use crate::domain::text::is_storable;

pub const MAX_QUERY_CHARS: usize = 100;

/// The search string of `q`, trimmed: 1..=100 characters (Unicode scalar values), else 400
/// `invalid_query`. `None` when no `q` was given (the plain list).
pub fn search_text(q: Option<&str>) -> Result<Option<String>, Problem> {
    let Some(q) = q else { return Ok(None) };
    let text = q.trim();
    let chars = text.chars().count();
    if !(1..=MAX_QUERY_CHARS).contains(&chars) || !is_storable(text) {
        return Err(Problem::invalid_query(format!(
            "q must be 1 to {MAX_QUERY_CHARS} characters after trimming, without NUL"
        )));
    }
    Ok(Some(text.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_search_text_is_trimmed_and_from_1_to_100_characters() {
        assert_eq!(search_text(None).unwrap(), None);
        assert_eq!(
            search_text(Some("  dónde está \n")).unwrap().as_deref(),
            Some("dónde está")
        );
        let hundred = "é".repeat(100);
        assert_eq!(search_text(Some(&hundred)).unwrap(), Some(hundred.clone()));
        for refused in ["", "   ", "\t\n", &format!("{hundred}e"), "a\0b"] {
            let problem = search_text(Some(refused)).unwrap_err();
            assert_eq!(problem.code, "invalid_query", "{refused:?}");
        }
    }
}
