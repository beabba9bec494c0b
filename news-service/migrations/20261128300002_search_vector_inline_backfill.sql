-- no-transaction
-- Rewrites the articles whose search_vector may be stored out of line, so that migration
-- `search_vector_inline`'s storage (MAIN: the vector in the row) applies to them too. Rows
-- whose values add up to less than about 2 kB were never moved out of line and are left alone.
--
-- `search_vector || ''` is the same vector as a new value (an unchanged value would keep its
-- TOAST pointer): the row trigger sees texts and vector unchanged and keeps it rather than
-- computing it again, and the word list's trigger sees no text changed; the row is written
-- anew with the vector in line (and the body moved out of line if the row needs the room).
--
-- In batches of 2,000 articles by id, each committed on its own (as migration search_backfill):
-- readers are never blocked, and a writer waits at most for one batch's row locks. sqlx runs
-- this file outside a transaction ("-- no-transaction" above), which lets the block COMMIT.
-- Re-running it rewrites the same rows again, harmlessly. On the bench's million articles it
-- rewrote 38% of them: see docs/news.md for how long it took.
DO $$
DECLARE
    last_id text := '';
    batch_last text;
BEGIN
    LOOP
        SELECT max(id) INTO batch_last
          FROM (SELECT id FROM news.articles WHERE id > last_id ORDER BY id LIMIT 2000) AS batch;
        EXIT WHEN batch_last IS NULL;
        UPDATE news.articles a SET search_vector = a.search_vector || ''::tsvector
         WHERE a.id > last_id AND a.id <= batch_last
           AND pg_column_size(a.id) + pg_column_size(a.title) + pg_column_size(a.summary)
               + pg_column_size(a.body) + pg_column_size(a.url) + pg_column_size(a.organization_id)
               + pg_column_size(a.journalist_id) + pg_column_size(a.language)
               + pg_column_size(a.search_vector) > 1900;
        last_id := batch_last;
        COMMIT;
    END LOOP;
END
$$;
