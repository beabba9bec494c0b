//! All SQL of the service, one module per aggregate, as plain async functions taking an
//! executor. Static statements are `sqlx::query!`/`query_as!`/`query_scalar!`, checked at
//! compile time against `migrations/` (offline data in `.sqlx/`, kept fresh by CI); dynamic
//! lists use `QueryBuilder` in the same module, and statements built from shared parts (the
//! states' write in `phrase_progress/answers.rs`) plain `sqlx::query`. A constraint a statement
//! can hit in a race is named beside the statement, and mapped to its problem in one place,
//! `crate::error::on_constraint`.
//!
//! Functions return the resources of `domain/`; their row types stay private here.

pub mod analytics;
pub mod catalogue;
pub mod languages;
pub mod phrase_progress;
pub mod phrases;
pub mod progress;
pub mod recommendations;
pub mod study_sessions;
