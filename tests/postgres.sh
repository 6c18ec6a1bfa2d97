#!/usr/bin/env bash
# Makes sure the PostgreSQL the SQL tests use answers at 127.0.0.1:5432 with a database `test` that the
# current user reaches without a password (the tests' default URL: postgresql+asyncpg://$USER@127.0.0.1:5432/test).
# Installs Debian's postgresql when missing, starts the cluster, creates the role and the database. Idempotent:
# a server that already answers is left as it is. Set DISPATCHER_TEST_PG_URL to use another server instead.
set -euo pipefail

if [ -n "${DISPATCHER_TEST_PG_URL:-}" ] && [[ "$DISPATCHER_TEST_PG_URL" != *"@127.0.0.1:5432/test" ]]; then
  echo "tests/postgres.sh: DISPATCHER_TEST_PG_URL names another server; leaving PostgreSQL alone"
  exit 0
fi

user=$(id -un)
answers() { (echo >/dev/tcp/127.0.0.1/5432) 2>/dev/null; }
as_postgres() { if [ "$user" = postgres ]; then "$@"; else su postgres -c "$(printf '%q ' "$@")"; fi; }
sql() { as_postgres psql -v ON_ERROR_STOP=1 -qtAc "$1"; }

if ! command -v pg_ctlcluster >/dev/null; then
  if [ "$(id -u)" != 0 ]; then
    echo "tests/postgres.sh: PostgreSQL is not installed and this user cannot install it (apt-get install postgresql)" >&2
    exit 1
  fi
  echo "tests/postgres.sh: installing PostgreSQL from Debian's packages"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null \
    || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null; }
fi

version=$(pg_lsclusters -h | awk 'NR==1 {print $1}')
cluster=$(pg_lsclusters -h | awk 'NR==1 {print $2}')
if [ -z "$version" ]; then
  version=$(basename "$(printf "%s\n" /usr/lib/postgresql/* | sort -V | tail -1)")
  cluster=main
  pg_createcluster "$version" "$cluster" >/dev/null
fi
hba=/etc/postgresql/$version/$cluster/pg_hba.conf
# Loopback connections without a password, as the tests' URL has none (a test machine only).
if ! grep -q '^host all all 127.0.0.1/32 trust' "$hba"; then
  sed -i '1i host all all 127.0.0.1/32 trust' "$hba"
  if answers; then pg_ctlcluster "$version" "$cluster" reload; fi
fi
if ! answers; then
  pg_ctlcluster "$version" "$cluster" start
fi
for _ in $(seq 1 50); do answers && break; sleep 0.2; done
answers || { echo "tests/postgres.sh: PostgreSQL did not start; see /var/log/postgresql/" >&2; exit 1; }

if [ "$(sql "select 1 from pg_roles where rolname = '$user'")" != 1 ]; then
  sql "create role \"$user\" login superuser"
fi
if [ "$(sql "select 1 from pg_database where datname = 'test'")" != 1 ]; then
  sql "create database test owner \"$user\""
fi
echo "tests/postgres.sh: PostgreSQL $version answers at 127.0.0.1:5432/test for $user"
