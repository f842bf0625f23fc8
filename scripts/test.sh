#!/usr/bin/env bash
# Install everything the tests need, then run the whole suite (slow tests included).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --test
# The share-page tests drive Debian's Chromium; PDF previews need LibreOffice (writer + calc,
# without the GUI: about 310 MB and 30 s; Chromium about 410 MB and 20 s, measured here).
test_apt=()
command -v chromium >/dev/null || test_apt+=(chromium)
command -v soffice >/dev/null || test_apt+=(libreoffice-writer-nogui libreoffice-calc-nogui)
# strace proves a CLI connects to nothing but the model gateway (tests/test_claude_code_base.py).
command -v strace >/dev/null || test_apt+=(strace)
if ((${#test_apt[@]})) && [[ $(id -u) -eq 0 ]]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${test_apt[@]}" >/dev/null
fi
.venv/bin/ruff check .
.venv/bin/ruff format --check .

# The docker sandbox: an engine (started here when none runs) and its runtime image (built
# once; a no-op when its labels say it is current). Without an engine the docker tests skip,
# loudly; the rest still runs.
if bash scripts/docker-engine.sh; then
  .venv/bin/uhp-server images build
fi

status=0
.venv/bin/python -m pytest "$@" || status=$?
# The same end-to-end files again, in the docker sandbox (exit 5: the arguments selected
# none of them).
docker_e2e=(tests/test_tasks_e2e.py tests/test_sessions_e2e.py tests/test_security_e2e.py
  tests/test_restart_e2e.py)
echo "=== end-to-end tests again with UHP_TEST_SANDBOX=docker ==="
UHP_TEST_SANDBOX=docker .venv/bin/python -m pytest "${docker_e2e[@]}" "$@" || {
  code=$?
  ((code == 5)) || status=$code
}
# The same end-to-end files again on every other registered base (the runs above use Codex).
base_e2e=(tests/test_tasks_e2e.py tests/test_sessions_e2e.py tests/test_security_e2e.py
  tests/test_restart_e2e.py tests/test_harnesses_e2e.py tests/test_openai_sdk.py)
for base in $(.venv/bin/uhp-server bases list --names); do
  [[ "$base" == codex ]] && continue
  echo "=== end-to-end tests again with UHP_TEST_BASE=$base ==="
  UHP_TEST_BASE="$base" .venv/bin/python -m pytest "${base_e2e[@]}" "$@" || {
    code=$?
    ((code == 5)) || status=$code
  }
done
exit "$status"
