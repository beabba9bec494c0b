//! One page of a search ([`page`]): its statements run on a pooled connection, and again in one
//! read-only snapshot when a walk stopped short; its cursor, highlights and suggestion.

use chrono::{DateTime, Utc};
use shared_auth::pg::pool::begin_to_completion;
use sqlx::postgres::PgRow;
use sqlx::{FromRow, PgConnection, PgPool, Postgres, QueryBuilder};

use super::highlights::hits;
use super::parse::{LanguageQuery, QueryParses, cached_language_queries};
use super::statements::{
    HitColumns, RankedColumns, RankedPage, ReadHit, access, keep_prepared, newest_hits_query,
    ranked_hits_query, walk_end_query,
};
use super::suggestion::suggestion;
use crate::domain::articles::ArticleItem;
use crate::domain::search::{
    Access, Filters, Position, RANKED_MATCHES, SearchCursor, SearchPage, SearchSpec, Sort,
    WALK_EXAMINES,
};
use crate::error::Result;
use crate::store::articles;

/// The connection a page's statements run on, and whether they share one snapshot.
struct PageReader<'c> {
    db: &'c mut PgConnection,
    /// The statements run in one read-only REPEATABLE READ transaction: only then may where a
    /// walk stopped be looked up by a statement of its own. In two snapshots, an article deleted
    /// in between moved the end found past the last article the walk examined, and the next
    /// page started after articles never read.
    one_snapshot: bool,
    /// A walk stopped short outside one snapshot: the page is to be read again in one.
    read_again: bool,
}

/// See [`walk_end_query`]; `None` for [`Access::Index`], which reads every match, and when
/// `reader` is not in one snapshot (it is then marked to read the page again in one).
async fn walk_end(
    reader: &mut PageReader<'_>,
    filters: &Filters,
    before: Option<&(DateTime<Utc>, String)>,
    access: Access,
    last: Option<&(DateTime<Utc>, String)>,
) -> Result<Option<(DateTime<Utc>, String)>> {
    let Access::Walk(examine) = access else {
        return Ok(None);
    };
    if !reader.one_snapshot {
        reader.read_again = true;
        return Ok(None);
    }
    let mut qb = walk_end_query("", filters, before, examine, last);
    let end: Option<(DateTime<Utc>, String)> = qb
        .build_query_as()
        .persistent(false)
        .fetch_optional(&mut *reader.db)
        .await?;
    Ok(end)
}

/// Runs a page statement whose extra columns are `T`, each row's place taken from the row;
/// prepared once and kept on the connection when `prepared` (see [`keep_prepared`]).
async fn read_hits<T>(
    db: &mut PgConnection,
    mut qb: QueryBuilder<'static, Postgres>,
    prepared: bool,
    mut split: impl FnMut(T) -> (i16, HitColumns),
) -> Result<Vec<ReadHit>>
where
    T: for<'r> FromRow<'r, PgRow>,
{
    let read: Vec<(ArticleItem, T)> =
        articles::fetch_items(db, qb.build().persistent(prepared)).await?;
    Ok(read
        .into_iter()
        .map(|(item, extra)| {
            let (score, columns) = split(extra);
            ReadHit {
                position: Position {
                    score,
                    published_at: item.published_at,
                    id: item.id.clone(),
                },
                item,
                columns,
            }
        })
        .collect())
}

/// Matches newest first (score 0), strictly before `before` when given, with their items;
/// and, when a walk stopped at its limit before it found `wanted`, where it stopped.
async fn newest_hits(
    reader: &mut PageReader<'_>,
    spec: &SearchSpec,
    languages: &[LanguageQuery],
    before: Option<&(DateTime<Utc>, String)>,
    wanted: usize,
    viewer: Option<&str>,
    examine: i64,
) -> Result<(Vec<ReadHit>, Option<(DateTime<Utc>, String)>)> {
    let access = access(languages, wanted as i64, examine);
    let qb = newest_hits_query(
        "",
        languages,
        &spec.filters,
        before,
        wanted as i64,
        viewer,
        access,
    );
    let prepared = keep_prepared(access, &spec.filters);
    let hits = read_hits(&mut *reader.db, qb, prepared, |columns: HitColumns| {
        (0, columns)
    })
    .await?;
    let stopped = if hits.len() < wanted {
        let last = hits
            .last()
            .map(|h| (h.position.published_at, h.position.id.clone()));
        walk_end(reader, &spec.filters, before, access, last.as_ref()).await?
    } else {
        None
    };
    Ok((hits, stopped))
}

