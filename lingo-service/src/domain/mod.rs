//! The learning rules and the shapes clients see, with no I/O: XP per session, level from total
//! XP, streaks over UTC days, the study-session input rules, the progress counters, the analytics
//! cursor codec, and the resources `store/` returns and `routes/` serialise. Rules are small pure
//! functions with their unit tests next to them.

pub mod catalogue;
pub mod cursor;
pub mod cursor_only;
pub mod fsrs;
pub mod level;
pub mod phrase_progress;
pub mod progress;
pub mod search;
pub mod streak;
pub mod study_session;
pub mod text;
pub mod time;
pub mod xp;
