#!/usr/bin/env bash
# Install UHP Server on this machine: system packages, a virtualenv, the pinned agent CLIs.
# Idempotent. Usage: bash scripts/install.sh [--test] [--docker]
#   --test    adds the test dependencies (and the mem0 extra, whose provider they test)
#   --docker  also sets up the docker sandbox: a Docker engine and the agent runtime image
set -euo pipefail
cd "$(dirname "$0")/.."

extras=""
docker=""
for arg in "$@"; do
  # The tests run the mem0 memory provider against a real mem0 (tests/test_memory_mem0.py).
  [[ "$arg" == "--test" ]] && extras="[test,mem0]"
  [[ "$arg" == "--docker" ]] && docker=1
done

apt_install() {  # the Debian packages given, when any (as root; otherwise says what to run)
  (($#)) || return 0
  if [[ $(id -u) -ne 0 ]]; then
    echo "please install: $* (sudo apt-get install -y $*)" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

need_apt=()
command -v bwrap >/dev/null || need_apt+=(bubblewrap)
# The local sandbox relays its gateway (and egress proxy) socket to its own loopback with it.
command -v socat >/dev/null || need_apt+=(socat)
# Not the server's: the README's and docs' examples read its answers with it (| jq -r .id).
command -v jq >/dev/null || need_apt+=(jq)
# The venv's Python loads SQLite extensions (sqlite-vec: the embedded memory provider's recall
# by meaning, docs/memory-providers.md). Debian's does; one built without
# --enable-loadable-sqlite-extensions (pyenv's default) does not: then Debian's is taken.
loads_extensions() { "$1" -c 'import sqlite3; sqlite3.Connection.enable_load_extension' 2>/dev/null; }
python=python3
if ! loads_extensions python3 && loads_extensions /usr/bin/python3; then python=/usr/bin/python3; fi
# Debian splits venv/ensurepip into a package; .venv needs it.
"$python" -c 'import ensurepip, venv' 2>/dev/null || need_apt+=(python3-venv)
apt_install "${need_apt[@]}"

if [[ -x .venv/bin/python ]] && ! loads_extensions .venv/bin/python && loads_extensions "$python"; then
  echo "note: .venv's Python cannot load SQLite extensions (no recall by meaning);" \
    "remove .venv and run this again to make it from $python" >&2
fi
"$python" -m venv .venv
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q -e ".${extras}"
# What the registered bases' installs need on the host (each base declares its
# host_packages); a package counts as present when dpkg has it or a command of its name runs.
need_apt=()
for package in $(.venv/bin/uhp-server bases host-packages); do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed" ||
    command -v "$package" >/dev/null || need_apt+=("$package")
done
apt_install "${need_apt[@]}"
.venv/bin/uhp-server bases install  # every registered base
if [[ -n "$docker" ]]; then
  bash scripts/docker-engine.sh
  .venv/bin/uhp-server images build
fi
echo "installed: .venv/bin/uhp-server"
