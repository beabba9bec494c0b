-- Tables the upstream analytics pipeline fills. The service reads them (stats on phrases,
-- recommendations) and must never write them: lingo_app gets SELECT and nothing more.

-- One row per time a learner was shown a phrase (raw events).
CREATE TABLE phrase_views (
    id         text PRIMARY KEY,
    phrase_id  text NOT NULL REFERENCES phrases (id) ON DELETE CASCADE,
    learner_id text NOT NULL,
    viewed_at  timestamptz NOT NULL,
    correct    boolean
);
CREATE INDEX phrase_views_phrase_id_idx ON phrase_views (phrase_id);
CREATE INDEX phrase_views_learner_id_idx ON phrase_views (learner_id, viewed_at);

-- Per learner and phrase: how often it was practised and answered correctly.
CREATE TABLE phrase_engagement (
    learner_id   text NOT NULL,
    phrase_id    text NOT NULL REFERENCES phrases (id) ON DELETE CASCADE,
    attempts     integer NOT NULL CHECK (attempts >= 0),
    correct      integer NOT NULL CHECK (correct >= 0 AND correct <= attempts),
    last_seen_at timestamptz NOT NULL,
    PRIMARY KEY (learner_id, phrase_id)
);
CREATE INDEX phrase_engagement_phrase_id_idx ON phrase_engagement (phrase_id);

-- What to study next, per learner, best (highest score) first.
CREATE TABLE phrase_recommendations (
    learner_id   text NOT NULL,
    phrase_id    text NOT NULL REFERENCES phrases (id) ON DELETE CASCADE,
    score        double precision NOT NULL,
    generated_at timestamptz NOT NULL,
    PRIMARY KEY (learner_id, phrase_id)
);
CREATE INDEX phrase_recommendations_rank_idx
    ON phrase_recommendations (learner_id, score DESC, phrase_id);

-- Pre-computed per-phrase statistics shown as `stats` on phrase items.
CREATE TABLE phrase_stats_cache (
    phrase_id     text PRIMARY KEY REFERENCES phrases (id) ON DELETE CASCADE,
    view_count    bigint NOT NULL CHECK (view_count >= 0),
    learner_count bigint NOT NULL CHECK (learner_count >= 0),
    accuracy      double precision CHECK (accuracy BETWEEN 0 AND 1),
    refreshed_at  timestamptz NOT NULL
);

GRANT SELECT ON phrase_views, phrase_engagement, phrase_recommendations, phrase_stats_cache
    TO lingo_app;
GRANT SELECT, INSERT, UPDATE, DELETE
    ON phrase_views, phrase_engagement, phrase_recommendations, phrase_stats_cache
    TO lingo_pipeline;
