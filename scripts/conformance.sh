#!/usr/bin/env bash
# Run the protocol's published conformance suite against this server, on this machine.
#
# Starts the scripted model provider (tests/scripted_provider: no network, no real model; it
# reads the suite's plain-English tasks), a real `uhp-server serve` on a fresh data dir, and the
# suite's MCP fixture (for P-11); runs `uhp-conformance` against the server; stops what it
# started. The suite is installed, never copied, into a venv of its own outside the project.
#
# Usage: bash scripts/conformance.sh [--base codex|claude-code|…] [--sandbox local|docker]
#          [--acp-agent claude-code-acp|codex-acp] [--class core|extended|full] [--protocol 2026-10-04|2026-08-11] [--only ID,ID]
#          [--database sqlite|postgresql] [--json PATH] [--keep] [-- SUITE-ARGS]
#   --base      the harness base the tasks run on (UHP_BASES); default codex
#   --sandbox   local (bubblewrap) or docker; default local
#   --acp-agent with --base acp (and only then): the test agent the tasks run on, one of
#               tests/support/acp_agents.py's; a harness naming it is created and the suite
#               runs its tasks on it (--harness-id)
#   --class     the suite's class; default full
#   --protocol  2026-10-04 (default): the current suite (95 checks), as a client that sends no
#               UHP-Version and so gets the newest version; 2026-08-11: that version's own
#               suite (release 2026.8.11.post1, 52 checks) as a client pinned to it, every
#               request carrying `UHP-Version: 2026-08-11` unless a check sends its own
#   --only      comma-separated check ids (a partial run: no class claim)
#   --database  sqlite (default: the server's embedded default) or postgresql: a fresh database
#               in the local cluster (scripts/postgres.sh; UHP_TEST_POSTGRES_URL names a role
#               that may create databases), made from template1 (pgvector, when the cluster has
#               it) and dropped at the end
#   --json      where the JSON report goes; default
#               $UHP_CONFORMANCE_HOME/report-<base>-<sandbox>[-2026-08-11].json
#   --keep      keep the data dir and the logs (their folder is printed)
#   after --, arguments for uhp-conformance itself (e.g. --task-timeout 120)
# Environment: UHP_CONFORMANCE_SUITE (the current suite; default ../shared/spec/conformance
# beside the repo), UHP_CONFORMANCE_SUITE_2026_08_11 (the 2026-08-11 release: a folder holding
# its conformance/ and schema/; default ../shared/spec/conformance-2026.8.11 when there, else
# $UHP_CONFORMANCE_HOME/suite-2026.8.11), UHP_CONFORMANCE_HOME (default ~/.cache/uhp-conformance:
# the suites' venvs, the reports); the caller's UHP_* variables (e.g. UHP_DATABASE_URL) reach
# the server, under those set here.
# Exit status: the suite's (0 nothing failed or errored, 1 otherwise); 2 for a usage error or a
# suite that is not there.
# Needs `bash scripts/install.sh --test` first (and --docker for the docker sandbox).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

base=codex sandbox=local class=full protocol=2026-10-04 only="" report="" keep="" suite_args=()
database=sqlite
acp_agent=""
usage() { sed -n '/^# Usage:/,/^# Exit status/p' "$0" >&2; exit "${1:-2}"; }
while (($#)); do
  case $1 in
    --base) base=${2:?}; shift 2 ;;
    --sandbox) sandbox=${2:?}; shift 2 ;;
    --acp-agent) acp_agent=${2:?}; shift 2 ;;
    --class) class=${2:?}; shift 2 ;;
    --protocol) protocol=${2:?}; shift 2 ;;
    --only) only=${2:?}; shift 2 ;;
    --database) database=${2:?}; shift 2 ;;
    --json) report=${2:?}; shift 2 ;;
    --keep) keep=1; shift ;;
    -h | --help) usage 0 ;;
    --) shift; suite_args=("$@"); break ;;
    *) usage ;;
  esac
