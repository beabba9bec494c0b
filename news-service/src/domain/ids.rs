//! Identifiers as the database can hold them. Postgres `text` cannot store U+0000, so an id that
//! contains it names no row: a lookup answers "not found" (or an empty page) without asking the
//! database, which would otherwise fail the statement (a 500 for a plain unknown id).

/// Whether a stored row could have this id.
pub fn can_exist(id: &str) -> bool {
    !id.contains('\0')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_nul_rules_an_id_out() {
        let table = [
            ("art-000001", true),
            ("", true),
            ("é ☃", true),
            ("\0", false),
            ("art\0", false),
        ];
        for (id, expected) in table {
            assert_eq!(can_exist(id), expected, "{id:?}");
        }
    }
}
