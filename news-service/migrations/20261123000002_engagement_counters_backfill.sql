-- Backfill of the counters created by the previous migration from the rows that already exist.
--
-- Its own migration, so its own transaction, after the triggers are committed: from then on every
-- write statement maintains the counters, and rows written before are not in them yet. The
-- recount (see the previous migration) takes one snapshot, finds exactly those rows as drift and
-- adds them, so no row is missed or counted twice however many writes run meanwhile, and no
-- engagement table is locked: writers wait only for the previous migration's short CREATE
-- TRIGGER locks, never for this scan. (On 1,000,000 likes it took the time given in README.md.)
-- Until it commits, counters read low; the service reading them must be deployed after `migrate`.
SELECT * FROM recount_engagement();
