//! The news rules and the shapes clients see, with no I/O: comment text and depth, identifiers,
//! keyset cursors and their pages, search queries, highlights and their order, the curated
//! records the pipeline loads, and the resources `store/` returns and `routes/` serialise
//! (articles, the directory, comments, search matches). Rules are small pure functions with
//! their unit tests next to them.

pub mod articles;
pub mod comments;
pub mod curated;
pub mod cursor;
pub mod directory;
pub mod highlight;
pub mod ids;
pub mod search;
pub mod text_search;
pub mod tsquery;
