#!/usr/bin/env bash
# Make sure Debian's haproxy is installed, for the tests of several replicas behind a load
# balancer (tests/support/replicas.py writes its own configuration and starts it per test): as
# root, install it when missing, and nothing else (the package's own service is not needed and
# is left as Debian starts it). Prints nothing on success; exits 1 (saying why) otherwise.
set -uo pipefail

if command -v haproxy >/dev/null || [[ -x /usr/sbin/haproxy ]]; then
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "scripts/haproxy.sh: haproxy is missing and installing it needs root" >&2
  exit 1
fi
apt-get update -qq
if ! DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
  --no-install-recommends haproxy >/dev/null; then
  echo "!!! haproxy did not install: the several-replicas pass cannot run" >&2
  exit 1
fi
