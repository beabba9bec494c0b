//! The analytics export of phrase states: one page in keyset order of the rows changed since a
//! time ([`export_page`]).

use chrono::{DateTime, Utc};
use shared_auth::pg::push_opaque;
use sqlx::{FromRow, PgExecutor, Postgres, QueryBuilder};

use super::rows::StateRow;
use crate::domain::phrase_progress::{ExportCursor, PhraseProgressRow};
use crate::error::Result;

/// One page of the phrase-progress export in keyset order `(updated_at, learner_id,
/// phrase_id)`: rows changed at or after `since` and before `horizon` (see
/// [`crate::store::progress::export_horizon`]), after `cursor`; `limit` rows.
pub async fn export_page<'e>(
    db: impl PgExecutor<'e>,
    since: Option<DateTime<Utc>>,
    horizon: DateTime<Utc>,
    cursor: Option<&ExportCursor>,
    limit: i64,
) -> Result<Vec<PhraseProgressRow>> {
    #[derive(FromRow)]
    struct Row {
        learner_id: String,
        language_code: String,
        updated_at: DateTime<Utc>,
        #[sqlx(flatten)]
        state: StateRow,
    }
    let mut sql = QueryBuilder::<Postgres>::new(
        "SELECT learner_id, phrase_id, language_code, stability, difficulty, due_at, reviews, \
           correct, lapses, first_reviewed_at, last_reviewed_at, last_grade, updated_at \
         FROM phrase_states WHERE updated_at < ",
    );
    // Every value hidden: with visible ones the first page and every page after a cursor were
    // planned at every request (0.063 ms of planning for 0.044 of execution).
    push_opaque(&mut sql, horizon);
    if let Some(since) = since {
        sql.push(" AND updated_at >= ");
        push_opaque(&mut sql, since);
    }
    if let Some(cursor) = cursor {
        sql.push(" AND (updated_at, learner_id, phrase_id) > (");
        push_opaque(&mut sql, cursor.updated_at());
        sql.push(", ");
        push_opaque(&mut sql, cursor.learner_id.clone());
        sql.push(", ");
        push_opaque(&mut sql, cursor.phrase_id.clone());
        sql.push(")");
    }
    sql.push(" ORDER BY updated_at, learner_id, phrase_id LIMIT ");
    push_opaque(&mut sql, limit);
    let rows = sql.build_query_as::<Row>().fetch_all(db).await?;
    rows.into_iter()
        .map(|row| {
            let state = row.state.state()?;
            Ok(PhraseProgressRow {
                learner_id: row.learner_id,
                phrase_id: row.state.phrase_id,
                language_code: row.language_code,
                reviews: state.reviews,
                correct: state.correct,
                lapses: state.lapses,
                last_reviewed_at: state.last_reviewed_at,
                last_grade: state.last_grade,
                stability_days: f64::from(state.stability),
                difficulty: f64::from(state.difficulty),
                due_at: state.due_at,
                updated_at: row.updated_at,
            })
        })
        .collect()
}
