//! The learning rules of API.md section 3 as small pure functions: XP per session, level from
//! total XP, and streaks over UTC days. Handlers call these; nothing here touches I/O.

pub mod level;
pub mod streak;
pub mod xp;
