#!/bin/sh
# First start of the database (docker-entrypoint-initdb.d): the owner and application roles, the owner
# owning the database. For an existing volume run the same as the superuser:
#   docker compose -p arena -f docker/compose.yaml exec postgres sh /docker-entrypoint-initdb.d/10-arena-roles.sh
set -eu
psql -v ON_ERROR_STOP=1 --username "${POSTGRES_USER:-postgres}" --dbname postgres \
  -v owner=arena_owner -v app=arena_app -v database="${POSTGRES_DB:-arena}" \
  -v owner_password="$ARENA_DB_OWNER_PASSWORD" -v app_password="$ARENA_DB_APP_PASSWORD" \
  -f /arena/pg_roles.sql
