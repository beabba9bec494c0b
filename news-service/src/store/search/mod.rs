//! Search (docs/news.md, "GET /v1/news/search"): the query in each article language's configuration, the matching rows
//! in list order, their highlights, and respellings for a query that matched nothing. The
//! migration `search` explains the columns, configurations and word list this reads.
//!
//! Every article language present gets its own predicate, `(a.language = $l AND
//! a.search_vector @@ $query_l)`, ORed: each article is matched with the tsquery its own
//! configuration makes of `q` (an exclusion then excludes in every language, which one tsquery
//! ORed over languages would not). The service, not the planner, chooses how a statement finds
//! the matches ([`Access`](crate::domain::search::Access)): the GIN index, or a walk of the
//! `published_at` index with the match as a filter; either way the planner is not shown the
//! tsqueries, so that it cannot choose otherwise, and a walk's plan is the same for any values
//! (see [`keep_prepared`](statements::keep_prepared)).
//!
//! By concern, each in its own file:
//! - `parse.rs`: `q` as each language's configuration reads it, counted, and the parses kept;
//! - `statements.rs`: the access chosen and the statements (the ranked window, a ranked page,
//!   the newest matches, where a walk stopped);
//! - `page.rs`: a page read statement by statement, or again in one snapshot, and its cursor;
//! - `highlights.rs`: the fields marked, in Rust or by `ts_headline`;
//! - `suggestion.rs`: respellings for a query that matched nothing.

mod highlights;
mod page;
mod parse;
mod statements;
mod suggestion;

pub use page::{page, page_examining};
pub use parse::{LanguageQuery, QueryParses, cached_language_queries, language_queries};
pub use statements::{
    RankedPage, access, newest_hits_query, ranked_hits_query, walk_end_query, window_query,
};
pub use suggestion::suggestion;
