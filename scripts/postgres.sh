#!/usr/bin/env bash
# Make sure a local PostgreSQL answers, for the PostgreSQL test pass (UHP_TEST_DATABASE=
# postgresql): as root, install Debian's postgresql when missing, start its cluster, and
# create the role the tests use (it may create and drop databases, nothing more). Prints
# nothing on success; exits 1 (saying why, loudly) when no cluster can start.
set -uo pipefail

ROLE=${UHP_TEST_POSTGRES_ROLE:-uhp_test}
PASSWORD=${UHP_TEST_POSTGRES_PASSWORD:-uhp_test}

if [[ $(id -u) -ne 0 ]]; then
  echo "scripts/postgres.sh: must run as root (installs and starts the cluster)" >&2
  exit 1
fi
if ! command -v pg_ctlcluster >/dev/null || ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
    postgresql >/dev/null
fi
version=$(ls /etc/postgresql | sort -n | tail -1)
pg_ctlcluster "$version" main start >/dev/null 2>&1 || true
for _ in $(seq 1 30); do
  su postgres -c "psql -qAtc 'SELECT 1'" >/dev/null 2>&1 && break
  sleep 1
done
if ! su postgres -c "psql -qAtc 'SELECT 1'" >/dev/null 2>&1; then
  echo "!!! PostgreSQL $version did not start: the PostgreSQL pass cannot run" >&2
  exit 1
fi
su postgres -c "psql -qAt" >/dev/null <<SQL
DO \$\$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$ROLE') THEN
    CREATE ROLE $ROLE LOGIN CREATEDB PASSWORD '$PASSWORD';
  END IF;
END \$\$;
-- DROP DATABASE … WITH (FORCE) ends the autovacuum worker a new database may have.
GRANT pg_signal_backend TO $ROLE;
SQL
