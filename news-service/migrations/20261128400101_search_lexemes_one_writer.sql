-- The lexeme counts (migration search_lexemes) have one writer at a time: each statement's
-- trigger takes a transaction-scoped advisory lock before it writes a count, held to the commit.
--
-- Why: two statements writing articles at once deadlocked on the counts (PostgreSQL aborted
-- one: 40P01), although each wrote its counts in sorted order. An upsert of articles
-- (`INSERT ... ON CONFLICT DO UPDATE`, as the pipeline and the import write) fires the insert
-- trigger and then the update trigger, two passes in sorted order each, so one statement does
-- not lock the rows in one order; a delete's UPDATE ... FROM locked them in the join's order.
-- Every statement writes the row '' of each of its languages, so writers of one language
-- already waited for each other's commit: the lock adds the same wait between writers of
-- different languages, and statements that are each their own transaction (the pipeline's
-- and the import's) no longer deadlock. A transaction of several statements that writes
-- articles still holds the lock from its first one to its commit: a writer that locked one of
-- the articles it writes next and waits for the lock deadlocks with it (as within one language
-- before, through the row ''). Readers (searches) take no lock. The two-key form keeps it
-- apart from the service's one-key advisory locks (idempotency, engagement).

CREATE OR REPLACE FUNCTION articles_search_lexemes() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = news, pg_catalog
AS $$
BEGIN
    -- One writer of the counts at a time, until its commit (see the top of this file).
    PERFORM pg_advisory_xact_lock(hashtext('news'), hashtext('search_lexemes'));
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM search_lexemes;
        RETURN NULL;
    END IF;
    -- Each branch names only the transition tables its trigger declares.
    IF TG_OP = 'INSERT' THEN
        WITH delta AS MATERIALIZED (
            SELECT a.language, l.lexeme, count(*) AS n
              FROM written a,
                   unnest(array_prepend('', tsvector_to_array(a.search_vector))) AS l (lexeme)
             GROUP BY 1, 2
        )
        INSERT INTO search_lexemes (language, lexeme, articles)
        SELECT language, lexeme, n FROM delta
         ORDER BY language COLLATE "C", lexeme COLLATE "C"
        ON CONFLICT (language, lexeme)
        DO UPDATE SET articles = search_lexemes.articles + excluded.articles;
    ELSIF TG_OP = 'DELETE' THEN
        WITH delta AS MATERIALIZED (
            SELECT a.language, l.lexeme, count(*) AS n
              FROM previous a,
                   unnest(array_prepend('', tsvector_to_array(a.search_vector))) AS l (lexeme)
             GROUP BY 1, 2
        )
        UPDATE search_lexemes s SET articles = s.articles - d.n
          FROM (SELECT * FROM delta ORDER BY language COLLATE "C", lexeme COLLATE "C") d
         WHERE s.language = d.language AND s.lexeme = d.lexeme;
    ELSE
        WITH delta AS MATERIALIZED (
            SELECT language, lexeme, sum(n) AS n
              FROM (SELECT a.language, l.lexeme, 1 AS n
                      FROM written a,
                           unnest(array_prepend('', tsvector_to_array(a.search_vector))) AS l (lexeme)
                    UNION ALL
                    SELECT a.language, l.lexeme, -1
                      FROM previous a,
                           unnest(array_prepend('', tsvector_to_array(a.search_vector))) AS l (lexeme)) AS c
             GROUP BY 1, 2
            HAVING sum(n) <> 0
        )
        INSERT INTO search_lexemes (language, lexeme, articles)
        SELECT language, lexeme, n FROM delta
         ORDER BY language COLLATE "C", lexeme COLLATE "C"
        ON CONFLICT (language, lexeme)
        DO UPDATE SET articles = search_lexemes.articles + excluded.articles;
    END IF;
    RETURN NULL;
END
$$;
