-- Curated catalogue: organisations, journalists, articles.
-- Written only by the upstream curation pipeline (news_pipeline: seed, import); the runtime role
-- news_app may only read them (API.md section 4).

CREATE TABLE organizations (
    id   text PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 255),
    name text NOT NULL CHECK (length(name) >= 1),
    url  text NOT NULL
);
-- GET /organizations orders by name, ties by id.
CREATE INDEX organizations_name_idx ON organizations (name, id);

CREATE TABLE journalists (
    id              text PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 255),
    name            text NOT NULL CHECK (length(name) >= 1),
    organization_id text NOT NULL REFERENCES organizations (id)
);
-- GET /journalists orders by name, optionally filtered by organisation.
CREATE INDEX journalists_name_idx ON journalists (name, id);
CREATE INDEX journalists_organization_name_idx ON journalists (organization_id, name, id);

CREATE TABLE articles (
    id              text PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 255),
    title           text NOT NULL CHECK (length(title) >= 1),
    summary         text NOT NULL,
    body            text NOT NULL,
    url             text NOT NULL,
    published_at    timestamptz NOT NULL,
    organization_id text NOT NULL REFERENCES organizations (id),
    journalist_id   text NOT NULL REFERENCES journalists (id)
);
-- Newest first, ties by id descending: one index per list ordering and filter, so keyset pages
-- ((published_at, id) < cursor) are index range scans with no sort.
CREATE INDEX articles_published_idx ON articles (published_at DESC, id DESC);
CREATE INDEX articles_organization_published_idx
    ON articles (organization_id, published_at DESC, id DESC);
CREATE INDEX articles_journalist_published_idx
    ON articles (journalist_id, published_at DESC, id DESC);

GRANT SELECT ON organizations, journalists, articles TO news_app;
-- Upserts (INSERT ... ON CONFLICT DO UPDATE) need SELECT and UPDATE too; curated rows are never
-- deleted, so engagement rows never lose their target.
GRANT SELECT, INSERT, UPDATE ON organizations, journalists, articles TO news_pipeline;
