//! The analytics exports as an analytics tool uses them (docs/lingo.md, "Analytics export"): a
//! copier that reads each export to its end and then, again and again, only what changed since
//! (from the largest `updated_at` it saw, or from the last `next_cursor` it was given), while
//! learners post sessions (with and without answers, late, several of one learner at once) and
//! the catalogue pipeline moves and deletes phrases. Once the writes are over, its copy must be
//! exactly the tables as they are: no update missed, no old version kept.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use futures_util::future::join_all;
use serde_json::Value;
use shared_auth::testing::{token, token_with_scope};

use crate::helpers::{TestApp, answered_session, rfc3339, spawn_app_unseeded};
use crate::phrase_moves::{run, spanish_catalogue};
use crate::search::{add_phrase, pipeline};

const PROGRESS_EXPORT: &str = "/v1/lingo/analytics/progress";
const PHRASE_EXPORT: &str = "/v1/lingo/analytics/phrase-progress";
/// How long the learners and the pipeline write while the copiers copy.
const WRITING: Duration = Duration::from_secs(4);
const LEARNERS: usize = 4;
/// Spanish phrases the learners answer; the pipeline moves `es-4` and `es-5` to Portuguese and
/// back, and deletes `es-6` and `es-7` (and adds `es-7` again).
const SPANISH: [&str; 7] = ["es-1", "es-2", "es-3", "es-4", "es-5", "es-6", "es-7"];
const PORTUGUESE: [&str; 2] = ["pt-1", "pt-2"];
/// The phrases the pipeline deletes (`es-7` is added again after each delete).
const DELETED: [&str; 2] = ["es-6", "es-7"];

/// How a copier starts each run after its first, full one.
#[derive(Clone, Copy, Debug)]
enum Resume {
    /// `updated_since` = the largest `updated_at` it has seen (docs/lingo.md).
    FromLargestUpdatedAt,
    /// `cursor` = the last non-null `next_cursor` it was given (the page after it comes again).
    FromLastCursor,
}

/// One export as a copier holds it: each row by its key, the newest version it read.
struct Copier {
    path: &'static str,
    key: &'static str,
    resume: Resume,
    rows: BTreeMap<(String, String), Value>,
    largest_updated_at: Option<String>,
    last_cursor: Option<String>,
    runs: usize,
}

impl Copier {
    fn new(path: &'static str, key: &'static str, resume: Resume) -> Self {
        Self {
            path,
            key,
            resume,
            rows: BTreeMap::new(),
            largest_updated_at: None,
            last_cursor: None,
            runs: 0,
        }
    }

    /// One run: from where the last one ended (the whole export the first time) to the end,
    /// keeping the newest version of every row read. The page size changes from run to run.
    async fn run(&mut self, app: &TestApp, analyst: &str) {
        let limit = [3, 1, 100, 7, 2][self.runs % 5];
        self.runs += 1;
        let mut query = match self.resume {
            Resume::FromLargestUpdatedAt => self
                .largest_updated_at
                .as_ref()
                .map(|since| format!("updated_since={since}")),
            Resume::FromLastCursor => self.last_cursor.as_ref().map(|c| format!("cursor={c}")),
        }
        .unwrap_or_default();
        loop {
            let path = format!("{}?limit={limit}&{query}", self.path);
            let response = app.get(&path, Some(analyst)).await;
            assert_eq!(response.status(), 200, "{path}");
            let page: Value = response.json().await.unwrap();
            for row in page["data"].as_array().unwrap() {
                self.keep(row);
            }
            match page["next_cursor"].as_str() {
                Some(next) => {
                    self.last_cursor = Some(next.to_owned());
                    query = format!("cursor={next}");
                }
                None => return,
            }
        }
    }

    fn keep(&mut self, row: &Value) {
        let updated_at = row["updated_at"].as_str().unwrap().to_owned();
        let newest = self.largest_updated_at.as_ref();
        // Whole-second RFC 3339 with `Z`: the text sorts as the time does.
        if newest.is_none_or(|newest| *newest <= updated_at) {
            self.largest_updated_at = Some(updated_at);
        }
        let key = (
            row["learner_id"].as_str().unwrap().to_owned(),
            row[self.key].as_str().unwrap().to_owned(),
        );
        self.rows.insert(key, row.clone());
    }
}

