//! XP awarded for one study session.

/// A perfect session of at least this many phrases earns the bonus.
pub const PERFECT_BONUS_MIN_SEEN: i64 = 5;
pub const BASE_XP: i64 = 10;
pub const PERFECT_BONUS_XP: i64 = 5;

/// 0 when nothing was seen; otherwise `10 + phrases_correct`, plus 5 when at least 5 phrases
/// were seen and every one was correct. Inputs are assumed validated (`correct <= seen`).
pub fn session_xp(phrases_seen: i64, phrases_correct: i64) -> i64 {
    if phrases_seen == 0 {
        return 0;
    }
    let bonus = if phrases_seen >= PERFECT_BONUS_MIN_SEEN && phrases_correct == phrases_seen {
        PERFECT_BONUS_XP
    } else {
        0
    };
    BASE_XP + phrases_correct + bonus
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xp_table() {
        // (seen, correct, xp)
        let cases = [
            (0, 0, 0),
            (1, 0, 10),
            (1, 1, 11),
            (4, 4, 14), // perfect but under 5 seen: no bonus
            (5, 4, 14),
            (5, 5, 20), // perfect at 5 seen: bonus
            (6, 6, 21),
            (10, 0, 10),
            (10, 9, 19),
            (10, 10, 25),
            (10_000, 10_000, 10_015),
            (10_000, 9_999, 10_009),
        ];
        for (seen, correct, xp) in cases {
            assert_eq!(
                session_xp(seen, correct),
                xp,
                "seen {seen}, correct {correct}"
            );
        }
    }
}
