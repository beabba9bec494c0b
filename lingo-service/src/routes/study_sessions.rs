//! `POST /v1/lingo/me/study-sessions` and the caller's session list and single session.

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared_auth::{FieldError, Page, PageQuery, Problem, Query, RequiredCaller};
use sqlx::{FromRow, PgConnection, PgPool};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::domain::level::level_for_xp;
use crate::domain::xp::session_xp;
use crate::idempotency::{self, Begin};
use crate::openapi::{PROBLEM, ProblemDocument};
use crate::routes::{PREFIX, languages};
use crate::{AppState, Result};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/me/study-sessions", get(list).post(create))
        .route("/me/study-sessions/{id}", get(show))
}

pub const MAX_DURATION_SECONDS: i64 = 86_400;
pub const MAX_PHRASES_SEEN: i64 = 10_000;

/// A finished study session of the caller.
// Wide integer types so that out-of-range numbers reach [`validate`] and get a precise message
// instead of a type error.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "duration_seconds": 600, "phrases_seen": 12, "phrases_correct": 10, "language_code": "es"
}))]
pub struct StudySessionInput {
    /// Length of the session in seconds.
    #[schema(minimum = 1, maximum = 86400)]
    pub duration_seconds: i64,
    #[schema(minimum = 0, maximum = 10000)]
    pub phrases_seen: i64,
    /// At most `phrases_seen` (422 `validation_failed` otherwise).
    #[schema(minimum = 0, maximum = 10000)]
    pub phrases_correct: i64,
    /// A `code` of `GET /v1/lingo/languages` (422 `unknown_language` otherwise).
    #[schema(example = "es")]
    pub language_code: String,
}

/// The range rules of API.md, every bad field reported at once.
pub fn validate(input: &StudySessionInput) -> std::result::Result<(), Problem> {
    let mut errors = Vec::new();
    if !(1..=MAX_DURATION_SECONDS).contains(&input.duration_seconds) {
        errors.push(FieldError::new(
            "duration_seconds",
            format!("must be between 1 and {MAX_DURATION_SECONDS}"),
        ));
    }
    if !(0..=MAX_PHRASES_SEEN).contains(&input.phrases_seen) {
        errors.push(FieldError::new(
            "phrases_seen",
            format!("must be between 0 and {MAX_PHRASES_SEEN}"),
        ));
    }
    if input.phrases_correct < 0 {
        errors.push(FieldError::new("phrases_correct", "must be >= 0"));
    } else if input.phrases_correct > input.phrases_seen {
        errors.push(FieldError::new(
            "phrases_correct",
            "must be <= phrases_seen",
        ));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Problem::validation(errors))
    }
}

#[derive(Debug, Clone, Serialize, FromRow, ToSchema)]
#[schema(example = json!({
    "id": "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "language_code": "es",
    "duration_seconds": 600, "phrases_seen": 12, "phrases_correct": 10, "xp_awarded": 20,
    "created_at": "2026-11-21T09:30:00Z"
}))]
pub struct StudySession {
    /// UUIDv7 made by the service.
    pub id: Uuid,
    pub language_code: String,
    #[schema(minimum = 1, maximum = 86400)]
    pub duration_seconds: i32,
    #[schema(minimum = 0, maximum = 10000)]
    pub phrases_seen: i32,
    #[schema(minimum = 0, maximum = 10000)]
    pub phrases_correct: i32,
    /// 0 when nothing was seen, else `10 + phrases_correct` (+5 for a perfect session of 5 or more).
    #[schema(minimum = 0)]
    pub xp_awarded: i32,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
}

const SESSION_COLUMNS: &str =
    "id, language_code, duration_seconds, phrases_seen, phrases_correct, xp_awarded, created_at";

/// The new session with the learner's totals after it.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "id": "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "language_code": "es",
    "duration_seconds": 600, "phrases_seen": 12, "phrases_correct": 10, "xp_awarded": 20,
    "created_at": "2026-11-21T09:30:00Z", "total_xp": 71, "level": 2, "leveled_up": true
}))]
pub struct StudySessionCreated {
    #[serde(flatten)]
    pub session: StudySession,
    /// The learner's XP over all languages, this session included.
    #[schema(minimum = 0)]
    pub total_xp: i64,
    #[schema(minimum = 1, maximum = 25)]
    pub level: i64,
    /// Whether this session raised the learner's level.
    pub leveled_up: bool,
}

pub fn location(id: Uuid) -> String {
    format!("{PREFIX}/me/study-sessions/{id}")
}

