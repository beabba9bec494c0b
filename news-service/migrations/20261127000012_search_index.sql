-- no-transaction
-- The GIN index search queries use, built CONCURRENTLY: readers and writers go on while it is
-- built. That cannot run inside a transaction, so this file holds this one statement and sqlx
-- runs it without one ("-- no-transaction" above). If a build is interrupted, PostgreSQL leaves
-- an INVALID index of this name: drop it (DROP INDEX CONCURRENTLY news.articles_search_idx)
-- and migrate again.
CREATE INDEX CONCURRENTLY IF NOT EXISTS articles_search_idx ON news.articles USING gin (search_vector);
