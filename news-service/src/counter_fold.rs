//! The background folder of counter slots: every `NEWS_COUNTER_FOLD_INTERVAL_MS` it sweeps the
//! three counter tables and folds each target's extra slot rows back into one row, so a hot
//! article is read from one row per counter table again (the triggers spread it over up to 16
//! while writers compete; see migration `fold_counter_slots`).
//!
//! Work is bounded: a pass lists at most [`BATCH`] targets that have something to fold (a
//! partial index holds exactly those), and each target is folded in its own short transaction,
//! so the folder never holds more than one target's rows and never waits on a writer for more
//! than the function's 100 ms lock_timeout. A sweep walks each table once in id order, so it
//! ends however busy writers keep a hot target. Every replica runs one; they do not conflict
//! (the second to reach a target finds it folded).

use std::fmt;
use std::time::Duration;

use sqlx::PgPool;

use crate::store::counters::{self, CounterTable, Fold};

/// Targets listed per pass.
pub const BATCH: i64 = 100;

/// What one sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepSummary {
    /// Targets visited (each had a row outside slot 0 when its pass listed it).
    pub targets: u64,
    /// Slot rows folded into slot 0.
    pub slots_folded: u64,
    /// Targets left for a later sweep because slot 0 stayed locked.
    pub busy: u64,
}

impl fmt::Display for SweepSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} slot rows folded over {} targets ({} busy)",
            self.slots_folded, self.targets, self.busy
        )
    }
}

/// One sweep over every counter table.
pub async fn sweep(db: &PgPool) -> sqlx::Result<SweepSummary> {
    let mut summary = SweepSummary::default();
    for table in CounterTable::ALL {
        sweep_table(db, table, &mut summary).await?;
    }
    Ok(summary)
}

async fn sweep_table(
    db: &PgPool,
    table: CounterTable,
    summary: &mut SweepSummary,
) -> sqlx::Result<()> {
    let mut after = String::new();
    loop {
        let targets = counters::targets_to_fold(db, table, &after, BATCH).await?;
        for target in &targets {
            summary.targets += 1;
            match counters::fold(db, table, target).await? {
                Fold::Folded(slots) => summary.slots_folded += u64::try_from(slots).unwrap_or(0),
                Fold::Busy => summary.busy += 1,
            }
        }
        match targets.last() {
            Some(last) if targets.len() as i64 == BATCH => after.clone_from(last),
            _ => return Ok(()),
        }
    }
}

/// Sweeps every `every` until the task is aborted; a failed sweep (database down) is logged
/// and the next one tries again.
pub async fn fold_task(db: PgPool, every: Duration) {
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        match sweep(&db).await {
            Ok(summary) if summary.slots_folded == 0 && summary.busy == 0 => {}
            Ok(summary) => tracing::debug!(
                targets = summary.targets,
                slots_folded = summary.slots_folded,
                busy = summary.busy,
                "counter slots folded"
            ),
            Err(error) => tracing::warn!(%error, "folding counter slots failed"),
        }
    }
}
