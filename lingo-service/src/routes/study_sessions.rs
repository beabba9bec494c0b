//! `POST /v1/lingo/me/study-sessions` and the caller's session list and single session.

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use chrono::Utc;
use shared_auth::http::path_id::{PathId, created_id};
use shared_auth::{Query, RequiredCaller};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::domain::cursor::{CursorPage, CursorPageQuery, ListCursor, StudySessionsCursor};
use crate::domain::study_session::{
    StudySession, StudySessionCreated, StudySessionInput, studied_at, validate,
};
use crate::domain::text::is_storable;
use crate::error::{ErrorCode, Result};
use crate::idempotency::{Created, idempotent_create, key_from_headers};
use crate::problems::{CreateStudySessionProblems, ListProblems, StudySessionProblems};
use crate::state::{AppState, Db};
use crate::store;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(show))
}

/// The new session's URL as clients call it (behind the gateway, paths are unchanged).
pub fn location(id: Uuid) -> String {
    format!("/v1/lingo/me/study-sessions/{id}")
}

/// Records a study session of the caller and awards its XP; its `answers`, if any, update the
/// caller's phrase progress.
///
/// One learner's sessions are applied one at a time (none is lost or counted twice), so many
/// large sessions of one learner sent at once wait for each other: one that waits past the
/// service's deadline answers 503 `timeout` and stores nothing; send it again with the same
/// `Idempotency-Key` and it is recorded once. A late session (`studied_at` before answers already
/// recorded) recomputes the phrases it touches from a checkpoint at most about three months old,
/// so its cost follows the learner's recent sessions, not their whole history.
#[utoipa::path(
    post,
    path = "/me/study-sessions",
    operation_id = "lingo_create_study_session",
    tag = "lingo",
    params(
        ("Idempotency-Key" = Option<String>, Header,
         description = "1 to 255 visible ASCII characters, scoped to the caller and kept 24 h. \
                        A repeat with the same body replays the first answer (with \
                        `Idempotency-Replayed: true`) and changes nothing.",
         nullable = false, min_length = 1, max_length = 255, pattern = r"^[\x21-\x7E]+$"),
    ),
    request_body(content = StudySessionInput, content_type = "application/json", description = "`answers` and `studied_at` are optional, every other field required; any other field is refused"),
    security(("bearer" = [])),
    responses(
        (status = 201, description = "Recorded (or, with `Idempotency-Replayed: true`, the replay of the first answer)",
         body = StudySessionCreated,
         headers(
             ("Location" = String, description = "`/v1/lingo/me/study-sessions/{id}` of the new session"),
             ("Idempotency-Replayed" = String, description = "`true` when this is a replay of an earlier answer to the same `Idempotency-Key`; absent otherwise"),
         )),
        CreateStudySessionProblems,
    )
)]
async fn create(
    RequiredCaller(caller): RequiredCaller,
    State(db): State<Db>,
    headers: HeaderMap,
    shared_auth::Json(input): shared_auth::Json<StudySessionInput>,
) -> Result<Response> {
    let key = key_from_headers(&headers)?;
    validate(&input)?;
    idempotent_create(
        &db.primary,
        &caller.sub,
        key.as_deref(),
        &input,
        async |tx| {
            // Checked here, after a replay would have answered: a repeat a day later of a session
            // 30 days old still replays.
            let studied_at = studied_at(input.studied_at.as_deref(), Utc::now())?;
            if !store::languages::exists(&mut *tx, &input.language_code).await? {
                return Err(ErrorCode::UnknownLanguage.into());
            }
            // The answers' phrases are checked as their states are read, after the session's
            // statement (`record`), except an id PostgreSQL cannot take (that statement stores
            // every id): one with a NUL names no phrase, and is refused here.
            if let Some(answers) = &input.answers
                && answers.iter().any(|a| !is_storable(&a.phrase_id))
            {
                store::phrase_progress::check_phrases(tx, &input.language_code, answers).await?;
            }
            let created =
                store::study_sessions::record(tx, &caller.sub, &input, studied_at).await?;
            Ok(Created {
                location: location(created.session.id),
                body: created,
            })
        },
    )
    .await
}

/// The caller's study sessions, newest first (`created_at`, then `id`, descending).
///
/// `offset` jumps to a page near the start; to walk the whole list, pass each page's
/// `next_cursor` as `cursor` (sessions recorded meanwhile are newer, so they never appear in or
/// shift the rest of the walk).
#[utoipa::path(
    get,
    path = "/me/study-sessions",
    operation_id = "lingo_list_my_study_sessions",
    tag = "lingo",
    params(CursorPageQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "One page of the caller's sessions, newest first", body = CursorPage<StudySession>,
            links(
                ("NextPage" = (operation_id = "lingo_list_my_study_sessions",
                    parameters(("cursor" = "$response.body#/next_cursor")))),
            )),
        ListProblems,
    )
)]
async fn list(
    RequiredCaller(caller): RequiredCaller,
    State(db): State<Db>,
    Query(query): Query<CursorPageQuery>,
) -> Result<Json<CursorPage<StudySession>>> {
    let list = query.paging()?;
    // A decoded cursor's time is one PostgreSQL can hold.
    let after = list
        .own_cursor::<StudySessionsCursor>()?
        .and_then(|cursor| cursor.created_at().map(|at| (at, cursor.id)));
    let sessions =
        store::study_sessions::list_for(&db.primary, &caller.sub, after, list.paging).await?;
    Ok(Json(CursorPage::from_rows(sessions, &list, |session| {
        ListCursor::StudySessions(StudySessionsCursor {
            created_at_micros: session.created_at.timestamp_micros(),
            id: session.id,
        })
    })))
}

/// One study session of the caller.
#[utoipa::path(
    get,
    path = "/me/study-sessions/{id}",
    operation_id = "lingo_get_my_study_session",
    tag = "lingo",
    params(("id" = String, Path, description = "The session's id, as in `Location` of `POST /v1/lingo/me/study-sessions`", example = "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b")),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The session", body = StudySession),
        StudySessionProblems,
    )
)]
async fn show(
    RequiredCaller(caller): RequiredCaller,
    State(db): State<Db>,
    PathId(id): PathId,
) -> Result<Json<StudySession>> {
    // Ids are opaque to clients: one not written as we write ours is simply not found.
    let id = created_id(&id).ok_or(ErrorCode::StudySessionNotFound)?;
    let session = store::study_sessions::find_for(&db.primary, &caller.sub, id)
        .await?
        .ok_or(ErrorCode::StudySessionNotFound)?;
    Ok(Json(session))
}