done
[[ $sandbox == local || $sandbox == docker ]] || usage
[[ $protocol == 2026-10-04 || $protocol == 2026-08-11 ]] || usage
[[ $database == sqlite || $database == postgresql ]] || usage
if [[ $base == acp ]]; then
  [[ $acp_agent == claude-code-acp || $acp_agent == codex-acp ]] ||
    { echo "--base acp needs --acp-agent claude-code-acp|codex-acp" >&2; exit 2; }
else
  [[ -z $acp_agent ]] || { echo "--acp-agent goes with --base acp only" >&2; exit 2; }
fi
label=$base${acp_agent:+-$acp_agent}  # what runs the tasks, in report names
[[ $database == sqlite ]] || label=$label-$database

home=${UHP_CONFORMANCE_HOME:-$HOME/.cache/uhp-conformance}
python=$repo/.venv/bin/python
[[ -x $python ]] || { echo "no .venv here: run bash scripts/install.sh --test first" >&2; exit 2; }
if [[ $protocol == 2026-10-04 ]]; then
  suite_src=${UHP_CONFORMANCE_SUITE:-$repo/../shared/spec/conformance}
  venv=$home/venv
  report=${report:-$home/report-$label-$sandbox.json}
  [[ -f $suite_src/pyproject.toml ]] || { echo "no conformance suite at $suite_src" >&2; exit 2; }
else
  suite_src=${UHP_CONFORMANCE_SUITE_2026_08_11:-$repo/../shared/spec/conformance-2026.8.11}
  [[ -n ${UHP_CONFORMANCE_SUITE_2026_08_11:-} || -d $suite_src ]] || suite_src=$home/suite-2026.8.11
  venv=$home/venv-2026-08-11
  report=${report:-$home/report-$label-$sandbox-2026-08-11.json}
  [[ -f $suite_src/conformance/pyproject.toml && -f $suite_src/schema/uhp-2026-08-11.schema.json ]] ||
    { echo "no 2026-08-11 conformance suite (conformance/ and schema/) at $suite_src" >&2; exit 2; }
fi
mkdir -p "$home" "$(dirname "$report")"

# The suite in its own venv; reinstalled whenever its files change. pip builds in the source
# folder (build/, *.egg-info), so it builds from a copy and the published suite stays untouched.
# The current suite installs with its fixture extra. The 2026-08-11 release reads its schema
# from ../../schema beside its own source, so it is installed editable from a copy inside its
# venv (the copy is the installed code: replaced whole when the suite changes).
# Runs side by side (scripts/test.sh) install one at a time.
exec {install_lock}>"$home/.install.lock"
flock "$install_lock"
stamp=$(cd "$suite_src" && find . -path ./build -prune -o -name '*.egg-info' -prune -o \
  -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
if [[ ! -x $venv/bin/uhp-conformance || $(cat "$venv/.suite-stamp" 2>/dev/null) != "$stamp" ]]; then
  echo "installing the conformance suite from $suite_src into $venv"
  [[ -x $venv/bin/python ]] || python3 -m venv "$venv"
  pip=("$venv/bin/pip" install -q --disable-pip-version-check)
  if [[ $protocol == 2026-10-04 ]]; then
    scratch=$(mktemp -d)
    cp -r "$suite_src" "$scratch/conformance" && chmod -R u+w "$scratch/conformance"
    "${pip[@]}" "$scratch/conformance[fixture]"
    rm -rf "$scratch"
  else
    rm -rf "$venv/src" && mkdir -p "$venv/src"
    cp -r "$suite_src/conformance" "$suite_src/schema" "$venv/src/" && chmod -R u+w "$venv/src"
    "${pip[@]}" -e "$venv/src/conformance"
  fi
  echo "$stamp" >"$venv/.suite-stamp"
fi
exec {install_lock}>&-

# The model the base's wire reaches (tests/conftest.py's defaults); for an ACP test agent,
# the one its end-to-end tests use (tests/test_acp_e2e.py: Codex knows gpt-5.4 by name).
backend=$("$python" -c "from harness_bases import registry; print(registry()['$base'].backend)" \
  2>/dev/null) || { echo "no base named $base" >&2; exit 2; }
case $backend in
  anthropic) model=claude-test ;;
  *) model=gpt-test ;;
