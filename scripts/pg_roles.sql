-- The two PostgreSQL roles of a deployment, created idempotently (run as a superuser, any number of times):
--
--   owner  runs the migrations and owns every table (and the database); never used by the application.
--   app    what web, worker and beat connect as: no superuser, owns nothing, so it can neither switch
--          triggers off (session_replication_role, ALTER TABLE ... DISABLE TRIGGER), nor drop or alter
--          them or the vote log's columns. Its table privileges are granted after each migration by
--          `manage.py db_grants` (run as the owner): SELECT and INSERT only on the vote log.
--
--   psql -v ON_ERROR_STOP=1 -v owner=arena_owner -v app=arena_app \
--        [-v owner_password=...] [-v app_password=...] [-v database=arena] -f scripts/pg_roles.sql
--
-- Without a password variable a role's password is left as it is (local trust authentication).
\if :{?owner}
\else
  \set owner arena_owner
\endif
\if :{?app}
\else
  \set app arena_app
\endif

SELECT format('CREATE ROLE %I LOGIN', :'owner') WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'owner')
\gexec
SELECT format('CREATE ROLE %I LOGIN', :'app') WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'app')
\gexec
-- Whatever they were created with before: neither may bypass anything.
ALTER ROLE :"owner" LOGIN NOSUPERUSER NOCREATEROLE NOREPLICATION NOBYPASSRLS;
ALTER ROLE :"app" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;
\if :{?owner_password}
  ALTER ROLE :"owner" PASSWORD :'owner_password';
\endif
\if :{?app_password}
  ALTER ROLE :"app" PASSWORD :'app_password';
\endif

\if :{?database}
  -- The owner owns the database, hence its public schema (pg_database_owner, PostgreSQL 15+), where the
  -- migrations create tables; the app may connect and use the schema, not create in it.
  ALTER DATABASE :"database" OWNER TO :"owner";
  GRANT CONNECT ON DATABASE :"database" TO :"app";
  \connect :"database"
  REVOKE CREATE ON SCHEMA public FROM PUBLIC;
  GRANT USAGE ON SCHEMA public TO :"app";
\endif
