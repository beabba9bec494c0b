//! `GET /v1/lingo/analytics/progress`: every learner's per-language progress for analytics tools
//! (scope `lingo:analytics`), paged with an opaque keyset cursor over
//! `(updated_at, learner_id, language_code)` so that late pages cost what the first one does.

use axum::Json;
use axum::extract::State;
use std::result::Result as StdResult;

use chrono::{DateTime, SubsecRound, TimeDelta, Utc};
use serde::{Deserialize, Serialize};
use shared_auth::http::paging::next_cursor;
use shared_auth::{Paging, Problem, Query, RequiredCaller};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::cursor::{Cursor, DifferentFilter};
use crate::domain::cursor_only;
use crate::domain::phrase_progress::{ExportCursor, PhraseProgressRow};
use crate::domain::progress::LearnerProgress;
use crate::error::{ErrorCode, Result};
use crate::problems::ExportProblems;
use crate::state::{AppState, Db};
use crate::store;

pub const SCOPE: &str = "lingo:analytics";

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(export))
        .routes(routes!(export_phrase_progress))
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "data": [{
        "learner_id": "demo-learner", "language_code": "es", "sessions": 3,
        "total_duration_seconds": 1800, "phrases_seen": 40, "phrases_correct": 31,
        "accuracy": 0.775, "xp": 71, "phrases_started": 18, "phrases_due": 4,
        "first_studied_at": "2026-11-19T08:00:00Z",
        "last_studied_at": "2026-11-21T09:30:00Z", "updated_at": "2026-11-21T09:30:00Z"
    }],
    "count": 1,
    "next_cursor": null
}))]
pub struct Export {
    /// Ordered by `(updated_at, learner_id, language_code)`.
    pub data: Vec<LearnerProgress>,
    /// Number of items in `data`.
    #[schema(minimum = 0)]
    pub count: usize,
    /// Pass as `cursor` to continue; null at the end.
    #[schema(required = true)]
    pub next_cursor: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ExportQuery {
    /// Only rows changed at or after this instant (RFC 3339, any offset), compared as written
    /// whatever the number of fraction digits (rows are stamped to the microsecond).
    #[param(format = DateTime, example = "2026-11-01T00:00:00Z")]
    updated_since: Option<String>,
    /// The `next_cursor` of the previous page (opaque); one that does not decode is 400
    /// `invalid_cursor`, and so is a cursor given with another `updated_since` than its first
    /// page's. An empty `cursor=` is the same as none.
    cursor: Option<String>,
    /// Page size.
    #[param(minimum = 1, maximum = 100, default = 20)]
    #[serde(default, deserialize_with = "shared_auth::http::paging::query_integer")]
    limit: Option<i64>,
    /// Not a parameter of this list (cursor paging only): given, it is 400 rather than ignored,
    /// so a client cannot believe it pages by offset.
    #[param(ignore)]
    offset: Option<String>,
}

/// Every learner's per-language progress, for analytics tools (scope `lingo:analytics`).
#[utoipa::path(
    get,
    path = "/analytics/progress",
    operation_id = "lingo_export_progress",
    tag = "lingo-analytics",
    params(ExportQuery),
    security(("bearer" = ["lingo:analytics"])),
    responses(
        (status = 200, description = "One page of learner progress rows, keyset-paged by `next_cursor`", body = Export),
        ExportProblems,
    )
)]
async fn export(
    RequiredCaller(caller): RequiredCaller,
    State(db): State<Db>,
    Query(query): Query<ExportQuery>,
) -> Result<Json<Export>> {
    caller.require_scope(SCOPE)?;
    let ExportRequest {
        paging,
        cursor,
        since,
    } = query.read(Cursor::decode, Cursor::since)?;

    // Two statements (the horizon must be read before the page's snapshot), one connection.
    let mut connection = db.primary.acquire().await?;
    let horizon = store::progress::export_horizon(&mut *connection).await?;
    let mut data = store::progress::export_page(
        &mut *connection,
        since,
        horizon,
        cursor.as_ref(),
        Utc::now(),
        paging.fetch_limit(),
    )
    .await?;
    let next_cursor = next_cursor(&mut data, paging, |row| {
        let language = &row.progress.language_code;
        Cursor::after(row.updated_at, &row.learner_id, language, since).encode()
    });
    Ok(Json(Export {
        count: data.len(),
        data,
        next_cursor,
    }))
}

/// What an export request asks for, read the same way for every export.
struct ExportRequest<C> {
    paging: Paging,
    cursor: Option<C>,
    /// The `updated_since` of the list: the request's, or the one its cursor was made with.
    since: Option<DateTime<Utc>>,
}

/// How an export cursor says which `updated_since` it continues.
type ContinuedSince<C> =
    fn(&C, Option<DateTime<Utc>>) -> StdResult<Option<DateTime<Utc>>, DifferentFilter>;