esac
openai_default=gpt-test
case $acp_agent in
  claude-code-acp) model=claude-test ;;
  codex-acp) model=gpt-5.4 openai_default=gpt-5.4 ;;
esac
if [[ $sandbox == docker ]]; then
  bash scripts/docker-engine.sh
  .venv/bin/uhp-server images build
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/uhp-conformance.XXXXXX")
database_name=""
# postgres_admin STATEMENT: run as the role that may create databases (tests/support/postgres.py's).
postgres_admin() {
  "$python" -c 'import sys, psycopg
from tests.support.postgres import ADMIN_URL
with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
    admin.execute(sys.argv[1])' "$1"
}
pids=()  # what this script started, each the leader of its own process group
stop_all() {
  local pid
  for pid in "${pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL -- "-$pid" 2>/dev/null || true
  done
  if [[ -n $keep ]]; then echo "kept: $work (data dir, logs)"; else rm -rf "$work"; fi
  [[ -z $database_name ]] || postgres_admin "DROP DATABASE IF EXISTS $database_name WITH (FORCE)" || true
}
trap stop_all EXIT
trap 'exit 130' INT TERM

free_port() { "$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# wait_for WHAT LOG PID COMMAND...: until COMMAND succeeds; fails with the log if PID ends.
wait_for() {
  local what=$1 log=$2 pid=$3
  shift 3
  for _ in $(seq 300); do
    "$@" >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || { echo "$what exited:" >&2; tail -40 "$log" >&2; exit 1; }
    sleep 0.2
  done
  echo "$what did not start in 60 s:" >&2; tail -40 "$log" >&2; exit 1
}

provider_key=sk-conformance-provider
setsid "$python" -m tests.scripted_provider --port 0 --api-key "$provider_key" \
  --models gpt-test,gpt-test-mini,claude-test,claude-test-mini${acp_agent:+,gpt-5.4} \
  >"$work/provider.log" 2>&1 &
pids+=($!)
wait_for "the scripted provider" "$work/provider.log" "$!" grep -q '^listening ' "$work/provider.log"
provider_url=$(sed -n 's/^listening //p' "$work/provider.log")

# The MCP fixture a plugin points at (P-11); the 2026-08-11 suite has no plugin checks.
if [[ $protocol == 2026-10-04 ]]; then
  fixture_port=$(free_port)
  setsid "$venv/bin/uhp-conformance-fixture" --host 127.0.0.1 --port "$fixture_port" \
    >"$work/fixture.log" 2>&1 &
  pids+=($!)
  wait_for "the MCP fixture" "$work/fixture.log" "$!" \
    "$python" -c "import socket; socket.create_connection(('127.0.0.1', $fixture_port), 1)"
fi

# The server's environment: the caller's UHP_* variables, then what this run needs (as
# tests/conftest.py's server_env sets them), nothing else of the caller's.
data=$work/data
port=$(free_port)
server_env=(PATH="$PATH" HOME="$HOME")
while IFS= read -r var; do server_env+=("$var"); done < <(env | grep '^UHP_' || true)
server_env+=(
  UHP_DATA_DIR="$data" UHP_BASES="$base" UHP_SANDBOX="$sandbox"
  UHP_OPENAI_DEFAULT_MODEL="$openai_default" UHP_ANTHROPIC_DEFAULT_MODEL=claude-test
  OPENAI_API_KEY="$provider_key" OPENAI_BASE_URL="$provider_url/v1"
  ANTHROPIC_API_KEY="$provider_key" ANTHROPIC_BASE_URL="$provider_url"
  # The fixture is on this machine's loopback; a deployment's MCP servers would not be.
  UHP_MCP_ALLOW_PRIVATE_HOSTS="${UHP_MCP_ALLOW_PRIVATE_HOSTS:-true}"
)
if [[ $database == postgresql ]]; then
  database_name=uhp_conformance_$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
  postgres_admin "CREATE DATABASE $database_name" ||
    { echo "no PostgreSQL to make a database in: run bash scripts/postgres.sh first" >&2; exit 2; }
  server_env+=("UHP_DATABASE_URL=$("$python" -c 'import sys
from sqlalchemy.engine import make_url
from tests.support.postgres import ADMIN_URL
print(make_url(ADMIN_URL).set(database=sys.argv[1]).render_as_string(hide_password=False))' \
    "$database_name")")
fi
mkdir -p "$data"
env -i "${server_env[@]}" setsid .venv/bin/uhp-server serve --port "$port" --data-dir "$data" \
  >"$work/server.log" 2>&1 &
pids+=($!)
wait_for "uhp-server" "$work/server.log" "$!" \
  "$python" -c "import httpx; httpx.get('http://127.0.0.1:$port/v1/uhp', timeout=1).raise_for_status()"
api_key=$(env -i "${server_env[@]}" .venv/bin/uhp-server keys create --principal conformance \
  --data-dir "$data" 2>>"$work/server.log" | awk 'END {print $NF}')

version=$("$python" -c 'import importlib.metadata as m; print(m.version("uhp-server"))')
args=(--base-url "http://127.0.0.1:$port" --api-key "$api_key" --class "$class" --plain
  --model "$model" --json "$report")
[[ -n $only ]] && args+=(--only "$only")
if [[ -n $acp_agent ]]; then  # a harness naming the agent; the suite's tasks run on it
  harness=$("$python" -m tests.support.acp_agents "$acp_agent" | "$python" -c '
import json, sys, httpx
body = {**json.load(sys.stdin), "default_model": sys.argv[3]}
answer = httpx.post(sys.argv[1] + "/v1/harnesses", json=body, timeout=30,
                    headers={"Authorization": "Bearer " + sys.argv[2]})
answer.raise_for_status()
print(answer.json()["id"])' "http://127.0.0.1:$port" "$api_key" "$model")
  args+=(--harness-id "$harness")
fi
suite_version=$("$venv/bin/python" -c 'import uhp_conformance as u; print(u.__version__)')
echo "uhp-conformance $suite_version, UHP $protocol, class $class: base $label, model $model," \
  "$sandbox sandbox, server $version"
status=0
if [[ $protocol == 2026-10-04 ]]; then
  args+=(--plugin-mcp-url "http://127.0.0.1:$fixture_port/mcp"
    --label "UHP Server $version ($label, $sandbox sandbox, scripted provider)")
  "$venv/bin/uhp-conformance" "${args[@]}" "${suite_args[@]}" || status=$?
else
  # A client pinned to 2026-08-11: the release's own command line, every request it sends
  # carrying the version header (a check that sends its own, as V-02 and V-03 do, keeps it).
  "$venv/bin/python" - "${args[@]}" "${suite_args[@]}" <<'PINNED_CLIENT' || status=$?
import sys
import urllib.request

from uhp_conformance import cli

PINNED = "2026-08-11"
urlopen = urllib.request.urlopen


def pinned(request, *args, **kwargs):
    if isinstance(request, urllib.request.Request) and not request.has_header("Uhp-version"):
        request.add_header("UHP-Version", PINNED)
    return urlopen(request, *args, **kwargs)


urllib.request.urlopen = pinned
sys.exit(cli.main(sys.argv[1:]))
PINNED_CLIENT
fi

# One line a check that did not pass, with the suite's reason, for a log read at a glance.
if [[ -f $report ]]; then
  "$venv/bin/python" - "$report" <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))
s = report["summary"]
print(f"{s['pass']} passed, {s['fail']} failed, {s['error']} errored, {s['skip']} skipped "
      f"of {s['total']} (conformant: {report['conformant']})")
for c in report["checks"]:
    if c["outcome"] != "pass":
        reason = " ".join(str(c.get("detail") or "").split())
        print(f"  {c['outcome'].upper():5} {c['id']:6} {reason[:220]}")
print(f"report: {sys.argv[1]}")
EOF
fi
exit "$status"
