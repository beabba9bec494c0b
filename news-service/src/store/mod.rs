//! All SQL of the service, as plain async functions taking an executor, one module per
//! aggregate. Static statements are checked at compile time against the migrations (offline
//! data in `.sqlx/`); statements whose shape depends on the request (optional filters, keyset
//! position, the viewer's columns) are built with `QueryBuilder` in the same module.

pub mod articles;
pub mod comments;
pub mod counters;
pub mod curated;
pub mod directory;
pub mod engagement;
pub mod search;
