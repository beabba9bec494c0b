-- Roles and schemas of the system (README.md, "Database"). Idempotent: run it on every start.
-- Table-level grants live in each service's migrations, next to the tables they cover.
--
--   <svc>_owner     owns schema <svc> and runs its migrations
--   <svc>_app       the service's runtime role: SELECT on curated/analytics tables, DML only on
--                   the tables the service writes
--   <svc>_pipeline  the upstream writer (curation / analytics pipeline); seeding and imports
--
-- Passwords are not set here: local clusters trust loopback; compose and Kubernetes set them
-- from secrets (deploy/postgres/set-passwords.sh).

-- Serialise concurrent bootstraps (parallel tests): CREATE ROLE is cluster-wide.
SELECT pg_advisory_xact_lock(727274);

DO $$
DECLARE
    role_name text;
BEGIN
    FOREACH role_name IN ARRAY ARRAY['lingo_owner', 'lingo_app', 'lingo_pipeline',
                                     'news_owner', 'news_app', 'news_pipeline'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = role_name) THEN
            EXECUTE format('CREATE ROLE %I LOGIN', role_name);
        END IF;
    END LOOP;
END
$$;

CREATE SCHEMA IF NOT EXISTS lingo AUTHORIZATION lingo_owner;
CREATE SCHEMA IF NOT EXISTS news AUTHORIZATION news_owner;

-- Neither service reads the other's schema; nobody creates objects in public.
REVOKE ALL ON SCHEMA lingo FROM PUBLIC;
REVOKE ALL ON SCHEMA news FROM PUBLIC;
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA lingo TO lingo_app, lingo_pipeline;
GRANT USAGE ON SCHEMA news TO news_app, news_pipeline;

-- Text search helpers of both services' searches (contrib extensions, shipped with PostgreSQL
-- and its Docker images): creating an extension needs more than a schema owner has, so they are
-- installed here, once per database, into schema public (every role may use it, none may create
-- in it). The services' migrations check for them and use them qualified (public.unaccent).
CREATE EXTENSION IF NOT EXISTS unaccent SCHEMA public;
CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public;

ALTER ROLE lingo_owner SET search_path = lingo;
ALTER ROLE lingo_app SET search_path = lingo;
ALTER ROLE lingo_pipeline SET search_path = lingo;
ALTER ROLE news_owner SET search_path = news;
ALTER ROLE news_app SET search_path = news;
ALTER ROLE news_pipeline SET search_path = news;
