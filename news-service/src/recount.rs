//! `news-service recount`: recomputes every engagement counter (likes, bookmarks, comments,
//! journalist and organisation followers) from the rows and reports the drift it fixed.
//!
//! The work is the schema's `recount_engagement()` (migration `engagement_counters`): per counter,
//! one statement compares the rows with the counters under one snapshot and adds the difference,
//! so it is safe alongside live writes and takes no table lock. It runs as the pipeline role
//! (granted EXECUTE) or the owner; the runtime role may not call it.

use std::fmt;

use crate::db;

/// The drift fixed in one counter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterDrift {
    /// `like_count`, `bookmark_count`, `comment_count`, `journalist follower_count` or
    /// `organization follower_count`.
    pub counter: String,
    /// Targets whose count differed from their rows.
    pub targets_fixed: i64,
    /// The sum over those targets of |rows - count|.
    pub rows_drifted: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecountSummary {
    pub counters: Vec<CounterDrift>,
}

impl RecountSummary {
    /// The drift fixed over every counter; 0 when the counters were already exact.
    pub fn total_drift(&self) -> i64 {
        self.counters.iter().map(|c| c.rows_drifted).sum()
    }
}

impl fmt::Display for RecountSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in &self.counters {
            writeln!(
                f,
                "{:<28} drift {} rows over {} targets",
                format!("{}:", c.counter),
                c.rows_drifted,
                c.targets_fixed
            )?;
        }
        write!(f, "total drift fixed: {}", self.total_drift())
    }
}

/// Recounts every counter as the role of `database_url` (news_pipeline or news_owner).
pub async fn recount(database_url: &str) -> anyhow::Result<RecountSummary> {
    let pool = db::connect(database_url, 1, "news-service-recount").await?;
    let counters = sqlx::query_as!(
        CounterDrift,
        r#"SELECT counter AS "counter!", targets_fixed AS "targets_fixed!", rows_drifted AS "rows_drifted!"
           FROM recount_engagement()"#
    )
    .fetch_all(&pool)
    .await?;
    pool.close().await;
    Ok(RecountSummary { counters })
}
