//! The directory: organisations and journalists, each with its follower count (from the counter
//! tables) and, for a caller, whether they follow it. Both lists are one statement shape over a
//! [`Directory`] (which table, which follow table, which counter table), built with
//! `QueryBuilder` because the viewer column and the selection are optional.

use shared_auth::Paging;
use shared_auth::pg::push_opaque;
use sqlx::postgres::PgRow;
use sqlx::{FromRow, PgExecutor, Postgres, QueryBuilder};

use crate::domain::directory::{Journalist, Organization};
use crate::error::Result;
use crate::store::articles::push_limit_offset;

/// One directory list. All names are static SQL identifiers of our own schema, never input.
pub struct Directory {
    /// The listed table and its alias.
    table: &'static str,
    alias: &'static str,
    /// The listed columns besides `follower_count` and `viewer`.
    columns: &'static str,
    /// The follow table and its column naming the followed row.
    follows: &'static str,
    follows_column: &'static str,
    /// The counter table the follow table's triggers keep (keyed by `follows_column`).
    stats: &'static str,
}

pub const ORGANIZATIONS: Directory = Directory {
    table: "organizations",
    alias: "o",
    columns: "o.id, o.name, o.url",
    follows: "organization_follows",
    follows_column: "organization_id",
    stats: "organization_stats",
};

pub const JOURNALISTS: Directory = Directory {
    table: "journalists",
    alias: "j",
    columns: "j.id, j.name, j.organization_id",
    follows: "journalist_follows",
    follows_column: "journalist_id",
    stats: "journalist_stats",
};

/// Which rows of the directory to select.
#[derive(Debug, Clone, Copy)]
pub enum Selection<'a> {
    All,
    /// Journalists of one organisation.
    OfOrganization(&'a str),
    FollowedBy(&'a str),
}

/// Where a page of a directory list starts: at an offset, or strictly after a `(name, id)`.
#[derive(Debug, Clone, Copy)]
pub struct DirectoryPage<'a> {
    pub paging: Paging,
    pub after: Option<(&'a str, &'a str)>,
}

/// A directory list ordered by name, ties by id; the page when `page` is given, else all.
pub async fn list<T>(
    db: impl PgExecutor<'_>,
    directory: &Directory,
    selection: Selection<'_>,
    viewer: Option<&str>,
    page: Option<DirectoryPage<'_>>,
) -> Result<Vec<T>>
where
    T: for<'r> FromRow<'r, PgRow> + Send + Unpin,
{
    Ok(list_query("", directory, selection, viewer, page)
        .build_query_as()
        .fetch_all(db)
        .await?)
}

/// The statement of [`list`]. A page after a cursor is a range of the `(name, id)` index (or
/// `(organization_id, name, id)` for one organisation's journalists) read in order: no sort.
/// Its limit is written into it and its values hidden from the planner, as the article list's
/// (see [`push_limit_offset`] and [`push_opaque`]): with a bound limit each page of the
/// organisations was planned at every request (0.06-0.07 ms, as much as its execution).
/// `prefix` lets tests prepend `EXPLAIN`.
pub fn list_query(
    prefix: &str,
    directory: &Directory,
    selection: Selection<'_>,
    viewer: Option<&str>,
    page: Option<DirectoryPage<'_>>,
) -> QueryBuilder<'static, Postgres> {
    let Directory {
        table,
        alias,
        columns,
        follows,
        follows_column,
        stats,
    } = directory;
    let mut qb = QueryBuilder::new(format!(
        "{prefix}SELECT {columns}, \
         (SELECT coalesce(sum(s.follower_count), 0)::bigint FROM {stats} s WHERE s.{follows_column} = {alias}.id) AS follower_count"
    ));
    match viewer {
        Some(user) => {
            qb.push(format!(
                ", EXISTS (SELECT 1 FROM {follows} f WHERE f.{follows_column} = {alias}.id AND f.user_id = "
            ));
            push_opaque(&mut qb, user.to_owned());
            // A lookup per row, not a hash of all the viewer's follows (see the article list's
            // flags in `store::articles`): 0.11 ms against 0.53 for a user following thousands.
            qb.push(" OFFSET 0) AS viewer");
        }
        None => {
            qb.push(", NULL::boolean AS viewer");
        }
    }
    qb.push(format!(" FROM {table} {alias}"));
    match selection {
        Selection::All => {}
        Selection::OfOrganization(organization_id) => {
            qb.push(format!(" WHERE {alias}.organization_id = "));
            push_opaque(&mut qb, organization_id.to_owned());
        }
        Selection::FollowedBy(user) => {
            // Never paged (the whole list at once), so planned with its user: a user following
            // thousands reads them best by a plan made for that many.
            qb.push(format!(
                " JOIN {follows} mine ON mine.{follows_column} = {alias}.id AND mine.user_id = "
            ))
            .push_bind(user.to_owned());
        }
    }
    if let Some((name, id)) = page.and_then(|page| page.after) {
        let joiner = match selection {
            Selection::OfOrganization(_) => " AND",
            Selection::All | Selection::FollowedBy(_) => " WHERE",
        };
        qb.push(format!("{joiner} ({alias}.name, {alias}.id) > ("));
        push_opaque(&mut qb, name.to_owned());
        qb.push(", ");
        push_opaque(&mut qb, id.to_owned());
        qb.push(")");
    }
    qb.push(format!(" ORDER BY {alias}.name, {alias}.id"));
    if let Some(page) = page {
        push_limit_offset(&mut qb, page.paging.fetch_limit(), page.paging.offset);
    }
    qb
}

/// Everything `user` follows, each list ordered by name.
pub async fn followed_by(
    db: &sqlx::PgPool,
    user: &str,
) -> Result<(Vec<Journalist>, Vec<Organization>)> {
    let selection = Selection::FollowedBy(user);
    let journalists = list(db, &JOURNALISTS, selection, Some(user), None).await?;
    let organizations = list(db, &ORGANIZATIONS, selection, Some(user), None).await?;
    Ok((journalists, organizations))
}
