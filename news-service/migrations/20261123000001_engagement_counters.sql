-- Engagement counts kept in the database (API.md section 4, "Counts at any size"): readers get
-- like/bookmark/comment/follower counts by summing a few counter rows, never by counting the
-- engagement rows, so a count costs the same at 0 and at 10,000,000.
--
-- Shape. One row per (target, slot), up to 16 slots; a count is the sum of its target's slots.
-- A write adds its delta to ONE slot: for a single target (every call of the service) the first
-- slot no other transaction holds (SKIP LOCKED), else a random one created on first use, so
-- concurrent likers of one hot article update different rows instead of queueing behind one row
-- lock held until each commit. (Random slots alone left the hot-article bench at 0.4-0.9x of
-- spread likes; taking a free slot kept it at 0.85-0.9x.) A slot may go negative (a like added
-- in slot 3 and removed in slot 9); only the sum means anything.
--
-- Exact whoever writes. Statement-level AFTER triggers with transition tables fire in the writing
-- transaction for every writer (the service as news_app, an operator or a bulk load as
-- news_owner, a cascade from a deleted article or parent comment), and add per target the number
-- of rows the statement inserted minus those it deleted: a bulk INSERT ... SELECT of a million
-- rows is one grouped upsert, not a million. An UPDATE that moves rows to another target is one
-- delta query over both transition tables. TRUNCATE zeroes the counter.
--
-- Deadlocks. A statement upserts its targets in target order with one slot per target, so two
-- statements take counter row locks in the same global order; the single-target path never
-- waits (SKIP LOCKED) before falling back to that upsert.
--
-- Cascades. Deleting an article (journalist, organisation) deletes its counter rows through the
-- foreign key and its engagement rows through theirs; the engagement triggers then skip targets
-- that no longer exist, whatever order the cascades fire in, so a delete never recreates a
-- counter row for a gone target (which the foreign key would refuse).
--
-- Privileges. The trigger functions are SECURITY DEFINER, owned by news_owner with a fixed
-- search_path, so news_app needs (and has) only SELECT on the counter tables.
--
-- Backfill: the next migration, in its own transaction (see there for why).

CREATE TABLE article_stats (
    article_id     text NOT NULL REFERENCES articles (id) ON DELETE CASCADE,
    slot           smallint NOT NULL CHECK (slot BETWEEN 0 AND 15),
    like_count     bigint NOT NULL DEFAULT 0,
    bookmark_count bigint NOT NULL DEFAULT 0,
    comment_count  bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (article_id, slot)
);

CREATE TABLE journalist_stats (
    journalist_id  text NOT NULL REFERENCES journalists (id) ON DELETE CASCADE,
    slot           smallint NOT NULL CHECK (slot BETWEEN 0 AND 15),
    follower_count bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (journalist_id, slot)
);

CREATE TABLE organization_stats (
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    slot            smallint NOT NULL CHECK (slot BETWEEN 0 AND 15),
    follower_count  bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (organization_id, slot)
);

-- Counter rows change on every like: leave room on the page for HOT updates.
ALTER TABLE article_stats SET (fillfactor = 70);
ALTER TABLE journalist_stats SET (fillfactor = 70);
ALTER TABLE organization_stats SET (fillfactor = 70);

GRANT SELECT ON article_stats, journalist_stats, organization_stats TO news_app, news_pipeline;

