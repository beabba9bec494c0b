-- The phrases the catalogue moved to another language before migration 20261129600001: their
-- learners' states, due-day counts and `phrases_started` are brought to the phrase's language, as
-- that migration's trigger does for every move from now on. A migration of its own so that its
-- scan of `phrase_states` (0.55 s for the bench's 1,000,000 states on 2 cores; no index leads with
-- `phrase_id`) runs after that migration's locks are released: readers never wait for it, and it
-- takes only the row locks of the learners whose states it moves.
SELECT phrase_states_follow_phrases(ARRAY(
    SELECT DISTINCT s.phrase_id FROM phrase_states s JOIN phrases p ON p.id = s.phrase_id
     WHERE s.language_code <> p.language_code));
