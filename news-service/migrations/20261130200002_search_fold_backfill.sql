-- no-transaction
-- Computes again the search vectors that migration `search_fold` changes, and only those: the
-- articles whose texts hold a character beyond ASCII that the folding changes (a capital
-- Cyrillic or Greek letter, `ς`, a curly quote, a dash, a no-break space, ...), found by
-- comparing the texts folded as the vector now reads them with the texts lower-cased in ASCII
-- only. Setting the vector to NULL makes the row trigger compute it; the lexeme counts follow
-- through their triggers; the word list is left as it is (the texts do not change).
--
-- In batches of 2,000 articles by id, each committed on its own (as migration search_backfill):
-- readers are never blocked, and a writer waits at most for one batch's row locks. sqlx runs
-- this file outside a transaction ("-- no-transaction" above), which lets the block COMMIT.
-- Re-running it computes the same vectors again, harmlessly. The comparison reads every
-- article's texts once, as the first backfill did.
DO $$
DECLARE
    last_id text := '';
    batch_last text;
BEGIN
    LOOP
        SELECT max(id) INTO batch_last
          FROM (SELECT id FROM news.articles WHERE id > last_id ORDER BY id LIMIT 2000) AS batch;
        EXIT WHEN batch_last IS NULL;
        UPDATE news.articles a SET search_vector = NULL
         WHERE a.id > last_id AND a.id <= batch_last
           AND news.search_fold(a.title || ' ' || a.summary || ' ' || a.body)
               <> lower((a.title || ' ' || a.summary || ' ' || a.body) COLLATE "C");
        last_id := batch_last;
        COMMIT;
    END LOOP;
END
$$;