-- The trigger function of every engagement table. Arguments (static identifiers of this schema,
-- given by the CREATE TRIGGER statements below): counter table, target table, target column,
-- counter column. Transition tables are `new_rows` / `old_rows`.
CREATE FUNCTION count_engagement() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = news, pg_temp AS $fn$
DECLARE
    stats     text := TG_ARGV[0];
    targets   text := TG_ARGV[1];
    target    text := TG_ARGV[2];
    counter   text := TG_ARGV[3];
    deltas    text;
    ids       text[];
    amounts   bigint[];
    free_slot smallint;
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        EXECUTE format('UPDATE %1$I SET %2$I = 0 WHERE %2$I <> 0', stats, counter);
        RETURN NULL;
    END IF;
    deltas := CASE TG_OP
        WHEN 'INSERT' THEN format('SELECT %I AS target, 1 AS delta FROM new_rows', target)
        WHEN 'DELETE' THEN format('SELECT %I AS target, -1 AS delta FROM old_rows', target)
        ELSE format('SELECT %1$I AS target, 1 AS delta FROM new_rows '
                    'UNION ALL SELECT %1$I, -1 FROM old_rows', target)
    END;
    -- Net change per target, in target order; targets deleted in this statement (a cascade) are
    -- left out: their counter rows are gone or going with them.
    EXECUTE format(
        $sql$
        SELECT array_agg(d.target ORDER BY d.target), array_agg(d.delta ORDER BY d.target)
        FROM (SELECT target, sum(delta)::bigint AS delta FROM (%1$s) r GROUP BY target) d
        WHERE d.delta <> 0 AND EXISTS (SELECT 1 FROM %2$I t WHERE t.id = d.target)
        $sql$,
        deltas, targets)
    INTO ids, amounts;
    IF ids IS NULL THEN
        RETURN NULL;
    END IF;
    -- One target (every call of the service): take a slot no other transaction holds, so
    -- concurrent likers of one article do not wait for each other while slots are free.
    IF cardinality(ids) = 1 THEN
        EXECUTE format('SELECT slot FROM %1$I WHERE %2$I = $1 LIMIT 1 FOR UPDATE SKIP LOCKED',
                       stats, target)
        INTO free_slot USING ids[1];
        IF free_slot IS NOT NULL THEN
            EXECUTE format('UPDATE %1$I SET %3$I = %3$I + $3 WHERE %2$I = $1 AND slot = $2',
                           stats, target, counter)
            USING ids[1], free_slot, amounts[1];
            RETURN NULL;
        END IF;
    END IF;
    -- Otherwise (no free slot yet, or many targets): a random slot per target, created on first
    -- use, upserted in target order.
    EXECUTE format(
        $sql$
        INSERT INTO %1$I AS s (%2$I, slot, %3$I)
        SELECT d.target, floor(random() * 16)::smallint, d.delta
        FROM unnest($1, $2) AS d (target, delta)
        ORDER BY d.target
        ON CONFLICT (%2$I, slot) DO UPDATE SET %3$I = s.%3$I + excluded.%3$I
        $sql$,
        stats, target, counter)
    USING ids, amounts;
    RETURN NULL;
END
$fn$;
REVOKE ALL ON FUNCTION count_engagement() FROM PUBLIC;

CREATE TRIGGER likes_count_insert AFTER INSERT ON likes
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION count_engagement('article_stats', 'articles', 'article_id', 'like_count');
CREATE TRIGGER likes_count_delete AFTER DELETE ON likes
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT
    EXECUTE FUNCTION count_engagement('article_stats', 'articles', 'article_id', 'like_count');
CREATE TRIGGER likes_count_update AFTER UPDATE ON likes
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION count_engagement('article_stats', 'articles', 'article_id', 'like_count');
CREATE TRIGGER likes_count_truncate AFTER TRUNCATE ON likes FOR EACH STATEMENT
    EXECUTE FUNCTION count_engagement('article_stats', 'articles', 'article_id', 'like_count');

CREATE TRIGGER bookmarks_count_insert AFTER INSERT ON bookmarks
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION count_engagement('article_stats', 'articles', 'article_id', 'bookmark_count');
CREATE TRIGGER bookmarks_count_delete AFTER DELETE ON bookmarks
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT
    EXECUTE FUNCTION count_engagement('article_stats', 'articles', 'article_id', 'bookmark_count');
CREATE TRIGGER bookmarks_count_update AFTER UPDATE ON bookmarks
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION count_engagement('article_stats', 'articles', 'article_id', 'bookmark_count');
CREATE TRIGGER bookmarks_count_truncate AFTER TRUNCATE ON bookmarks FOR EACH STATEMENT
    EXECUTE FUNCTION count_engagement('article_stats', 'articles', 'article_id', 'bookmark_count');

CREATE TRIGGER comments_count_insert AFTER INSERT ON comments
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION count_engagement('article_stats', 'articles', 'article_id', 'comment_count');
CREATE TRIGGER comments_count_delete AFTER DELETE ON comments
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT
    EXECUTE FUNCTION count_engagement('article_stats', 'articles', 'article_id', 'comment_count');
CREATE TRIGGER comments_count_update AFTER UPDATE ON comments
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION count_engagement('article_stats', 'articles', 'article_id', 'comment_count');
CREATE TRIGGER comments_count_truncate AFTER TRUNCATE ON comments FOR EACH STATEMENT
    EXECUTE FUNCTION count_engagement('article_stats', 'articles', 'article_id', 'comment_count');

