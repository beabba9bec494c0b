//! Levels from total XP: level 1 at 0 XP up to level 25 at 30000 XP.

/// XP needed to reach level `i + 1`.
pub const LEVEL_THRESHOLDS: [i64; 25] = [
    0, 60, 120, 200, 300, 450, 750, 1125, 1650, 2250, 3000, 3900, 4900, 6000, 7500, 9000, 10500,
    12000, 13500, 15000, 17000, 19000, 22500, 26000, 30000,
];

pub const MAX_LEVEL: i64 = LEVEL_THRESHOLDS.len() as i64;

/// The level reached with `total_xp` (negative XP counts as 0).
pub fn level_for_xp(total_xp: i64) -> i64 {
    LEVEL_THRESHOLDS
        .iter()
        .filter(|&&floor| floor <= total_xp)
        .count()
        .max(1) as i64
}

/// XP at which `level` starts.
pub fn level_floor_xp(level: i64) -> i64 {
    let index = level.clamp(1, MAX_LEVEL) - 1;
    LEVEL_THRESHOLDS[index as usize]
}

/// XP at which the level after `level` starts; `None` at the maximum level.
pub fn next_level_xp(level: i64) -> Option<i64> {
    if level >= MAX_LEVEL {
        return None;
    }
    Some(LEVEL_THRESHOLDS[level.max(1) as usize])
}

/// Where a learner stands: the `GET /me/xp` numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LevelProgress {
    pub level: i64,
    pub level_floor_xp: i64,
    pub next_level_xp: Option<i64>,
    pub xp_to_next_level: i64,
}

pub fn level_progress(total_xp: i64) -> LevelProgress {
    let level = level_for_xp(total_xp);
    let next = next_level_xp(level);
    LevelProgress {
        level,
        level_floor_xp: level_floor_xp(level),
        next_level_xp: next,
        xp_to_next_level: next.map_or(0, |next| next - total_xp),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cutoff_on_both_sides() {
        for (index, &floor) in LEVEL_THRESHOLDS.iter().enumerate() {
            let level = index as i64 + 1;
            assert_eq!(level_for_xp(floor), level, "at {floor} XP");
            if floor > 0 {
                assert_eq!(level_for_xp(floor - 1), level - 1, "at {} XP", floor - 1);
            }
        }
    }

    #[test]
    fn named_cutoffs() {
        let cases = [
            (0, 1),
            (59, 1),
            (60, 2),
            (119, 2),
            (120, 3),
            (29_999, 24),
            (30_000, 25),
            (30_001, 25),
            (1_000_000, 25),
            (-5, 1),
        ];
        for (xp, level) in cases {
            assert_eq!(level_for_xp(xp), level, "at {xp} XP");
        }
    }

    #[test]
    fn floors_and_next_levels() {
        // (total_xp, level, floor, next, to_next)
        let cases = [
            (0, 1, 0, Some(60), 60),
            (59, 1, 0, Some(60), 1),
            (60, 2, 60, Some(120), 60),
            (449, 5, 300, Some(450), 1),
            (450, 6, 450, Some(750), 300),
            (25_999, 23, 22_500, Some(26_000), 1),
            (29_999, 24, 26_000, Some(30_000), 1),
            (30_000, 25, 30_000, None, 0),
            (45_000, 25, 30_000, None, 0),
        ];
        for (xp, level, floor, next, to_next) in cases {
            let expected = LevelProgress {
                level,
                level_floor_xp: floor,
                next_level_xp: next,
                xp_to_next_level: to_next,
            };
            assert_eq!(level_progress(xp), expected, "at {xp} XP");
        }
    }

    #[test]
    fn floor_and_next_of_every_level() {
        for level in 1..=MAX_LEVEL {
            let floor = level_floor_xp(level);
            assert_eq!(level_for_xp(floor), level);
            match next_level_xp(level) {
                Some(next) => {
                    assert_eq!(level_for_xp(next), level + 1);
                    assert_eq!(level_for_xp(next - 1), level);
                }
                None => assert_eq!(level, MAX_LEVEL),
            }
        }
    }
}
