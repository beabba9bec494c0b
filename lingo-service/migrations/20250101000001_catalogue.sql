-- The curated catalogue: languages, phrases and their translations. The upstream pipeline
-- (lingo_pipeline) writes it; the service's runtime role (lingo_app) only reads it.

CREATE TABLE languages (
    code text PRIMARY KEY CHECK (length(code) BETWEEN 1 AND 35),
    name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200)
);

CREATE TABLE phrases (
    -- Identifiers are the pipeline's own: opaque strings.
    id            text PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 255),
    text          text NOT NULL,
    language_code text NOT NULL REFERENCES languages (code),
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
-- `GET /phrases?language=` filters on the phrase's language and orders by id.
CREATE INDEX phrases_language_code_id_idx ON phrases (language_code, id);

CREATE TABLE phrase_translations (
    phrase_id     text NOT NULL REFERENCES phrases (id) ON DELETE CASCADE,
    language_code text NOT NULL REFERENCES languages (code),
    text          text NOT NULL,
    PRIMARY KEY (phrase_id, language_code)
);

GRANT SELECT ON languages, phrases, phrase_translations TO lingo_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON languages, phrases, phrase_translations TO lingo_pipeline;