CREATE TRIGGER journalist_follows_count_insert AFTER INSERT ON journalist_follows
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION count_engagement('journalist_stats', 'journalists', 'journalist_id', 'follower_count');
CREATE TRIGGER journalist_follows_count_delete AFTER DELETE ON journalist_follows
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT
    EXECUTE FUNCTION count_engagement('journalist_stats', 'journalists', 'journalist_id', 'follower_count');
CREATE TRIGGER journalist_follows_count_update AFTER UPDATE ON journalist_follows
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION count_engagement('journalist_stats', 'journalists', 'journalist_id', 'follower_count');
CREATE TRIGGER journalist_follows_count_truncate AFTER TRUNCATE ON journalist_follows FOR EACH STATEMENT
    EXECUTE FUNCTION count_engagement('journalist_stats', 'journalists', 'journalist_id', 'follower_count');

CREATE TRIGGER organization_follows_count_insert AFTER INSERT ON organization_follows
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION count_engagement('organization_stats', 'organizations', 'organization_id', 'follower_count');
CREATE TRIGGER organization_follows_count_delete AFTER DELETE ON organization_follows
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT
    EXECUTE FUNCTION count_engagement('organization_stats', 'organizations', 'organization_id', 'follower_count');
CREATE TRIGGER organization_follows_count_update AFTER UPDATE ON organization_follows
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION count_engagement('organization_stats', 'organizations', 'organization_id', 'follower_count');
CREATE TRIGGER organization_follows_count_truncate AFTER TRUNCATE ON organization_follows FOR EACH STATEMENT
    EXECUTE FUNCTION count_engagement('organization_stats', 'organizations', 'organization_id', 'follower_count');

-- Recount: for each counter, one statement compares count(*) of the rows with the sum of the
-- counter rows per target, under ONE snapshot, and adds the difference to slot 0. Every committed
-- transaction changed rows and counters together, so the difference seen in one snapshot is
-- exactly the drift, and adding it (rather than overwriting) composes with the deltas of
-- transactions still in flight: it is safe alongside live writes and takes no table lock (only
-- the row locks of the slot-0 rows it fixes, in target order). Returns the drift it fixed per
-- counter: how many targets were off, and the sum of |difference|.
CREATE FUNCTION recount_engagement()
RETURNS TABLE (counter text, targets_fixed bigint, rows_drifted bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = news, pg_temp AS $fn$
DECLARE
    c record;
BEGIN
    FOR c IN
        SELECT * FROM (VALUES
            ('like_count', 'likes', 'article_stats', 'articles', 'article_id'),
            ('bookmark_count', 'bookmarks', 'article_stats', 'articles', 'article_id'),
            ('comment_count', 'comments', 'article_stats', 'articles', 'article_id'),
            ('journalist follower_count', 'journalist_follows', 'journalist_stats', 'journalists',
             'journalist_id'),
            ('organization follower_count', 'organization_follows', 'organization_stats',
             'organizations', 'organization_id')
        ) AS v (name, edges, stats, targets, target)
    LOOP
        RETURN QUERY EXECUTE format(
            $sql$
            WITH truth AS (SELECT %4$I AS target, count(*) AS n FROM %1$I GROUP BY 1),
            kept AS (SELECT %4$I AS target, sum(%5$I)::bigint AS n FROM %2$I GROUP BY 1),
            drift AS (
                SELECT coalesce(t.target, k.target) AS target,
                       coalesce(t.n, 0) - coalesce(k.n, 0) AS delta
                FROM truth t FULL JOIN kept k ON k.target = t.target
                WHERE coalesce(t.n, 0) <> coalesce(k.n, 0)
            ),
            fixed AS (
                INSERT INTO %2$I AS s (%4$I, slot, %5$I)
                SELECT d.target, 0, d.delta FROM drift d
                WHERE EXISTS (SELECT 1 FROM %3$I x WHERE x.id = d.target)
                ORDER BY d.target
                ON CONFLICT (%4$I, slot) DO UPDATE SET %5$I = s.%5$I + excluded.%5$I
            )
            SELECT %6$L::text, count(*), coalesce(sum(abs(delta)), 0)::bigint FROM drift
            $sql$,
            c.edges, c.stats, c.targets, c.target,
            CASE WHEN c.stats = 'article_stats' THEN c.name ELSE 'follower_count' END,
            c.name);
    END LOOP;
END
$fn$;
REVOKE ALL ON FUNCTION recount_engagement() FROM PUBLIC;
-- `news-service recount` runs as the pipeline role (or the owner).
GRANT EXECUTE ON FUNCTION recount_engagement() TO news_pipeline;
