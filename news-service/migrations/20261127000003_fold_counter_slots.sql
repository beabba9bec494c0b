-- Folding counter slots back into one row (issue 34). The triggers of `engagement_counters` spread
-- a hot target's count over up to 16 slot rows so concurrent writers do not queue behind one row
-- lock; a read then sums them all. news-service folds them back in the background
-- (src/counter_fold.rs): per target, one short transaction moves the value of every other slot
-- into slot 0, so a hot article is read from one row again, like an idle one.
--
-- Exact at every snapshot. The fold is one statement in one transaction that deletes the extra
-- slot rows and adds exactly what it deleted (the DELETE's RETURNING, i.e. the versions it
-- removed) to slot 0: before its commit a reader sees the old rows, after it the folded row,
-- and the sum is the same. It folds only rows it holds locked, so no increment can land in a
-- row it is removing: a slot a writer holds (uncommitted) is skipped (SKIP LOCKED) and left for
-- a later pass, and a writer that comes for a slot the fold holds either takes another slot
-- (SKIP LOCKED in the trigger) or waits on it and, the row being gone, inserts it afresh
-- (INSERT ... ON CONFLICT). Slot 0 is taken first, waiting at most `lock_timeout` (100 ms,
-- below deadlock_timeout, so in any lock cycle the fold is the one that gives up, with 55P03,
-- and the caller tries that target again on a later pass); it is created when missing.
--
-- Recount (`recount_engagement`) adds the drift it sees in one snapshot to slot 0: a fold
-- leaves every snapshot's sum unchanged, so recount sees no drift from it, and both change
-- slot 0 by adding, under its row lock, so they compose in either order.
--
-- TRUNCATE of an engagement table zeroes its counter with one UPDATE over the counter rows;
-- that UPDATE cannot see a slot-0 row created by a fold that commits after it started, and
-- would leave the moved value in it. So a fold holds ACCESS SHARE on the engagement tables of
-- its counter table, as any reader of them does: it never overlaps a TRUNCATE (only ACCESS
-- EXCLUSIVE conflicts with it; writers are not affected).
--
-- Finding work. Everything not in slot 0 is work, so a partial index of the rows outside slot
-- 0 lists exactly the targets to fold, and an idle pass costs three empty index probes. A
-- target whose only row is in another slot (a bulk statement picks a random slot) is moved to
-- slot 0 once. Counter updates change no indexed column, so they stay HOT updates. The indexes
-- are built in the migration's transaction, a short SHARE lock on the counter tables (a few
-- rows per engaged target).
--
-- Privileges. SECURITY DEFINER like the triggers, owned by news_owner with a fixed search_path;
-- news_app may EXECUTE it (the service runs the folder) yet still has only SELECT on the counter
-- tables: a fold moves value between the slots of one target and cannot change any count.

CREATE INDEX article_stats_extra_slots ON article_stats (article_id) WHERE slot <> 0;
CREATE INDEX journalist_stats_extra_slots ON journalist_stats (journalist_id) WHERE slot <> 0;
CREATE INDEX organization_stats_extra_slots ON organization_stats (organization_id) WHERE slot <> 0;

-- Folds the slots of one target of `stats` (article_stats, journalist_stats or
-- organization_stats) into slot 0. Returns how many slot rows it folded (0: nothing to do, or
-- every extra slot is held by a writer right now). Raises 55P03 (lock_not_available) when slot
-- 0 or an engagement table stays locked longer than lock_timeout.
CREATE FUNCTION fold_counter_slots(stats text, target_id text) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = news, pg_temp SET lock_timeout = '100ms'
AS $fn$
DECLARE
    target   text;
    edges    text;
    counters text[];
    extra    smallint[];
BEGIN
    CASE stats
        WHEN 'article_stats' THEN
            target := 'article_id';
            edges := 'likes, bookmarks, comments';
            counters := ARRAY['like_count', 'bookmark_count', 'comment_count'];
        WHEN 'journalist_stats' THEN
            target := 'journalist_id';
            edges := 'journalist_follows';
            counters := ARRAY['follower_count'];
        WHEN 'organization_stats' THEN
            target := 'organization_id';
            edges := 'organization_follows';
            counters := ARRAY['follower_count'];
        ELSE
            RAISE EXCEPTION 'fold_counter_slots: % is not a counter table', stats
                USING ERRCODE = 'invalid_parameter_value';
    END CASE;
    -- Never alongside a TRUNCATE of the rows counted here (see above).
    EXECUTE 'LOCK TABLE ' || edges || ' IN ACCESS SHARE MODE';
    -- The kept row first, before holding any other slot of the target.
    EXECUTE format('SELECT 1 FROM %I WHERE %I = $1 AND slot = 0 FOR UPDATE', stats, target)
    USING target_id;
    -- The other slots that no transaction holds now.
    EXECUTE format(
        $sql$
        SELECT array_agg(slot) FROM (
            SELECT slot FROM %1$I WHERE %2$I = $1 AND slot <> 0 ORDER BY slot
            FOR UPDATE SKIP LOCKED) s
        $sql$,
        stats, target)
    INTO extra USING target_id;
    IF extra IS NULL THEN
        RETURN 0;
    END IF;
    -- Delete them and add what was deleted to slot 0, in one statement.
    EXECUTE format(
        $sql$
        WITH gone AS (DELETE FROM %1$I WHERE %2$I = $1 AND slot = ANY ($2) RETURNING %3$s)
        INSERT INTO %1$I AS s (%2$I, slot, %3$s)
        SELECT $1, 0, %4$s FROM gone
        ON CONFLICT (%2$I, slot) DO UPDATE SET %5$s
        $sql$,
        stats, target,
        (SELECT string_agg(quote_ident(c), ', ') FROM unnest(counters) c),
        (SELECT string_agg(format('sum(%I)', c), ', ') FROM unnest(counters) c),
        (SELECT string_agg(format('%1$I = s.%1$I + excluded.%1$I', c), ', ')
         FROM unnest(counters) c))
    USING target_id, extra;
    RETURN cardinality(extra);
END
$fn$;
REVOKE ALL ON FUNCTION fold_counter_slots(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fold_counter_slots(text, text) TO news_app, news_pipeline;