impl ExportQuery {
    /// The request's paging, cursor (`decode`d) and `updated_since`. A cursor continues its own
    /// list: with no `updated_since` it keeps the one it was made with, and another one is
    /// refused (`invalid_cursor`); an `offset` is refused, as these lists page by cursor only.
    fn read<C>(
        &self,
        decode: fn(&str) -> Option<C>,
        continued_since: ContinuedSince<C>,
    ) -> Result<ExportRequest<C>> {
        let paging = cursor_only::paging(self.limit, self.offset.is_some())?;
        let asked_since = self
            .updated_since
            .as_deref()
            .map(parse_timestamp)
            .transpose()?;
        let cursor = cursor_only::cursor(self.cursor.as_deref(), decode)?;
        let since = match &cursor {
            Some(cursor) => {
                continued_since(cursor, asked_since).map_err(|_| ErrorCode::InvalidCursor)?
            }
            None => asked_since,
        };
        Ok(ExportRequest {
            paging,
            cursor,
            since,
        })
    }
}

/// `updated_since` as the bound the tables are filtered with. Rows are stamped to the
/// microsecond, so a bound with more fraction digits is rounded up to the next microsecond when
/// any digit past the sixth is not 0: `updated_at >= bound` then holds exactly for the rows at or
/// after the instant as written. (Truncated, `.1234561Z` would also return a row stamped at
/// `.123456`, before it; chrono keeps nine digits and ignores the rest, so they are read here.)
fn parse_timestamp(text: &str) -> StdResult<DateTime<Utc>, Problem> {
    let at = DateTime::parse_from_rfc3339(text)
        .map(|at| at.with_timezone(&Utc))
        .map_err(|_| Problem::invalid_query("updated_since must be an RFC 3339 timestamp"))?;
    let whole_micros = at.trunc_subsecs(6);
    if !has_digits_past_micros(text) {
        return Ok(whole_micros);
    }
    whole_micros
        .checked_add_signed(TimeDelta::microseconds(1))
        .ok_or_else(|| Problem::invalid_query("updated_since is out of range"))
}

/// Whether the fraction of seconds of an RFC 3339 timestamp has a digit other than 0 past the
/// sixth (the only `.` of a timestamp starts that fraction).
fn has_digits_past_micros(text: &str) -> bool {
    let Some((_, fraction)) = text.split_once('.') else {
        return false;
    };
    fraction
        .bytes()
        .take_while(u8::is_ascii_digit)
        .skip(6)
        .any(|digit| digit != b'0')
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PhraseProgressExport {
    /// Ordered by `(updated_at, learner_id, phrase_id)`.
    pub data: Vec<PhraseProgressRow>,
    /// Number of items in `data`.
    #[schema(minimum = 0)]
    pub count: usize,
    /// Pass as `cursor` to continue; null at the end.
    #[schema(required = true)]
    pub next_cursor: Option<String>,
}

/// Every learner's phrase states, for analytics tools (scope `lingo:analytics`), copied
/// incrementally like `/analytics/progress`: keep the last `next_cursor`, or pass the latest
/// `updated_at` seen as `updated_since`.
#[utoipa::path(
    get,
    path = "/analytics/phrase-progress",
    operation_id = "lingo_export_phrase_progress",
    tag = "lingo-analytics",
    params(ExportQuery),
    security(("bearer" = ["lingo:analytics"])),
    responses(
        (status = 200, description = "One page of (learner, phrase) states, keyset-paged by `next_cursor`", body = PhraseProgressExport),
        ExportProblems,
    )
)]
async fn export_phrase_progress(
    RequiredCaller(caller): RequiredCaller,
    State(db): State<Db>,
    Query(query): Query<ExportQuery>,
) -> Result<Json<PhraseProgressExport>> {
    caller.require_scope(SCOPE)?;
    let ExportRequest {
        paging,
        cursor,
        since,
    } = query.read(ExportCursor::decode, ExportCursor::since)?;

    // The horizon first, in a statement of its own (see `export_horizon`).
    let mut connection = db.primary.acquire().await?;
    let horizon = store::progress::export_horizon(&mut *connection).await?;
    let mut data = store::phrase_progress::export_page(
        &mut *connection,
        since,
        horizon,
        cursor.as_ref(),
        paging.fetch_limit(),
    )
    .await?;
    let next_cursor = next_cursor(&mut data, paging, |row| {
        ExportCursor::after(row.updated_at, &row.learner_id, &row.phrase_id, since).encode()
    });
    Ok(Json(PhraseProgressExport {
        count: data.len(),
        data,
        next_cursor,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn micros(text: &str) -> i64 {
        parse_timestamp(text)
            .expect("a timestamp")
            .timestamp_micros()
    }

    #[test]
    fn a_bound_past_the_microsecond_is_rounded_up_never_down() {
        let at = micros("2026-11-21T09:30:00.123456Z");
        for (text, expected) in [
            ("2026-11-21T09:30:00.123456Z", at),
            ("2026-11-21T09:30:00.123456000000Z", at),
            ("2026-11-21T10:30:00.123456+01:00", at),
            ("2026-11-21T09:30:00.123456-00:00", at),
            ("2026-11-21T09:30:00.1234560001Z", at + 1),
            ("2026-11-21T09:30:00.123456001Z", at + 1),
            ("2026-11-21T09:30:00.1234569999999Z", at + 1),
            ("2026-11-21T09:30:00.123455999Z", at),
            ("2026-11-21T09:30:00.12345Z", at - 6),
            ("2026-11-21T09:30:00Z", at - 123_456),
        ] {
            assert_eq!(micros(text), expected, "{text}");
        }
    }
}
