#!/usr/bin/env bash
# Install UHP Server on this machine: system packages, a virtualenv, the pinned agent CLIs.
# Idempotent. Usage: bash scripts/install.sh [--test] [--docker]
#   --test    adds the test dependencies
#   --docker  also sets up the docker sandbox: a Docker engine and the agent runtime image
set -euo pipefail
cd "$(dirname "$0")/.."

extras=""
docker=""
for arg in "$@"; do
  [[ "$arg" == "--test" ]] && extras="[test]"
  [[ "$arg" == "--docker" ]] && docker=1
done

need_apt=()
command -v bwrap >/dev/null || need_apt+=(bubblewrap)
# The local sandbox relays its gateway (and egress proxy) socket to its own loopback with it.
command -v socat >/dev/null || need_apt+=(socat)
command -v npm >/dev/null || need_apt+=(nodejs npm)
# The Hermes base makes its venv with Debian's python3, whose venv/ensurepip are a package.
/usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null || need_apt+=(python3-venv)
if ((${#need_apt[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "please install: ${need_apt[*]} (sudo apt-get install -y ${need_apt[*]})" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q -e ".${extras}"
.venv/bin/uhp-server bases install
if [[ -n "$docker" ]]; then
  bash scripts/docker-engine.sh
  .venv/bin/uhp-server images build
fi
echo "installed: .venv/bin/uhp-server"
