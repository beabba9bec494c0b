//! The curated catalogue's bulk upserts: languages, phrases and their translations, as the
//! upstream pipeline writes them. The service's runtime role only reads these tables; the demo
//! `seed` runs these as `lingo_pipeline`. Each statement goes by key through UNNEST arrays and
//! leaves a row untouched when nothing changed, so a second seed changes nothing.

use sqlx::PgExecutor;

use crate::error::Result;

/// Languages by `code`, with their `name`s.
pub async fn upsert_languages(
    db: impl PgExecutor<'_>,
    codes: &[&str],
    names: &[&str],
) -> Result<()> {
    sqlx::query!(
        r#"INSERT INTO languages (code, name) SELECT * FROM UNNEST($1::text[], $2::text[])
         ON CONFLICT (code) DO UPDATE SET name = EXCLUDED.name
         WHERE languages.name IS DISTINCT FROM EXCLUDED.name"#,
        codes as &[&str],
        names as &[&str],
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Phrases by `id`, with their text and their own language.
pub async fn upsert_phrases(
    db: impl PgExecutor<'_>,
    ids: &[String],
    texts: &[&str],
    languages: &[&str],
) -> Result<()> {
    sqlx::query!(
        r#"INSERT INTO phrases (id, text, language_code)
         SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[])
         ON CONFLICT (id) DO UPDATE SET
           text = EXCLUDED.text, language_code = EXCLUDED.language_code, updated_at = now()
         WHERE (phrases.text, phrases.language_code)
               IS DISTINCT FROM (EXCLUDED.text, EXCLUDED.language_code)"#,
        ids,
        texts as &[&str],
        languages as &[&str],
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Translations by (phrase, language), with their text.
pub async fn upsert_translations(
    db: impl PgExecutor<'_>,
    phrase_ids: &[String],
    languages: &[&str],
    texts: &[&str],
) -> Result<()> {
    sqlx::query!(
        r#"INSERT INTO phrase_translations (phrase_id, language_code, text)
         SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[])
         ON CONFLICT (phrase_id, language_code) DO UPDATE SET text = EXCLUDED.text
         WHERE phrase_translations.text IS DISTINCT FROM EXCLUDED.text"#,
        phrase_ids,
        languages as &[&str],
        texts as &[&str],
    )
    .execute(db)
    .await?;
    Ok(())
}
