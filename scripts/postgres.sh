#!/usr/bin/env bash
# Make sure a local PostgreSQL answers, for the PostgreSQL test pass (UHP_TEST_DATABASE=
# postgresql): as root, install Debian's postgresql when missing, start its cluster, and
# create the role the tests use (it may create and drop databases, nothing more). Then
# pgvector (recall by meaning on PostgreSQL, docs/memories.md): built from Debian's own source
# when the cluster lacks it, and created in template1 so that every database made after it
# (the tests' own) has the `vector` type. Prints nothing on success; exits 1 (saying why,
# loudly) when no cluster can start; says loudly, and goes on, when pgvector cannot be built
# (the server runs without recall by meaning then, and says so).
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

# pgvector: Debian packages it from trixie on (postgresql-NN-pgvector), bookworm does not. Its
# source as Debian ships it, pinned: the sha256 is the one in trixie's Sources (signed by the
# archive's InRelease) and in pgvector_0.8.0-1.dsc's Checksums-Sha256.
PGVECTOR_VERSION=0.8.0
PGVECTOR_SHA256=867a2c328d4928a5a9d6f052cd3bc78c7d60228a9b914ad32aa3db88e9de27b0
PGVECTOR_URL=https://deb.debian.org/debian/pool/main/p/pgvector/pgvector_${PGVECTOR_VERSION}.orig.tar.gz

build_pgvector() (
  bin=/usr/lib/postgresql/$version/bin
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  log=$work/build.log
  failed() { echo "pgvector: $1 (the last lines of its output:)" >&2; tail -15 "$log" >&2; exit 1; }
  # The headers of the very server that runs (a newer -dev would upgrade, and restart, it).
  server_version=$(dpkg-query -W -f='${Version}' "postgresql-$version" 2>/dev/null)
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
    --no-install-recommends make gcc curl ca-certificates \
    "postgresql-server-dev-$version${server_version:+=$server_version}" >"$log" 2>&1 ||
    failed "apt-get install postgresql-server-dev-$version failed"
  curl -fsSL --retry 3 -o "$work/pgvector.tar.gz" "$PGVECTOR_URL" >>"$log" 2>&1 ||
    failed "downloading $PGVECTOR_URL failed"
  echo "$PGVECTOR_SHA256  $work/pgvector.tar.gz" | sha256sum -c --quiet - >>"$log" 2>&1 ||
    failed "$PGVECTOR_URL is not the tarball pinned here (sha256 differs)"
  tar -xzf "$work/pgvector.tar.gz" -C "$work" >>"$log" 2>&1 || failed "unpacking failed"
  # OPTFLAGS="": no -march=native, as Debian builds it (the same binary on any x86-64).
  make -C "$work/pgvector-$PGVECTOR_VERSION" PG_CONFIG="$bin/pg_config" OPTFLAGS="" \
    >>"$log" 2>&1 || failed "make failed"
  make -C "$work/pgvector-$PGVECTOR_VERSION" PG_CONFIG="$bin/pg_config" install \
    >>"$log" 2>&1 || failed "make install failed"
)

if [[ ! -f /usr/share/postgresql/$version/extension/vector.control ]]; then
  if ! build_pgvector; then
    echo "!!! pgvector $PGVECTOR_VERSION could not be built for PostgreSQL $version: the" \
      "server runs there without recall by meaning (its provider declares no \`query\`)" >&2
  fi
fi
if [[ -f /usr/share/postgresql/$version/extension/vector.control ]] &&
  ! su postgres -c "psql -qAt -d template1 -c 'SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS vector'" \
    >/dev/null; then
  echo "!!! pgvector is installed but CREATE EXTENSION vector failed in template1" >&2
fi