/// Records a study session of the caller and awards its XP.
#[utoipa::path(
    post,
    path = "/v1/lingo/me/study-sessions",
    operation_id = "lingo_create_study_session",
    tag = "lingo",
    params(
        ("Idempotency-Key" = Option<String>, Header,
         description = "1 to 255 visible ASCII characters, scoped to the caller and kept 24 h. \
                        A repeat with the same body replays the first answer (with \
                        `Idempotency-Replayed: true`) and changes nothing.",
         nullable = false, min_length = 1, max_length = 255, pattern = r"^[\x21-\x7E]+$"),
    ),
    request_body(content = StudySessionInput, content_type = "application/json", description = "All fields required; any other field is refused"),
    security(("bearer" = [])),
    responses(
        (status = 201, description = "Recorded (or, with `Idempotency-Replayed: true`, the replay of the first answer)",
         body = StudySessionCreated,
         headers(
             ("Location" = String, description = "`/v1/lingo/me/study-sessions/{id}` of the new session"),
             ("Idempotency-Replayed" = String, description = "`true` when this is a replay of an earlier answer to the same `Idempotency-Key`; absent otherwise"),
         )),
        (status = 400, description = "`malformed_json`: the body is not JSON; `invalid_idempotency_key`: the `Idempotency-Key` header is malformed or repeated", body = ProblemDocument, content_type = PROBLEM),
        (status = 409, description = "`idempotency_key_in_use`: a request with this `Idempotency-Key` is still running; retry later", body = ProblemDocument, content_type = PROBLEM),
        (status = 413, description = "`payload_too_large`: the body exceeds 16 KiB", body = ProblemDocument, content_type = PROBLEM),
        (status = 415, description = "`unsupported_media_type`: the body is not `application/json`", body = ProblemDocument, content_type = PROBLEM),
        (status = 422, description = "`validation_failed` (a field is missing, of the wrong type, unknown or out of range; see `errors`), `unknown_language`, or `idempotency_key_reused` (the key was used with another body)", body = ProblemDocument, content_type = PROBLEM),
    )
)]
async fn create(
    RequiredCaller(caller): RequiredCaller,
    State(db): State<PgPool>,
    headers: HeaderMap,
    shared_auth::Json(input): shared_auth::Json<StudySessionInput>,
) -> Result<Response> {
    let key = idempotency::key_from_headers(&headers)?;
    validate(&input)?;
    let request_hash = idempotency::request_hash(&input);

    let mut tx = db.begin().await?;
    if let Some(key) = &key
        && let Begin::Replay(stored) =
            idempotency::begin(&mut tx, &caller.sub, key, &request_hash).await?
    {
        return Ok(stored.into_response());
    }
    if !languages::exists(&mut *tx, &input.language_code).await? {
        return Err(Problem::unprocessable(
            "unknown_language",
            "language_code",
            "is not a language of GET /v1/lingo/languages",
        )
        .into());
    }
    let created = record_session(&mut tx, &caller.sub, &input).await?;
    let location = location(created.session.id);
    let body = serde_json::to_vec(&created).map_err(anyhow::Error::from)?;
    if let Some(key) = &key {
        idempotency::complete(
            &mut tx,
            &caller.sub,
            key,
            &request_hash,
            StatusCode::CREATED,
            &body,
            Some(&location),
        )
        .await?;
    }
    tx.commit().await?;

    let mut response = (StatusCode::CREATED, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Ok(value) = HeaderValue::from_str(&location) {
        headers.insert(header::LOCATION, value);
    }
    Ok(response)
}

/// Writes the session and the learner's totals. The learner row is upserted first: its row lock
/// serialises this learner's concurrent writes, so none is lost and `total_xp` before and after
/// this session are exact.
async fn record_session(
    tx: &mut PgConnection,
    learner_id: &str,
    input: &StudySessionInput,
) -> Result<StudySessionCreated> {
    let xp = session_xp(input.phrases_seen, input.phrases_correct);
    let total_xp: i64 = sqlx::query_scalar(
        "INSERT INTO learners AS l (learner_id, total_xp, sessions, updated_at) \
         VALUES ($1, $2, 1, clock_timestamp()) \
         ON CONFLICT (learner_id) DO UPDATE SET \
           total_xp = l.total_xp + EXCLUDED.total_xp, \
           sessions = l.sessions + 1, \
           updated_at = EXCLUDED.updated_at \
         RETURNING total_xp",
    )
    .bind(learner_id)
    .bind(xp)
    .fetch_one(&mut *tx)
    .await?;

    let session = sqlx::query_as::<_, StudySession>(&format!(
        "INSERT INTO study_sessions \
           (id, learner_id, language_code, duration_seconds, phrases_seen, phrases_correct, \
            xp_awarded, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, clock_timestamp()) \
         RETURNING {SESSION_COLUMNS}"
    ))
    .bind(Uuid::now_v7())
    .bind(learner_id)
    .bind(&input.language_code)
    .bind(input.duration_seconds as i32)
    .bind(input.phrases_seen as i32)
    .bind(input.phrases_correct as i32)
    .bind(xp as i32)
    .fetch_one(&mut *tx)
    .await?;

    sqlx::query(
        "INSERT INTO learner_language_totals AS t \
           (learner_id, language_code, sessions, total_duration_seconds, phrases_seen, \
            phrases_correct, xp, first_studied_at, last_studied_at, updated_at) \
         VALUES ($1, $2, 1, $3, $4, $5, $6, $7, $7, $7) \
         ON CONFLICT (learner_id, language_code) DO UPDATE SET \
           sessions = t.sessions + 1, \
           total_duration_seconds = t.total_duration_seconds + EXCLUDED.total_duration_seconds, \
           phrases_seen = t.phrases_seen + EXCLUDED.phrases_seen, \
           phrases_correct = t.phrases_correct + EXCLUDED.phrases_correct, \
           xp = t.xp + EXCLUDED.xp, \
           first_studied_at = LEAST(t.first_studied_at, EXCLUDED.first_studied_at), \
           last_studied_at = GREATEST(t.last_studied_at, EXCLUDED.last_studied_at), \
           updated_at = GREATEST(t.updated_at, EXCLUDED.updated_at)",
    )
    .bind(learner_id)
    .bind(&input.language_code)
    .bind(input.duration_seconds)
    .bind(input.phrases_seen)
    .bind(input.phrases_correct)
    .bind(xp)
    .bind(session.created_at)
    .execute(&mut *tx)
    .await?;

    let level = level_for_xp(total_xp);
    Ok(StudySessionCreated {
        session,
        total_xp,
        level,
        leveled_up: level > level_for_xp(total_xp - xp),
    })
}

/// The caller's study sessions, newest first.
#[utoipa::path(
    get,
    path = "/v1/lingo/me/study-sessions",
    operation_id = "lingo_list_my_study_sessions",
    tag = "lingo",
    params(PageQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "One page of the caller's sessions, newest first", body = Page<StudySession>),
        (status = 400, description = "`invalid_query`: `limit` or `offset` is not an integer or out of range", body = ProblemDocument, content_type = PROBLEM),
    )
)]
async fn list(
    RequiredCaller(caller): RequiredCaller,
    State(db): State<PgPool>,
    Query(query): Query<PageQuery>,
) -> Result<Json<Page<StudySession>>> {
    let paging = query.paging()?;
    let rows = sqlx::query_as::<_, StudySession>(&format!(
        "SELECT {SESSION_COLUMNS} FROM study_sessions WHERE learner_id = $1 \
         ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3"
    ))
    .bind(&caller.sub)
    .bind(paging.fetch_limit())
    .bind(paging.offset)
    .fetch_all(&db)
    .await?;
    Ok(Json(Page::from_rows(rows, paging)))
}

