//! The learning rules and the shapes clients see, with no I/O: XP per session, level from total
//! XP, streaks over UTC days, the study-session input rules, the progress counters, the analytics
//! cursor codec, and the resources `store/` returns and `routes/` serialise. Rules are small pure
//! functions with their unit tests next to them.

pub mod catalogue;
pub mod cursor;
pub mod level;
pub mod progress;
pub mod streak;
pub mod study_session;
pub mod time;
pub mod xp;

/// Whether `text` can be compared with a Postgres `text` column. Postgres text cannot hold NUL,
/// so such a value names nothing in the database; binding it would fail the whole query
/// (SQLSTATE 22021) and turn a client's typo into a 500.
pub fn is_storable(text: &str) -> bool {
    !text.contains('\0')
}

#[cfg(test)]
mod tests {
    #[test]
    fn nul_is_not_storable() {
        assert!(super::is_storable("es"));
        assert!(!super::is_storable("e\0s"));
    }
}
