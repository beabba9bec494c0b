//! `GET /v1/lingo/phrases` (paged phrase items with cached stats, or a search of them) and
//! `GET /phrases/{id}`.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use shared_auth::http::cache::{IfNoneMatch, json_read};
use shared_auth::http::path_id::PathId;
use shared_auth::{OptionalCaller, Query};
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::catalogue::{Phrase, PhraseItem};
use crate::domain::cursor::{
    CursorPage, ListCursor, ListPaging, PhrasesCursor, SearchRank, same_filter,
};
use crate::domain::search::search_text;
use crate::error::{ErrorCode, Result};
use crate::problems::{ListProblems, NotModified, PhraseProblems};
use crate::state::{AppState, Db};
use crate::store;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(show))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// Only phrases in this language (their own language, not a translation's); an unknown
    /// language gives an empty page.
    #[param(example = "es")]
    language: Option<String>,
    /// Page size.
    #[param(minimum = 1, maximum = 100, default = 20)]
    #[serde(default, deserialize_with = "shared_auth::http::paging::query_integer")]
    limit: Option<i64>,
    /// Items to skip (to jump to a page near the start); not together with `cursor`.
    #[param(minimum = 0, maximum = 10000, default = 0)]
    #[serde(default, deserialize_with = "shared_auth::http::paging::query_integer")]
    offset: Option<i64>,
    /// A `next_cursor` of an earlier page, to walk the list to its end; not together with
    /// `offset`. `language` and `q` given with it must equal the cursor's (those left out are
    /// taken from it), else 400 `invalid_cursor`. An empty `cursor=` is the same as none.
    cursor: Option<String>,
    /// Search: the phrases whose text or any translation contains every word of `q`, the last
    /// word also as the start of a word (type-ahead), ignoring case and accents, best match
    /// first (see the operation's description). 1 to 100 characters after trimming, no U+0000.
    // The pattern says what the service checks, as news search's does: no U+0000, and 1 to 100
    // characters between the white space `str::trim` removes (its class, which
    // tests/api/search.rs holds equal to Rust's), so a `q` the schema admits is never refused
    // and one it refuses never answered. No `maxLength`: the white space around `q` does not
    // count.
    #[param(
        min_length = 1,
        pattern = r"^[\u0009-\u000D\u0020\u0085\u00A0\u1680\u2000-\u200A\u2028-\u2029\u202F\u205F\u3000]*[^\u0000\u0009-\u000D\u0020\u0085\u00A0\u1680\u2000-\u200A\u2028-\u2029\u202F\u205F\u3000](?:[^\u0000]{0,98}[^\u0000\u0009-\u000D\u0020\u0085\u00A0\u1680\u2000-\u200A\u2028-\u2029\u202F\u205F\u3000])?[\u0009-\u000D\u0020\u0085\u00A0\u1680\u2000-\u200A\u2028-\u2029\u202F\u205F\u3000]*$",
        example = "donde esta"
    )]
    q: Option<String>,
}

