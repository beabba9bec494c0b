//! `import FILE.jsonl`: loads curated organisations, journalists and articles from JSON Lines as
//! the pipeline role, upserting by id. The file is read three times (organisations, then
//! journalists, then articles), so a line may refer to a row defined further down. Rows go in
//! batches; when a batch fails, its rows are retried one by one so that only the bad lines are
//! skipped, each reported with its line number. A progress bar follows the bytes read.

use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sqlx::PgPool;

use crate::db;
use crate::domain::curated::{
    ArticleRecord, JournalistRecord, Kind, OrganizationRecord, Record, UpsertCounts,
};
use crate::store::curated::{upsert_articles, upsert_journalists, upsert_organizations};

const BATCH: usize = 1_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    pub line: usize,
    pub reason: String,
}

#[derive(Debug, Clone, Default)]
pub struct ImportSummary {
    pub lines: usize,
    pub organizations: UpsertCounts,
    pub journalists: UpsertCounts,
    pub articles: UpsertCounts,
    pub bad_lines: Vec<BadLine>,
}

impl fmt::Display for ImportSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "read {} lines", self.lines)?;
        writeln!(f, "organizations: {}", self.organizations)?;
        writeln!(f, "journalists:   {}", self.journalists)?;
        writeln!(f, "articles:      {}", self.articles)?;
        if self.bad_lines.is_empty() {
            write!(f, "no bad lines")
        } else {
            let numbers: Vec<String> = self.bad_lines.iter().map(|b| b.line.to_string()).collect();
            write!(
                f,
                "skipped {} bad lines: {}",
                self.bad_lines.len(),
                numbers.join(", ")
            )
        }
    }
}

/// A clearer reason than the raw database message for the errors a pipeline line can cause.
fn reason_of(error: &sqlx::Error) -> String {
    let Some(db) = error.as_database_error() else {
        return error.to_string();
    };
    match db.constraint() {
        Some("journalists_organization_id_fkey") | Some("articles_organization_id_fkey") => {
            "organization_id names no organization".into()
        }
        Some("articles_journalist_id_fkey") => "journalist_id names no journalist".into(),
        _ => db.message().to_owned(),
    }
}

/// A batch of one kind waiting to be written, with the line number of each row.
struct Pending<T> {
    rows: Vec<(usize, T)>,
}

trait Upsert: Clone + Sized {
    async fn upsert(pool: &PgPool, rows: &[Self]) -> Result<UpsertCounts, sqlx::Error>;
}

impl Upsert for OrganizationRecord {
    async fn upsert(pool: &PgPool, rows: &[Self]) -> Result<UpsertCounts, sqlx::Error> {
        upsert_organizations(pool, rows).await
    }
}
impl Upsert for JournalistRecord {
    async fn upsert(pool: &PgPool, rows: &[Self]) -> Result<UpsertCounts, sqlx::Error> {
        upsert_journalists(pool, rows).await
    }
}
impl Upsert for ArticleRecord {
    async fn upsert(pool: &PgPool, rows: &[Self]) -> Result<UpsertCounts, sqlx::Error> {
        upsert_articles(pool, rows).await
    }
}

impl<T: Upsert> Pending<T> {
    /// Writes the batch; on failure, row by row, reporting the rows that fail.
    async fn flush(
        &mut self,
        pool: &PgPool,
        counts: &mut UpsertCounts,
        bad: &mut Vec<BadLine>,
    ) -> anyhow::Result<()> {
        if self.rows.is_empty() {
            return Ok(());
        }
        let records: Vec<T> = self.rows.iter().map(|(_, r)| r.clone()).collect();
        match T::upsert(pool, &records).await {
            Ok(done) => counts.add(done),
            Err(error) if shared_auth::pg::pool::is_unavailable(&error) => return Err(error.into()),
            Err(_) => {
                for (line, record) in &self.rows {
                    match T::upsert(pool, std::slice::from_ref(record)).await {
                        Ok(done) => counts.add(done),
                        Err(error) if shared_auth::pg::pool::is_unavailable(&error) => {
                            return Err(error.into());
                        }
                        Err(error) => bad.push(BadLine {
                            line: *line,
                            reason: reason_of(&error),
                        }),
                    }
                }
            }
        }
        self.rows.clear();
        Ok(())
    }
}

