//! Study streaks: runs of consecutive UTC days with at least one session.

use chrono::NaiveDate;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Streaks {
    /// The run ending today or yesterday (a learner who has not studied yet today keeps it).
    pub current_days: i64,
    pub longest_days: i64,
}

/// `days` are the UTC dates with a session, in any order, duplicates allowed.
pub fn streaks(days: &[NaiveDate], today: NaiveDate) -> Streaks {
    let mut days = days.to_vec();
    days.sort_unstable();
    days.dedup();

    let mut longest = 0;
    let mut run = 0;
    let mut previous: Option<NaiveDate> = None;
    for &day in &days {
        run = match previous {
            Some(prev) if prev.succ_opt() == Some(day) => run + 1,
            _ => 1,
        };
        longest = longest.max(run);
        previous = Some(day);
    }

    // `run` is now the run that ends on the latest day; it is current if that day is today or
    // yesterday, or tomorrow: `studied_at` may lie 60 s ahead of the service's clock, so a
    // session sent just before midnight can count on the next UTC day.
    let current = match previous {
        Some(last) if last >= today || last.succ_opt() == Some(today) => run,
        _ => 0,
    };
    Streaks {
        current_days: current,
        longest_days: longest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(day: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 3, day).expect("valid date")
    }

    #[test]
    fn streak_table() {
        let today = d(20);
        // (days with sessions, current, longest)
        let cases: Vec<(Vec<NaiveDate>, i64, i64)> = vec![
            (vec![], 0, 0),
            (vec![d(20)], 1, 1),                                    // today only
            (vec![d(19)], 1, 1),                                    // yesterday keeps it
            (vec![d(18)], 0, 1),                                    // two days ago: broken
            (vec![d(18), d(19), d(20)], 3, 3),                      // three days up to today
            (vec![d(17), d(18), d(19)], 3, 3),                      // up to yesterday
            (vec![d(10), d(11), d(12), d(13), d(19), d(20)], 2, 4), // gap; longest in the past
            (vec![d(20), d(20), d(20), d(19), d(19)], 2, 2),        // several sessions a day
            (vec![d(1), d(3), d(5), d(20)], 1, 1),                  // isolated days
            (vec![d(15), d(16), d(18), d(19), d(20)], 3, 3),        // one-day gap breaks the run
            (vec![d(19), d(20), d(21)], 3, 3), // a session 60 s ahead, past midnight
            (vec![d(21)], 1, 1),               // ... even as the only one
        ];
        for (days, current, longest) in cases {
            assert_eq!(
                streaks(&days, today),
                Streaks {
                    current_days: current,
                    longest_days: longest
                },
                "days {days:?}"
            );
        }
    }

    #[test]
    fn streak_across_month_and_year_ends() {
        let days = [
            NaiveDate::from_ymd_opt(2025, 12, 30).expect("date"),
            NaiveDate::from_ymd_opt(2025, 12, 31).expect("date"),
            NaiveDate::from_ymd_opt(2026, 1, 1).expect("date"),
        ];
        let today = NaiveDate::from_ymd_opt(2026, 1, 2).expect("date");
        assert_eq!(
            streaks(&days, today),
            Streaks {
                current_days: 3,
                longest_days: 3
            }
        );
    }
}