/// The rows of a page and where the next one starts.
struct ReadPage {
    hits: Vec<ReadHit>,
    /// `sort=relevance`: the ranked window's end, which the cursor keeps.
    window_end: Option<(DateTime<Utc>, String)>,
    /// Where a walk stopped at its limit before it filled the page: the next page starts
    /// strictly after it (score 0), whether or not this one is full.
    stopped: Option<(DateTime<Utc>, String)>,
}

/// The hits of a `sort=relevance` page (and one more, to know whether another page follows),
/// and the ranked window's end its cursor keeps.
async fn ranked_hits(
    reader: &mut PageReader<'_>,
    spec: &SearchSpec,
    languages: &[LanguageQuery],
    wanted: usize,
    viewer: Option<&str>,
    examine: i64,
) -> Result<ReadPage> {
    let mut window_end = spec.window_end.clone();
    let mut hits = Vec::new();
    // Page 1's window holds every match when the page is not full: `wanted` is at most a page
    // and one row, far fewer than the window's `RANKED_MATCHES`, so the window was not full
    // either; then nothing is older, and a rare query is spared a second index scan. Unless a
    // walk stopped at its limit: then the window is the matches among the articles it examined.
    debug_assert!(wanted as i64 <= RANKED_MATCHES);
    let mut all_matches = false;
    let in_window = spec.after.as_ref().is_none_or(|after| after.score > 0);
    if in_window {
        let access = access(languages, RANKED_MATCHES, examine);
        let page = RankedPage {
            window_end: window_end.as_ref(),
            after: spec.after.as_ref(),
            wanted: wanted as i64,
        };
        let qb = ranked_hits_query("", languages, &spec.filters, page, viewer, access);
        let mut end = None;
        let mut size = 0;
        let prepared = keep_prepared(access, &spec.filters);
        hits = read_hits(&mut *reader.db, qb, prepared, |ranked: RankedColumns| {
            end.get_or_insert((ranked.window_end_at, ranked.window_end_id));
            size = ranked.window_size;
            (ranked.rank_score, ranked.hit)
        })
        .await?;
        if window_end.is_none() {
            if size < RANKED_MATCHES
                && let Some(stopped) =
                    walk_end(reader, &spec.filters, None, access, end.as_ref()).await?
            {
                // The window is the matches at or after where the walk stopped.
                if hits.len() < wanted {
                    return Ok(ReadPage {
                        hits,
                        window_end: Some(stopped.clone()),
                        stopped: Some(stopped),
                    });
                }
                end = Some(stopped);
            }
            all_matches = hits.len() < wanted;
            window_end = end;
        }
    }
    let mut stopped = None;
    if hits.len() < wanted
        && !all_matches
        && let Some(end) = &window_end
    {
        // Past the window: older matches, newest first, unranked.
        let before = match &spec.after {
            Some(after) if after.score == 0 => (after.published_at, after.id.clone()),
            _ => end.clone(),
        };
        let more = wanted - hits.len();
        let (older, stop) = newest_hits(
            reader,
            spec,
            languages,
            Some(&before),
            more,
            viewer,
            examine,
        )
        .await?;
        hits.extend(older);
        stopped = stop;
    }
    Ok(ReadPage {
        hits,
        window_end,
        stopped,
    })
}

/// Begins the transaction a page's walks and the statements finding where they stopped share.
const ONE_SNAPSHOT: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";

