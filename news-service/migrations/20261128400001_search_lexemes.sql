-- How many articles of each language hold each lexeme (docs/news.md, "GET /v1/news/search",
-- "How it works"): what a search chooses its plan by.
--
-- Why: PostgreSQL estimates how many articles a tsquery matches from the statistics of the
-- whole `search_vector` column, over every language. A lexeme frequent in one language's
-- articles is then taken as frequent in the other's too (`carrer`: the Spanish stem of
-- `carrera`, in 1% of the articles, and the English stem of the misspelling `carrer`, in
-- none): PostgreSQL walks the newest-first index looking for English matches that do not
-- exist, through every article (3-5 s on a million). It also costs a query of many rare
-- alternatives as one test per row, and walks for them. The service instead looks the query's
-- lexemes up here, per language, and picks the plan itself: the GIN index and a sort when few
-- articles can match, the newest-first walk when many do (store/search.rs).
--
-- search_lexemes  (language, lexeme) -> the number of articles of that language whose
--                 search_vector holds the lexeme; lexeme '' (no real lexeme is empty) holds
--                 the number of articles of the language.
--
-- Exact whoever writes: statement-level AFTER triggers with transition tables, as the
-- engagement counters (migration engagement_counters), add per (language, lexeme) the rows a
-- statement wrote minus those it removed, in one grouped upsert per statement (an update that
-- leaves a vector as it was adds nothing). Two writers' upserts take the rows' locks in the
-- same (sorted) order, so one waits for the other instead of the two deadlocking; a writer of
-- articles waits for another's commit on the lexemes both wrote (articles are written by the
-- curated pipeline and imports, not by readers).
--
-- Locks: the triggers are created and the counts filled from the existing articles in this
-- one transaction. CREATE TRIGGER holds a SHARE ROW EXCLUSIVE lock until the commit: readers
-- (the service) go on, writers of articles wait for the fill (on the bench's million articles:
-- see docs/news.md). A writer that commits before this migration's snapshot is counted by the
-- fill, one after it by the triggers, none twice.

SET LOCAL lock_timeout = '10s';

CREATE TABLE search_lexemes (
    language text NOT NULL,
    lexeme   text NOT NULL,
    articles bigint NOT NULL,
    PRIMARY KEY (language, lexeme)
);

CREATE FUNCTION articles_search_lexemes() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = news, pg_catalog
AS $$
BEGIN
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

CREATE TRIGGER articles_search_lexemes_insert
    AFTER INSERT ON articles REFERENCING NEW TABLE AS written
    FOR EACH STATEMENT EXECUTE FUNCTION articles_search_lexemes();
CREATE TRIGGER articles_search_lexemes_update
    AFTER UPDATE ON articles REFERENCING OLD TABLE AS previous NEW TABLE AS written
    FOR EACH STATEMENT EXECUTE FUNCTION articles_search_lexemes();
CREATE TRIGGER articles_search_lexemes_delete
    AFTER DELETE ON articles REFERENCING OLD TABLE AS previous
    FOR EACH STATEMENT EXECUTE FUNCTION articles_search_lexemes();
CREATE TRIGGER articles_search_lexemes_truncate
    AFTER TRUNCATE ON articles
    FOR EACH STATEMENT EXECUTE FUNCTION articles_search_lexemes();

INSERT INTO search_lexemes (language, lexeme, articles)
SELECT a.language, l.lexeme, count(*)
  FROM articles a,
       unnest(array_prepend('', tsvector_to_array(a.search_vector))) AS l (lexeme)
 GROUP BY 1, 2;

GRANT SELECT ON search_lexemes TO news_app;

-- Statistics for the search's lookups: without them PostgreSQL took the counts table's lexeme
-- '' for a frequent value and scanned it, and search_languages (a few rows, which autovacuum
-- never analyses) for 1,360 rows, which made the lookup look costly enough to JIT-compile
-- (35 ms a search on the bench).
ANALYZE search_lexemes, search_languages;
