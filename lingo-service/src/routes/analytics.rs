//! `GET /v1/lingo/analytics/progress`: every learner's per-language progress for analytics tools
//! (scope `lingo:analytics`), paged with an opaque keyset cursor over
//! `(updated_at, learner_id, language_code)` so that late pages cost what the first one does.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared_auth::{Paging, Problem, Query, RequiredCaller};
use sqlx::{PgPool, Postgres, QueryBuilder};
use utoipa::{IntoParams, ToSchema};

use crate::db::is_storable;
use crate::openapi::{PROBLEM, ProblemDocument};
use crate::routes::progress::{LanguageProgress, TOTALS_COLUMNS, TotalsRow};
use crate::{AppState, Result};

pub const SCOPE: &str = "lingo:analytics";

pub fn router() -> Router<AppState> {
    Router::new().route("/analytics/progress", get(export))
}

/// Position after the last row of a page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    /// `updated_at` in microseconds since the epoch (Postgres precision, so no row is skipped).
    #[serde(rename = "u")]
    pub updated_at_micros: i64,
    #[serde(rename = "l")]
    pub learner_id: String,
    #[serde(rename = "c")]
    pub language_code: String,
}

impl Cursor {
    pub fn after(row: &TotalsRow) -> Self {
        Self {
            updated_at_micros: row.updated_at.timestamp_micros(),
            learner_id: row.learner_id.clone(),
            language_code: row.language_code.clone(),
        }
    }

    /// base64url (no padding) of a small JSON object: opaque to clients, easy to debug.
    pub fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(self).unwrap_or_default())
    }

    pub fn decode(text: &str) -> Option<Self> {
        let bytes = URL_SAFE_NO_PAD.decode(text).ok()?;
        let cursor: Self = serde_json::from_slice(&bytes).ok()?;
        let storable = is_storable(&cursor.learner_id) && is_storable(&cursor.language_code);
        (storable && cursor.updated_at().is_some()).then_some(cursor)
    }

    pub fn updated_at(&self) -> Option<DateTime<Utc>> {
        DateTime::from_timestamp_micros(self.updated_at_micros)
    }
}

/// One learner's counters in one language.
#[derive(Debug, Serialize, ToSchema)]
pub struct LearnerProgress {
    pub learner_id: String,
    #[serde(flatten)]
    pub progress: LanguageProgress,
    /// Last change of these counters.
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "data": [{
        "learner_id": "demo-learner", "language_code": "es", "sessions": 3,
        "total_duration_seconds": 1800, "phrases_seen": 40, "phrases_correct": 31,
        "accuracy": 0.775, "xp": 71, "first_studied_at": "2026-11-19T08:00:00Z",
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
    pub next_cursor: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ExportQuery {
    /// Only rows changed at or after this instant (RFC 3339).
    #[param(format = DateTime, example = "2026-11-01T00:00:00Z")]
    updated_since: Option<String>,
    /// The `next_cursor` of the previous page (opaque); anything else is 400 `invalid_cursor`.
    #[param(min_length = 1)]
    cursor: Option<String>,
    /// Page size.
    #[param(minimum = 1, maximum = 100, default = 20)]
    limit: Option<i64>,
}

fn invalid_cursor() -> Problem {
    Problem::new(StatusCode::BAD_REQUEST, "invalid_cursor")
        .with_detail("cursor is not a next_cursor of this endpoint")
}

/// Every learner's per-language progress, for analytics tools (scope `lingo:analytics`).
#[utoipa::path(
    get,
    path = "/v1/lingo/analytics/progress",
    operation_id = "lingo_export_progress",
    tag = "lingo-analytics",
    params(ExportQuery),
    security(("bearer" = ["lingo:analytics"])),
    responses(
        (status = 200, description = "One page of learner progress rows, keyset-paged by `next_cursor`", body = Export),
        (status = 400, description = "`invalid_query`: `limit` or `updated_since` is malformed or out of range; `invalid_cursor`: `cursor` is not a `next_cursor` of this endpoint", body = ProblemDocument, content_type = PROBLEM),
        (status = 403, description = "`insufficient_scope`: the token lacks the `lingo:analytics` scope", body = ProblemDocument, content_type = PROBLEM,
         headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"lingo-news\", error=\"insufficient_scope\", scope=\"lingo:analytics\"`"))),
    )
)]
async fn export(
    RequiredCaller(caller): RequiredCaller,
    State(db): State<PgPool>,
    Query(query): Query<ExportQuery>,
) -> Result<Json<Export>> {
    caller.require_scope(SCOPE)?;
    let paging = Paging::new(query.limit, None)?;
    let since = query
        .updated_since
        .as_deref()
        .map(|text| {
            DateTime::parse_from_rfc3339(text)
                .map(|at| at.with_timezone(&Utc))
                .map_err(|_| Problem::invalid_query("updated_since must be an RFC 3339 timestamp"))
        })
        .transpose()?;
    let cursor = query
        .cursor
        .as_deref()
        .map(|text| Cursor::decode(text).ok_or_else(invalid_cursor))
        .transpose()?;

    let mut sql = QueryBuilder::<Postgres>::new(format!(
        "SELECT {TOTALS_COLUMNS} FROM learner_language_totals WHERE TRUE"
    ));
    if let Some(since) = since {
        sql.push(" AND updated_at >= ").push_bind(since);
    }
    if let Some(cursor) = &cursor {
        sql.push(" AND (updated_at, learner_id, language_code) > (")
            .push_bind(cursor.updated_at())
            .push(", ")
            .push_bind(cursor.learner_id.clone())
            .push(", ")
            .push_bind(cursor.language_code.clone())
            .push(")");
    }
    sql.push(" ORDER BY updated_at, learner_id, language_code LIMIT ")
        .push_bind(paging.fetch_limit());
    let mut rows = sql.build_query_as::<TotalsRow>().fetch_all(&db).await?;

    let has_more = rows.len() as i64 > paging.limit;
    rows.truncate(paging.limit as usize);
    let next_cursor = if has_more {
        rows.last().map(|row| Cursor::after(row).encode())
    } else {
        None
    };
    let data: Vec<LearnerProgress> = rows
        .into_iter()
        .map(|row| LearnerProgress {
            learner_id: row.learner_id.clone(),
            updated_at: row.updated_at,
            progress: LanguageProgress::from(row),
        })
        .collect();
    Ok(Json(Export {
        count: data.len(),
        data,
        next_cursor,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_round_trip() {
        let cursor = Cursor {
            updated_at_micros: 1_790_000_000_123_456,
            learner_id: "learner/ü 1".into(),
            language_code: "es".into(),
        };
        let text = cursor.encode();
        assert!(
            text.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        );
        assert_eq!(Cursor::decode(&text), Some(cursor));
    }

    #[test]
    fn bad_cursors_do_not_decode() {
        let not_json = URL_SAFE_NO_PAD.encode(b"hello");
        let wrong_shape = URL_SAFE_NO_PAD.encode(br#"{"u":"x","l":"a","c":"es"}"#);
        let out_of_range = URL_SAFE_NO_PAD.encode(br#"{"u":9223372036854775807,"l":"a","c":"es"}"#);
        let nul = URL_SAFE_NO_PAD.encode(br#"{"u":0,"l":"a\u0000b","c":"es"}"#);
        for text in [
            "",
            "!!!",
            "abc=",
            not_json.as_str(),
            wrong_shape.as_str(),
            out_of_range.as_str(),
            nul.as_str(),
        ] {
            assert_eq!(Cursor::decode(text), None, "{text:?}");
        }
    }
}
