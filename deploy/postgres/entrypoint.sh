#!/bin/sh
# Entry point of the PostgreSQL image deploy/postgres/image-root.sh
# assembles. As root it gives the data directory to postgres and comes
# back as postgres; then, on an empty data directory, it creates the
# cluster with POSTGRES_USER and the password in POSTGRES_PASSWORD_FILE
# (password authentication over the network, scram-sha-256), creates
# POSTGRES_DB, and runs the server listening on every address of the
# container. The official image's other variables are not read.
set -eu
PATH=@PGBIN@:/usr/bin:/bin
PGDATA=${PGDATA:-/var/lib/postgresql/data}
if [ "${1:-}" != "--as-postgres" ]; then
  chown -R postgres:postgres "$PGDATA" /var/run/postgresql
  exec setpriv --reuid=postgres --regid=postgres --clear-groups "$0" --as-postgres
fi
: "${POSTGRES_USER:?}" "${POSTGRES_PASSWORD_FILE:?}" "${POSTGRES_DB:?}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$POSTGRES_PASSWORD_FILE" -E UTF8 --no-locale \
    --auth-local=trust --auth-host=scram-sha-256
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  if [ "$POSTGRES_DB" != postgres ]; then
    echo "CREATE DATABASE \"$POSTGRES_DB\" OWNER \"$POSTGRES_USER\"" | postgres --single -D "$PGDATA" postgres >/dev/null
  fi
fi
exec postgres -D "$PGDATA" -c listen_addresses='*'
