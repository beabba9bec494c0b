//! The review log (`phrase_review_sessions`, one row per session with answers) and the memory
//! state per (learner, phrase) (`phrase_states`) derived from it: written with each study
//! session that carries answers, read by `GET /me/phrases`, `GET /me/reviews`,
//! `GET /me/progress` and the analytics export.
//!
//! By concern, each in its own file:
//! - `answers.rs`: a session's answers checked and folded into the states (`update_states`);
//! - `late.rs`: a session older than a phrase's newest answer, replayed from its checkpoints;
//! - `rows.rs`: a state as stored, read (`StateRow`) and written (`StateColumns`);
//! - `pages.rs`: the pages of `GET /me/phrases` and `GET /me/reviews`, and their plans;
//! - `due.rs`: how many phrases are due, over `phrase_due_days`;
//! - `export.rs`: the analytics export's pages.

mod answers;
mod due;
mod export;
mod late;
mod pages;
mod rows;

pub use answers::{AnswerColumns, check_phrases, update_states};
pub use due::{due_by_language, push_due_of_totals_row};
pub use export::export_page;
pub use pages::{explain_learner_reads, list_for, reviews_for};