/// Phrases of the catalogue with their cached statistics, ordered by `id`; with `q`, the
/// phrases matching a search, best match first.
///
/// **Search** (`q`): case and accents are ignored, in every script (`donde esta` finds "¿Dónde
/// está la estación?", `strasse` "Straße", `οδοσ` "ΟΔΟΣ" and "οδός", `istanbul` "İSTANBUL",
/// `abc` "ＡＢＣ"); every word of `q` must be a word of the phrase's text or of one of its
/// translations, and the last word may also be the start of one (`estac` finds "estación").
/// Words are split at spaces and punctuation; of a hyphenated word each part counts. A `q`
/// without any word (only punctuation) matches nothing. `language` still filters on the
/// phrase's own language.
///
/// **Best match first**: phrases whose own text has every word whole, then those whose own text
/// matches with the last word as a prefix, then those found through their translations (whole
/// words, then a prefix); within each, shorter phrase texts first, then by `id`.
///
/// **Paging**: `offset` jumps to a page near the start (up to 10,000); to walk the whole list,
/// pass each page's `next_cursor` as `cursor` (keyset paging: a late page costs what the first
/// does, and rows added meanwhile never repeat a row).
#[utoipa::path(
    get,
    path = "/phrases",
    operation_id = "lingo_list_phrases",
    tag = "lingo",
    params(ListQuery, IfNoneMatch),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "One page of phrases, ordered by `id`, or best match first with `q`", body = CursorPage<PhraseItem>,
            headers(
                ("Cache-Control" = String, description = "`public, max-age=30` anonymous, `private, no-store` with a token."),
                ("ETag" = String, description = "Strong validator; anonymous answers only."),
                ("Vary" = String, description = "`authorization`."),
            ),
            links(
                ("NextPage" = (operation_id = "lingo_list_phrases",
                    parameters(("cursor" = "$response.body#/next_cursor")))),
            )),
        NotModified,
        ListProblems,
    )
)]
async fn list(
    OptionalCaller(caller): OptionalCaller,
    State(db): State<Db>,
    Query(query): Query<ListQuery>,
    headers: HeaderMap,
) -> Result<Response> {
    let asked_text = search_text(query.q.as_deref())?;
    let list = ListPaging::parse(query.limit, query.offset, query.cursor.as_deref())?;
    let (language, text, after) = match list.own_cursor::<PhrasesCursor>()? {
        None => (query.language, asked_text, None),
        Some(cursor) => (
            same_filter(query.language.as_deref(), cursor.language.as_deref())?,
            same_filter(asked_text.as_deref(), cursor.query.as_deref())?,
            Some(cursor),
        ),
    };
    let page = match text {
        None => {
            let after = after.map(|cursor| cursor.id.as_str());
            let rows =
                store::phrases::list(&db.primary, language.as_deref(), after, list.paging).await?;
            CursorPage::from_rows(rows, &list, |item| {
                phrases_cursor(&item.id, language.as_deref(), None)
            })
        }
        Some(text) => {
            let after = after.and_then(|cursor| Some((cursor.rank?, cursor.id.as_str())));
            let rows =
                store::phrases::search(&db.primary, &text, language.as_deref(), after, list.paging)
                    .await?;
            let page = CursorPage::from_rows(rows, &list, |(item, rank)| {
                phrases_cursor(&item.id, language.as_deref(), Some((&text, *rank)))
            });
            page.map(|(item, _)| item)
        }
    };
    Ok(json_read(&headers, caller.is_some(), &page))
}

/// The cursor after the phrase `id` in the list with these filters.
fn phrases_cursor(
    id: &str,
    language: Option<&str>,
    search: Option<(&str, SearchRank)>,
) -> ListCursor {
    ListCursor::Phrases(PhrasesCursor {
        language: language.map(str::to_owned),
        query: search.map(|(text, _)| text.to_owned()),
        rank: search.map(|(_, rank)| rank),
        id: id.to_owned(),
    })
}

/// One phrase with all its translations.
#[utoipa::path(
    get,
    path = "/phrases/{phrase_id}",
    operation_id = "lingo_get_phrase",
    tag = "lingo",
    params(("phrase_id" = String, Path, description = "The phrase's id (opaque)", example = "ph-es-001"), IfNoneMatch),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "The phrase and its translations", body = Phrase,
            headers(
                ("Cache-Control" = String, description = "`public, max-age=30` anonymous, `private, no-store` with a token."),
                ("ETag" = String, description = "Strong validator; anonymous answers only."),
                ("Vary" = String, description = "`authorization`."),
            )),
        NotModified,
        PhraseProblems,
    )
)]
async fn show(
    OptionalCaller(caller): OptionalCaller,
    State(db): State<Db>,
    PathId(phrase_id): PathId,
    headers: HeaderMap,
) -> Result<Response> {
    let phrase = store::phrases::find(&db.primary, &phrase_id)
        .await?
        .ok_or(ErrorCode::PhraseNotFound)?;
    Ok(json_read(&headers, caller.is_some(), &phrase))
}