fn progress_bar(total: u64, visible: bool) -> ProgressBar {
    let target = if visible {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let bar = ProgressBar::with_draw_target(Some(total), target);
    if let Ok(style) =
        ProgressStyle::with_template("{msg:>13} [{bar:40}] {bytes}/{total_bytes} ({eta} left)")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// Imports `path` as the pipeline role (`news_pipeline`).
pub async fn import(
    pipeline_url: &str,
    path: &Path,
    show_progress: bool,
) -> anyhow::Result<ImportSummary> {
    let pool = db::connect(pipeline_url, 2, "news-service-import").await?;
    let size = std::fs::metadata(path)?.len();
    let bar = progress_bar(size * 3, show_progress);
    let mut summary = ImportSummary::default();
    for (pass, kind) in [Kind::Organization, Kind::Journalist, Kind::Article]
        .into_iter()
        .enumerate()
    {
        bar.set_message(format!("{kind:?}s").to_lowercase());
        import_pass(&pool, path, kind, pass == 0, &bar, &mut summary).await?;
    }
    bar.finish_and_clear();
    summary.bad_lines.sort_by_key(|b| b.line);
    for bad in &summary.bad_lines {
        eprintln!("line {}: {}", bad.line, bad.reason);
    }
    pool.close().await;
    Ok(summary)
}

/// One pass over the file, writing the rows of `kind`. Syntax errors are reported on the first
/// pass only; a row's own validation only in its kind's pass, so each bad line is named once.
async fn import_pass(
    pool: &PgPool,
    path: &Path,
    kind: Kind,
    first_pass: bool,
    bar: &ProgressBar,
    summary: &mut ImportSummary,
) -> anyhow::Result<()> {
    let reader = BufReader::new(File::open(path)?);
    let mut organizations = Pending { rows: Vec::new() };
    let mut journalists = Pending { rows: Vec::new() };
    let mut articles = Pending { rows: Vec::new() };
    let mut bad = Vec::new();
    let mut counts = UpsertCounts::default();
    for (index, line) in reader.lines().enumerate() {
        let line_number = index + 1;
        let line = line?;
        bar.inc(line.len() as u64 + 1);
        if first_pass {
            summary.lines = line_number;
        }
        if line.trim().is_empty() {
            continue;
        }
        let record: Record = match serde_json::from_str(&line) {
            Ok(record) => record,
            Err(error) => {
                if first_pass {
                    bad.push(BadLine {
                        line: line_number,
                        reason: format!("not a valid record: {error}"),
                    });
                }
                continue;
            }
        };
        if record.kind() != kind {
            continue;
        }
        if let Err(reason) = record.validate() {
            bad.push(BadLine {
                line: line_number,
                reason,
            });
            continue;
        }
        match record {
            Record::Organization(r) => organizations.rows.push((line_number, r)),
            Record::Journalist(r) => journalists.rows.push((line_number, r)),
            Record::Article(r) => articles.rows.push((line_number, r)),
        }
        if organizations.rows.len() + journalists.rows.len() + articles.rows.len() >= BATCH {
            organizations.flush(pool, &mut counts, &mut bad).await?;
            journalists.flush(pool, &mut counts, &mut bad).await?;
            articles.flush(pool, &mut counts, &mut bad).await?;
        }
    }
    organizations.flush(pool, &mut counts, &mut bad).await?;
    journalists.flush(pool, &mut counts, &mut bad).await?;
    articles.flush(pool, &mut counts, &mut bad).await?;
    match kind {
        Kind::Organization => summary.organizations = counts,
        Kind::Journalist => summary.journalists = counts,
        Kind::Article => summary.articles = counts,
    }
    summary.bad_lines.extend(bad);
    Ok(())
}
