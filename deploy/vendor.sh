#!/usr/bin/env bash
# Prepare .docker-vendor/ for an offline build of the server image (see Dockerfile): wheels
# of the server and its dependencies built here, and the pinned CLIs of the enabled bases
# as installed here (uhp-server bases install). Idempotent. Usage: bash deploy/vendor.sh
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
[[ -x .venv/bin/python ]] && python=.venv/bin/python
tools="${UHP_TOOLS_DIR:-$HOME/.cache/uhp-server/tools}"
bases="${UHP_BASES:-codex}"

rm -rf .docker-vendor
mkdir -p .docker-vendor/wheels .docker-vendor/tools
"$python" -m pip wheel -q --wheel-dir .docker-vendor/wheels .
for base in ${bases//,/ }; do
  if [[ ! -d "$tools/$base" ]]; then
    echo "$base is not installed in $tools (run: uhp-server bases install $base)" >&2
    exit 1
  fi
  # Hard links when on the same filesystem: no second copy of a few hundred MB.
  cp -al "$tools/$base" .docker-vendor/tools/ 2>/dev/null || cp -a "$tools/$base" .docker-vendor/tools/
done
echo "vendored: $(ls .docker-vendor/wheels | wc -l) wheels, CLIs: $(ls .docker-vendor/tools)"
