-- no-transaction
-- Fills search_vector (and the search word and language lists) for the articles that existed
-- before migration `search`, in batches of 2,000 by id, each committed on its own: readers are
-- never blocked, and a writer waits at most for one batch's row locks. Setting a column to itself
-- fires the BEFORE trigger that computes the vector and the statement trigger that adds the
-- words. Re-running is harmless (only rows still without a vector are touched); sqlx runs this
-- file outside a transaction ("-- no-transaction" above), which lets the block COMMIT.
-- Then validates the language check without blocking readers or writers.
DO $$
DECLARE
    last_id text := '';
    batch_last text;
BEGIN
    LOOP
        SELECT max(id) INTO batch_last
          FROM (SELECT id FROM news.articles WHERE id > last_id ORDER BY id LIMIT 2000) AS batch;
        EXIT WHEN batch_last IS NULL;
        UPDATE news.articles SET language = language
         WHERE id > last_id AND id <= batch_last AND search_vector IS NULL;
        last_id := batch_last;
        COMMIT;
    END LOOP;
    ALTER TABLE news.articles VALIDATE CONSTRAINT articles_language_check;
END
$$;