/// One study session of the caller.
#[utoipa::path(
    get,
    path = "/v1/lingo/me/study-sessions/{id}",
    operation_id = "lingo_get_my_study_session",
    tag = "lingo",
    params(("id" = String, Path, description = "The session's id, as in `Location` of `POST /v1/lingo/me/study-sessions`", example = "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b")),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The session", body = StudySession),
        (status = 404, description = "`study_session_not_found`: no session with this id, or it is another learner's", body = ProblemDocument, content_type = PROBLEM),
    )
)]
async fn show(
    RequiredCaller(caller): RequiredCaller,
    State(db): State<PgPool>,
    id: std::result::Result<Path<String>, PathRejection>,
) -> Result<Json<StudySession>> {
    let not_found = || {
        Problem::not_found("study_session_not_found").with_detail("no study session with this id")
    };
    // Ids are opaque to clients: one that is not even a UUID (or not UTF-8) is simply not found.
    let id = id
        .ok()
        .and_then(|Path(id)| Uuid::parse_str(&id).ok())
        .ok_or_else(not_found)?;
    let session = sqlx::query_as::<_, StudySession>(&format!(
        "SELECT {SESSION_COLUMNS} FROM study_sessions WHERE id = $1 AND learner_id = $2"
    ))
    .bind(id)
    .bind(&caller.sub)
    .fetch_optional(&db)
    .await?
    .ok_or_else(not_found)?;
    Ok(Json(session))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(duration: i64, seen: i64, correct: i64) -> StudySessionInput {
        StudySessionInput {
            duration_seconds: duration,
            phrases_seen: seen,
            phrases_correct: correct,
            language_code: "es".into(),
        }
    }

    #[test]
    fn validation_table() {
        // (duration, seen, correct, fields in error)
        let cases: &[(i64, i64, i64, &[&str])] = &[
            (1, 0, 0, &[]),
            (86_400, 10_000, 10_000, &[]),
            (0, 0, 0, &["duration_seconds"]),
            (86_401, 0, 0, &["duration_seconds"]),
            (-1, 0, 0, &["duration_seconds"]),
            (60, -1, 0, &["phrases_seen", "phrases_correct"]),
            (60, 10_001, 0, &["phrases_seen"]),
            (60, 5, 6, &["phrases_correct"]),
            (60, 5, -1, &["phrases_correct"]),
            (
                0,
                10_001,
                10_002,
                &["duration_seconds", "phrases_seen", "phrases_correct"],
            ),
        ];
        for (duration, seen, correct, fields) in cases {
            let got: Vec<String> = match validate(&input(*duration, *seen, *correct)) {
                Ok(()) => vec![],
                Err(problem) => {
                    assert_eq!(problem.code, "validation_failed");
                    problem.errors.into_iter().map(|e| e.field).collect()
                }
            };
            assert_eq!(got, *fields, "input {duration}/{seen}/{correct}");
        }
    }
}