/// The rows of a page (`limit` and one more) for `languages`' queries.
async fn read_page(
    reader: &mut PageReader<'_>,
    spec: &SearchSpec,
    languages: &[LanguageQuery],
    limit: usize,
    viewer: Option<&str>,
    examine: i64,
) -> Result<ReadPage> {
    if spec.sort == Sort::Relevance {
        return ranked_hits(reader, spec, languages, limit + 1, viewer, examine).await;
    }
    let before = spec.after.as_ref().map(|p| (p.published_at, p.id.clone()));
    let (hits, stopped) = newest_hits(
        reader,
        spec,
        languages,
        before.as_ref(),
        limit + 1,
        viewer,
        examine,
    )
    .await?;
    Ok(ReadPage {
        hits,
        window_end: None,
        stopped,
    })
}

/// [`read_page`] on a pooled connection, statement by statement; again in one read-only
/// REPEATABLE READ transaction when a walk stopped short and where it stopped is needed (see
/// [`PageReader`]). Most pages never need it: a frequent word fills a page long before a
/// walk's limit, and the GIN index reads every match at once. The transaction's two round
/// trips cost a walked page about 8% (`sort=newest` of a frequent word).
async fn read_in_snapshot(
    pool: &PgPool,
    spec: &SearchSpec,
    languages: &[LanguageQuery],
    limit: usize,
    viewer: Option<&str>,
    examine: i64,
) -> Result<ReadPage> {
    let mut db = pool.acquire().await?;
    let mut reader = PageReader {
        db: &mut db,
        one_snapshot: false,
        read_again: false,
    };
    let read = read_page(&mut reader, spec, languages, limit, viewer, examine).await?;
    if !reader.read_again {
        return Ok(read);
    }
    drop(db);
    // Begun to completion even if this request is cancelled meanwhile, so the connection
    // never goes back to the pool inside a transaction the server has begun.
    let mut snapshot = begin_to_completion(pool, Some(ONE_SNAPSHOT)).await?;
    let mut reader = PageReader {
        db: &mut snapshot,
        one_snapshot: true,
        read_again: false,
    };
    let read = read_page(&mut reader, spec, languages, limit, viewer, examine).await?;
    snapshot.commit().await?;
    Ok(read)
}

/// One page of a search, as `viewer` sees it.
pub async fn page(
    pool: &PgPool,
    parses: &QueryParses,
    spec: &SearchSpec,
    limit: i64,
    viewer: Option<&str>,
) -> Result<SearchPage> {
    page_examining(pool, parses, spec, limit, viewer, WALK_EXAMINES).await
}

/// [`page`] with walks that examine at most `examine` articles (tests use a small one).
pub async fn page_examining(
    pool: &PgPool,
    parses: &QueryParses,
    spec: &SearchSpec,
    limit: i64,
    viewer: Option<&str>,
    examine: i64,
) -> Result<SearchPage> {
    let languages = cached_language_queries(pool, parses, &spec.q).await?;
    let limit = limit as usize;
    // The page's hits (and one more, to know whether another page follows), the ranked
    // window's end a `sort=relevance` cursor keeps, and where a walk stopped short.
    let ReadPage {
        hits: mut read,
        window_end,
        stopped,
    } = if languages.is_empty() || spec.filters.matches_nothing() {
        ReadPage {
            hits: Vec::new(),
            window_end: None,
            stopped: None,
        }
    } else {
        read_in_snapshot(pool, spec, &languages, limit, viewer, examine).await?
    };
    // In list order: the statements order their rows, in the database's collation as the
    // article list and the cursors' comparisons do (sorting again here, by bytes, disagreed with
    // them in another collation than "C": a walk skipped or repeated articles tied on
    // `published_at`).
    let spec = SearchSpec {
        window_end,
        ..spec.clone()
    };
    let next_cursor = if read.len() > limit {
        Some(SearchCursor::after(&spec, &read[limit - 1].position).encode())
    } else {
        stopped.map(|(published_at, id)| {
            let at = Position {
                score: 0,
                published_at,
                id,
            };
            SearchCursor::after(&spec, &at).encode()
        })
    };
    read.truncate(limit);
    let data = hits(pool, read, &languages).await?;
    // A page cut short by the walk's limit does not know that nothing matches.
    let suggestion = if data.is_empty() && spec.after.is_none() && next_cursor.is_none() {
        suggestion(pool, &spec.q).await?
    } else {
        None
    };
    Ok(SearchPage {
        count: data.len(),
        data,
        next_cursor,
        suggestion,
    })
}
