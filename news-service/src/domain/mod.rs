//! Domain rules as small pure functions, tested next to them.

pub mod comments;
pub mod cursor;
pub mod highlight;
pub mod ids;
pub mod search;
