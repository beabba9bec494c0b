//! The counter tables' upkeep: which targets have counter slots to fold back into one row, and
//! the fold of one target (the schema's `fold_counter_slots`, migration `fold_counter_slots`,
//! which keeps every count exact at every snapshot; see there for why it is safe alongside
//! writers and `recount`).

use sqlx::PgExecutor;

/// A counter table: one row per (target, slot), a count being the sum of its target's slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterTable {
    /// `article_stats`: likes, bookmarks and comments of an article.
    Articles,
    /// `journalist_stats`: followers of a journalist.
    Journalists,
    /// `organization_stats`: followers of an organisation.
    Organizations,
}

impl CounterTable {
    pub const ALL: [Self; 3] = [Self::Articles, Self::Journalists, Self::Organizations];

    /// The table's name, as `fold_counter_slots` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Articles => "article_stats",
            Self::Journalists => "journalist_stats",
            Self::Organizations => "organization_stats",
        }
    }
}

/// What folding one target did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fold {
    /// This many slot rows were folded into slot 0 (0: nothing to fold, or every extra slot is
    /// held by a writer right now).
    Folded(i32),
    /// Slot 0 (or an engagement table, during a TRUNCATE) stayed locked past the function's
    /// short lock_timeout; nothing changed, and a later pass tries again.
    Busy,
}

/// Up to `limit` targets of `table` with a row outside slot 0, in id order after `after` (""
/// for the first): the work of one pass, found through the partial index of those rows.
pub async fn targets_to_fold(
    db: impl PgExecutor<'_>,
    table: CounterTable,
    after: &str,
    limit: i64,
) -> sqlx::Result<Vec<String>> {
    match table {
        CounterTable::Articles => {
            sqlx::query_scalar!(
                r#"SELECT DISTINCT article_id AS "id!" FROM article_stats
                   WHERE slot <> 0 AND article_id > $1 ORDER BY 1 LIMIT $2"#,
                after,
                limit
            )
            .fetch_all(db)
            .await
        }
        CounterTable::Journalists => {
            sqlx::query_scalar!(
                r#"SELECT DISTINCT journalist_id AS "id!" FROM journalist_stats
                   WHERE slot <> 0 AND journalist_id > $1 ORDER BY 1 LIMIT $2"#,
                after,
                limit
            )
            .fetch_all(db)
            .await
        }
        CounterTable::Organizations => {
            sqlx::query_scalar!(
                r#"SELECT DISTINCT organization_id AS "id!" FROM organization_stats
                   WHERE slot <> 0 AND organization_id > $1 ORDER BY 1 LIMIT $2"#,
                after,
                limit
            )
            .fetch_all(db)
            .await
        }
    }
}

/// SQLSTATE of lock_timeout expiring (`lock_not_available`).
const LOCK_NOT_AVAILABLE: &str = "55P03";

/// Folds the slots of one target into slot 0, in its own short transaction (the function call).
pub async fn fold(
    db: impl PgExecutor<'_>,
    table: CounterTable,
    target: &str,
) -> sqlx::Result<Fold> {
    let outcome = sqlx::query_scalar!(
        r#"SELECT fold_counter_slots($1, $2) AS "folded!""#,
        table.name(),
        target
    )
    .fetch_one(db)
    .await;
    match outcome {
        Ok(folded) => Ok(Fold::Folded(folded)),
        Err(sqlx::Error::Database(error))
            if error.code().as_deref() == Some(LOCK_NOT_AVAILABLE) =>
        {
            Ok(Fold::Busy)
        }
        Err(error) => Err(error),
    }
}
