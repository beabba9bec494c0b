//! Which client-supplied text can name a stored row at all.

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
