//! One router per resource; SQL sits with the resource it serves.

pub mod articles;
pub mod comments;
pub mod directory;
pub mod engagement;
pub mod me;
