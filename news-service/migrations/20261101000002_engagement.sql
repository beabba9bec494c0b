-- Engagement: the only tables the runtime role writes.
-- Composite primary keys make a repeated like/bookmark/follow a no-op; every count shown to
-- readers is a COUNT over these rows (through the primary key's index), so it always equals
-- the rows it counts, whatever mix of concurrent calls produced them.

CREATE TABLE likes (
    article_id text NOT NULL REFERENCES articles (id) ON DELETE CASCADE,
    user_id    text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (article_id, user_id)
);

CREATE TABLE bookmarks (
    article_id text NOT NULL REFERENCES articles (id) ON DELETE CASCADE,
    user_id    text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (article_id, user_id)
);
-- GET /me/bookmarks: most recently bookmarked first.
CREATE INDEX bookmarks_user_recent_idx ON bookmarks (user_id, created_at DESC, article_id DESC);

CREATE TABLE journalist_follows (
    journalist_id text NOT NULL REFERENCES journalists (id) ON DELETE CASCADE,
    user_id       text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (journalist_id, user_id)
);
CREATE INDEX journalist_follows_user_idx ON journalist_follows (user_id, journalist_id);

CREATE TABLE organization_follows (
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id         text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, user_id)
);
CREATE INDEX organization_follows_user_idx ON organization_follows (user_id, organization_id);

-- Comments form threads. `path` is the materialised thread path: the ids (UUIDv7, time ordered,
-- 32 hex digits each) of the root ... this comment, joined by '.'. Fixed-width segments compared
-- byte-wise (COLLATE "C") put every comment right after its parent and siblings oldest first, so
-- a thread is one index range scan on (article_id, path).
CREATE TABLE comments (
    id         uuid PRIMARY KEY,
    article_id text NOT NULL REFERENCES articles (id) ON DELETE CASCADE,
    parent_id  uuid REFERENCES comments (id) ON DELETE CASCADE,
    author_id  text NOT NULL,
    text       text NOT NULL CHECK (length(text) BETWEEN 1 AND 10000),
    depth      smallint NOT NULL CHECK (depth BETWEEN 0 AND 10),
    path       text COLLATE "C" NOT NULL,
    created_at timestamptz NOT NULL,
    CHECK ((parent_id IS NULL) = (depth = 0))
);
CREATE UNIQUE INDEX comments_thread_idx ON comments (article_id, path);

-- Idempotency-Key records of POST /comments, per caller, kept 24 h.
CREATE TABLE idempotency_keys (
    caller_id    text NOT NULL,
    key          text NOT NULL,
    request_hash text NOT NULL,
    status       smallint NOT NULL,
    location     text,
    body         jsonb NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (caller_id, key)
);
CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (created_at);

GRANT SELECT, INSERT, DELETE ON likes, bookmarks, journalist_follows, organization_follows TO news_app;
GRANT SELECT, INSERT ON comments TO news_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON idempotency_keys TO news_app;