#[tokio::test]
async fn incremental_copies_end_with_exactly_the_tables_while_everything_writes() {
    let app = spawn_app_unseeded().await;
    catalogue(&app).await;
    let analyst = token_with_scope("copier", "lingo:analytics");
    let writing = AtomicBool::new(true);
    let (app, writing) = (&app, &writing);

    let mut copiers = [
        Copier::new(
            PROGRESS_EXPORT,
            "language_code",
            Resume::FromLargestUpdatedAt,
        ),
        Copier::new(PROGRESS_EXPORT, "language_code", Resume::FromLastCursor),
        Copier::new(PHRASE_EXPORT, "phrase_id", Resume::FromLargestUpdatedAt),
        Copier::new(PHRASE_EXPORT, "phrase_id", Resume::FromLastCursor),
    ];
    let copying = join_all(copiers.iter_mut().map(|copier| async {
        while writing.load(Ordering::SeqCst) {
            copier.run(app, &analyst).await;
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
    }));
    let writers = async {
        let start = Instant::now();
        let learners = (0..LEARNERS * 2).map(|writer| learner_writes(app, writer, start));
        let (outcomes, ()) = tokio::join!(join_all(learners), pipeline_writes(app, start));
        writing.store(false, Ordering::SeqCst);
        outcomes.into_iter().sum::<usize>()
    };
    let (recorded, _) = tokio::join!(writers, copying);
    assert!(recorded > 40, "only {recorded} sessions recorded");
    // Every session answered 201 is counted once (and the last learner's one).
    let counted: i64 = sqlx::query_scalar(
        "SELECT sum(sessions)::int8 FROM lingo.learner_language_totals \
          WHERE learner_id LIKE 'copied-%'",
    )
    .fetch_one(&mut app.admin().await)
    .await
    .unwrap();
    assert_eq!(counted, recorded as i64 + 1);

    app.settle_export_horizon().await;
    let totals = progress_table(app).await;
    let states = states_table(app).await;
    for copier in &mut copiers {
        copier.run(app, &analyst).await;
        assert!(copier.runs > 3, "{:?}: {} runs", copier.resume, copier.runs);
        let (table, copy) = match copier.path {
            PROGRESS_EXPORT => (&totals, progress_rows(&copier.rows)),
            _ => (&states, state_rows(&copier.rows)),
        };
        // The states export has no row that marks a deletion (docs/lingo.md): the copy may
        // still hold states of phrases deleted meanwhile (`es-7` even when it was added again
        // and the learner has not answered it since), and nothing else that the table lacks.
        let (current, deleted): (BTreeMap<_, _>, BTreeMap<_, _>) = copy
            .into_iter()
            .partition(|(key, _)| table.contains_key(key));
        assert_eq!(
            &current, table,
            "{:?} copy of {}",
            copier.resume, copier.path
        );
        for (learner, phrase) in deleted.keys() {
            assert!(
                copier.path == PHRASE_EXPORT && DELETED.contains(&phrase.as_str()),
                "{:?} copy of {} keeps {learner} {phrase}",
                copier.resume,
                copier.path
            );
        }
    }
    // The states of deleted phrases leave a copy read again from the start, as the docs say.
    let mut fresh = Copier::new(PHRASE_EXPORT, "phrase_id", Resume::FromLastCursor);
    fresh.run(app, &analyst).await;
    assert_eq!(state_rows(&fresh.rows), states);
}

/// Spanish `es-1`..`es-7`, Portuguese `pt-1` and `pt-2`, as the pipeline writes them.
async fn catalogue(app: &TestApp) {
    spanish_catalogue(app).await;
    let mut db = pipeline(app).await;
    for phrase in &SPANISH[3..] {
        add_phrase(&mut db, phrase, "es", phrase, &[]).await;
    }
    for phrase in PORTUGUESE {
        add_phrase(&mut db, phrase, "pt", phrase, &[]).await;
    }
}

/// Writer `writer` posts sessions for [`WRITING`]: two writers per learner, so a learner's
/// sessions also come at the same time. Returns how many were recorded (a session may be refused
/// with 422 `unknown_phrase` when the pipeline moved or deleted a phrase it answers).
async fn learner_writes(app: &TestApp, writer: usize, start: Instant) -> usize {
    let learner = token(&format!("copied-{}", writer % LEARNERS));
    let mut recorded = 0;
    let mut round = writer;
    while start.elapsed() < WRITING {
        round += 1;
        let body = session_of_round(round, Utc::now());
        let response = app.post_session(&learner, &body).await;
        let status = response.status().as_u16();
        let answer: Value = response.json().await.unwrap();
        match status {
            201 => recorded += 1,
            422 => assert_eq!(answer["code"], "unknown_phrase", "{body}: {answer}"),
            _ => panic!("{status} for {body}: {answer}"),
        }
    }
    recorded
}

/// A session in Spanish or Portuguese, with 0 to 3 answers, studied now, a second ahead, or up
/// to 29 days back (late, against what the learner has already sent).
fn session_of_round(round: usize, now: DateTime<Utc>) -> Value {
    let (language, phrases): (&str, &[&str]) = if round.is_multiple_of(5) {
        ("pt", &PORTUGUESE)
    } else {
        ("es", &SPANISH)
    };
    let answers: Vec<(&str, bool, Option<&str>)> = (0..round % 4)
        .map(|n| {
            let phrase = phrases[(round * 3 + n * 5) % phrases.len()];
            (phrase, !(round + n).is_multiple_of(3), None)
        })
        .collect();
    let studied_at = match round % 3 {
        0 => None,
        1 => Some(now + TimeDelta::seconds(1)),
        _ => Some(now - TimeDelta::minutes(((round * 7919) % (29 * 24 * 60)) as i64)),
    };
    let mut body = answered_session(language, studied_at, &answers);
    if answers.is_empty() {
        body.as_object_mut().unwrap().remove("answers");
        body["phrases_seen"] = (round % 7).into();
        body["phrases_correct"] = (round % 7 / 2).into();
    }
    body
}

/// The pipeline's writes for [`WRITING`], one transaction each: `es-4` and `es-5` move to
/// Portuguese and back (one move held open for a moment), `es-6` is deleted, `es-7` deleted and
/// added again; then a last move held open longer.
async fn pipeline_writes(app: &TestApp, start: Instant) {
    let mut db = pipeline(app).await;
    let mut step = 0;
    while start.elapsed() < WRITING {
        let statement = match step % 6 {
            0 => "UPDATE phrases SET language_code = 'pt' WHERE id = 'es-4'",
            1 => "UPDATE phrases SET language_code = 'es' WHERE id = 'es-4'",
            2 => {
                "BEGIN; UPDATE phrases SET language_code = 'pt' WHERE id = 'es-5'; \
                  SELECT pg_sleep(0.3); COMMIT"
            }
            3 => "UPDATE phrases SET language_code = 'es' WHERE id = 'es-5'",
            4 => "DELETE FROM phrases WHERE id = 'es-7'",
            _ => "INSERT INTO phrases (id, text, language_code) VALUES ('es-7', 'es-7', 'es')",
        };
        if step == 10 {
            run(&mut db, "DELETE FROM phrases WHERE id = 'es-6'").await;
        }
        run(&mut db, statement).await;
        step += 1;
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    // The catalogue ends with `es-7` (a phrase deleted and added again), `es-6` gone.
    if step % 6 == 5 {
        run(
            &mut db,
            "INSERT INTO phrases (id, text, language_code) VALUES ('es-7', 'es-7', 'es')",
        )
        .await;
    }
    last_move_commits_after_a_later_session(app, &mut db).await;
}

/// The last write, when the learners have stopped: a move of `es-4` held open while a session
/// of another learner commits more than a second after the move's stamp. The moved rows are
/// stamped before that session's and committed after it, and no later write changes them: a
/// copier that went past the session's row before the move committed would never see them.
async fn last_move_commits_after_a_later_session(app: &TestApp, db: &mut sqlx::PgConnection) {
    run(db, "BEGIN").await;
    run(
        db,
        "UPDATE phrases SET language_code = CASE language_code WHEN 'es' THEN 'pt' ELSE 'es' END \
         WHERE id = 'es-4'",
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let later = answered_session("es", None, &[("es-1", true, None)]);
    let response = app.post_session(&token("copied-later"), &later).await;
    assert_eq!(response.status(), 201);
    tokio::time::sleep(Duration::from_millis(300)).await;
    run(db, "COMMIT").await;
}

/// A row of a copy or of a table, as text to compare: every field the export shows but
/// `phrases_due` (counted at the time of the request) and `accuracy` (checked against the
/// counts), times to the second as the export shows them.
type Rows = BTreeMap<(String, String), String>;

fn shown(at: Option<DateTime<Utc>>) -> String {
    at.map_or_else(|| "null".to_owned(), rfc3339)
}

fn progress_rows(copy: &BTreeMap<(String, String), Value>) -> Rows {
    copy.iter()
        .map(|(key, row)| {
            let fields = [
                "sessions",
                "total_duration_seconds",
                "phrases_seen",
                "phrases_correct",
                "xp",
                "phrases_started",
                "first_studied_at",
                "last_studied_at",
                "updated_at",
            ];
            let (seen, correct) = (&row["phrases_seen"], &row["phrases_correct"]);
            let accuracy = match seen.as_f64().unwrap() {
                0.0 => Value::Null,
                seen => (correct.as_f64().unwrap() / seen).into(),
            };
            assert_eq!(row["accuracy"], accuracy, "{row}");
            (key.clone(), field_texts(row, &fields).join(" "))
        })
        .collect()
}

/// The `fields` of a copied row as text, strings without their quotes, in order.
fn field_texts(row: &Value, fields: &[&str]) -> Vec<String> {
    fields
        .iter()
        .map(|field| row[field].to_string().trim_matches('"').to_owned())
        .collect()
}

async fn progress_table(app: &TestApp) -> Rows {
    type Row = (
        String,
        String,
        i64,
        i64,
        i64,
        i64,
        i64,
        i64,
        Option<DateTime<Utc>>,
        Option<DateTime<Utc>>,
        DateTime<Utc>,
    );
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT learner_id, language_code, sessions::int8, total_duration_seconds::int8, \
           phrases_seen::int8, phrases_correct::int8, xp::int8, phrases_started::int8, \
           first_studied_at, last_studied_at, updated_at \
         FROM lingo.learner_language_totals",
    )
    .fetch_all(&mut app.admin().await)
    .await
    .unwrap();
    rows.into_iter()
        .map(|r| {
            let text = format!(
                "{} {} {} {} {} {} {} {} {}",
                r.2,
                r.3,
                r.4,
                r.5,
                r.6,
                r.7,
                shown(r.8),
                shown(r.9),
                shown(Some(r.10))
            );
            ((r.0, r.1), text)
        })
        .collect()
}

fn state_rows(copy: &BTreeMap<(String, String), Value>) -> Rows {
    copy.iter()
        .map(|(key, row)| {
            let fields = [
                "language_code",
                "reviews",
                "correct",
                "lapses",
                "last_reviewed_at",
                "last_grade",
                "due_at",
                "updated_at",
            ];
            let mut text = field_texts(row, &fields);
            for field in ["stability_days", "difficulty"] {
                text.push(format!("{:.6e}", row[field].as_f64().unwrap()));
            }
            (key.clone(), text.join(" "))
        })
        .collect()
}

async fn states_table(app: &TestApp) -> Rows {
    type Row = (
        String,
        String,
        String,
        i64,
        i64,
        i64,
        DateTime<Utc>,
        String,
        DateTime<Utc>,
        DateTime<Utc>,
        f64,
        f64,
    );
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT learner_id, phrase_id, language_code, reviews::int8, correct::int8, lapses::int8, \
           last_reviewed_at, (ARRAY['again', 'hard', 'good', 'easy'])[last_grade], due_at, \
           updated_at, stability::float8, difficulty::float8 \
         FROM lingo.phrase_states",
    )
    .fetch_all(&mut app.admin().await)
    .await
    .unwrap();
    rows.into_iter()
        .map(|r| {
            let text = format!(
                "{} {} {} {} {} {} {} {} {:.6e} {:.6e}",
                r.2,
                r.3,
                r.4,
                r.5,
                rfc3339(r.6),
                r.7,
                rfc3339(r.8),
                rfc3339(r.9),
                r.10,
                r.11
            );
            ((r.0, r.1), text)
        })
        .collect()
}
