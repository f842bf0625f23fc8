#!/usr/bin/env bash
# Install everything the tests need, then run the whole suite (slow tests included).
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=$(mktemp -d)  # the logs of what runs in the background, each printed when it ends
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$scratch"' EXIT
bash scripts/install.sh --test
echo "=== the package and the pinned CLIs installed at $SECONDS s ==="
# Format, lint and types, while the setup below installs and builds (they need only .venv):
# their output and verdict are printed once the setup is done, and the verdict joins the
# exit status.
checks_log=$scratch/checks.log
{
  failed=0
  .venv/bin/ruff check . || failed=1
  .venv/bin/ruff format --check . || failed=1
  .venv/bin/mypy || failed=1 # the whole tree, tests and benchmarks ([tool.mypy] in pyproject.toml)
  exit $failed
} >"$checks_log" 2>&1 &
checks=$!
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
echo "=== the test packages installed at $SECONDS s ==="

# The docker sandbox: an engine (started here when none runs) and its runtime image (built
# once; a no-op when its labels say it is current). Without an engine the docker tests skip,
# loudly; the rest still runs.
docker_engine=""
if bash scripts/docker-engine.sh; then
  docker_engine=1
fi
echo "=== the Docker engine answered (or not) at $SECONDS s ==="
# PostgreSQL (scripts/postgres.sh installs and starts Debian's cluster) and haproxy
# (scripts/haproxy.sh), for the passes below that need them, while the image builds: the
# apt-get runs of this script are over by now, and the image's build uses none of the host's.
# Only those passes use the cluster (every other test reads UHP_TEST_DATABASE, sqlite by
# default).
databases_log=$scratch/databases.log
{
  bash scripts/postgres.sh || exit 1
  bash scripts/haproxy.sh || exit 2
} >"$databases_log" 2>&1 &
databases=$!
if [[ -n $docker_engine ]]; then
  .venv/bin/uhp-server images build
  # A second engine of this host, for the several-engines tests (test_docker_engines_e2e.py).
  bash scripts/docker-engine.sh 2 || true
fi
# The gVisor pass needs the runsc the setup installs (an older one stalls turns under load):
# without it the run fails, rather than skipping that pass or running it on the old one.
gvisor_current=""
bash scripts/docker-engine.sh gvisor-current && gvisor_current=1
[[ -n $gvisor_current ]] || echo "=== NO CURRENT gVisor (runsc): this run fails (docs/gvisor.md) ===" >&2
echo "=== the image built at $SECONDS s ==="
postgres_ready="" haproxy_installed=""
databases_status=0
wait "$databases" || databases_status=$?
cat "$databases_log"
case $databases_status in
  0) postgres_ready=1 haproxy_installed=1 ;;
  2) postgres_ready=1 ;; # haproxy did not install: said above, loudly
esac
status=0
checks_status=0
wait "$checks" || checks_status=$?
echo "=== format, lint and types (ruff, mypy): exit $checks_status ==="
cat "$checks_log"
((checks_status == 0)) || status=$checks_status
echo "=== setup done at $SECONDS s ==="
pytest_args=("$@")
# Two passes run side by side on two cores (TEST_PASSES_AT_ONCE=1: one after another). With
# three, the machine was busy all the time (vmstat: 2-12% idle) and a CLI's turn slow enough
# under that load for a question test to time out, so a third gains little. Each pass writes
# its own log, printed whole with its wall time when it ends; the exit status combines them.
passes_at_once=${TEST_PASSES_AT_ONCE:-2}
pass_logs=$scratch/passes
mkdir "$pass_logs"
declare -A pass_what pass_log pass_started
passes_running=0 passes_started=0
# finish_pass: wait for one running pass and print its log (exit 5 means the arguments
# selected none of its tests: not a failure).
finish_pass() {
  local pid code=0
  wait -n -p pid || code=$?
  passes_running=$((passes_running - 1))
  echo "=== ${pass_what[$pid]}: exit $code, $((SECONDS - pass_started[$pid])) s" \
    "(ended at $SECONDS s) ==="
  cat "${pass_log[$pid]}"
  unset "pass_what[$pid]"  # (`pass_what` holds the passes still running)
  ((code == 0 || code == 5)) || status=$code
}
# start_pass "WHAT" COMMAND...: one more pass, once a place is free.
start_pass() {
  local what=$1
  shift
  while ((passes_running >= passes_at_once)); do finish_pass; done
  local log="$pass_logs/$((passes_started += 1)).log"
  "$@" >"$log" 2>&1 &
  pass_what[$!]=$what pass_log[$!]=$log pass_started[$!]=$SECONDS
  passes_running=$((passes_running + 1))
  echo "=== started at $SECONDS s: $what ==="
}
# run_pass "WHAT" [VAR=value ...] -- [FILE...]: one more pytest pass over FILEs (every test
# when none) with those variables.
run_pass() {
  local what=$1 vars=()
  shift
  while [[ $1 != -- ]]; do
    vars+=("$1")
    shift
  done
  shift
  start_pass "$what" env "${vars[@]}" .venv/bin/python -m pytest "$@" "${pytest_args[@]}"
}
# run_conformance_pass ARG...: the protocol's conformance suite against a server of its own
# (scripts/conformance.sh ARG...); any check that fails or errors fails the run.
run_conformance_pass() {
  start_pass "the conformance suite: scripts/conformance.sh $*" bash scripts/conformance.sh "$@"
}

# The passes run longest first, two at a time (a pass that ends makes room for the next), so
# that no long one starts last.
# The whole suite, on Codex in the local sandbox, as two shards of whole files
# (tests/support/shards.py).
for shard in 1/2 2/2; do
  run_pass "the whole suite (Codex, local sandbox), shard $shard" UHP_TEST_SHARD="$shard" --
done
# On PostgreSQL: the in-process engine tests, storage's own and the end-to-end files of tasks,
# sessions, restarts and the SDK, recall by meaning (pgvector), each test server on a fresh
# database (tests/support/postgres.py); two replicas on one database
# (tests/test_replicas_e2e.py); and the benchmarks that need PostgreSQL, in their smoke mode
# (tests/test_bench_smoke.py; bench/scale.py's replicas behind haproxy too). It stops and
# starts the cluster once (a restart under a running server, tests/test_postgres_storage.py):
# the passes that use the cluster after it (the end of this file) wait for it to end.
postgres_pass=""
if [[ -n $postgres_ready ]]; then
  run_pass "storage and end-to-end tests again with UHP_TEST_DATABASE=postgresql" \
    UHP_TEST_DATABASE=postgresql -- tests/test_engine_fast.py tests/test_ops.py \
    tests/test_storage_unit.py \
    tests/test_migrations.py tests/test_submit_transaction.py tests/test_postgres_storage.py \
    tests/test_sessions_listing.py tests/test_tasks_e2e.py tests/test_sessions_e2e.py \
    tests/test_restart_e2e.py tests/test_openai_sdk.py tests/test_replicas_fast.py \
    tests/test_replicas_leases.py tests/test_replicas_admission.py tests/test_admission_blocks.py \
    tests/test_replicas_park.py \
    tests/test_replicas_e2e.py tests/test_replicas_edges.py tests/test_test_servers.py \
    tests/test_memory_meaning_fast.py tests/test_bench_smoke.py
  postgres_pass=$!
fi
# The end-to-end files that differ per sandbox, in the docker sandbox in gVisor (docs/gvisor.md):
# with the docker sandbox's own tests (its hardening, limits and network in gVisor). Skipped,
# loudly, when the engine has no runsc (scripts/docker-engine.sh installs and registers it).
# With bookworm's own runsc a gVisor turn now and then stalled under load, and this pass ran
# alone; the later one the setup now installs (2024-07-29) has not stalled (docs/gvisor.md).
docker_e2e=(tests/test_tasks_e2e.py tests/test_sessions_e2e.py tests/test_security_e2e.py
  tests/test_restart_e2e.py tests/test_token_binding_e2e.py tests/test_egress_e2e.py
  tests/test_ops.py tests/test_plugins_e2e.py tests/test_environments_e2e.py)
run_pass "end-to-end tests again with UHP_TEST_SANDBOX=docker UHP_TEST_DOCKER_RUNTIME=runsc" \
  UHP_TEST_SANDBOX=docker UHP_TEST_DOCKER_RUNTIME=runsc -- "${docker_e2e[@]}" \
  tests/test_docker_sandbox.py tests/test_docker_e2e.py
# The end-to-end files whose outcome depends on the base, again on every other default base
# (the runs above use Codex): the CLI's own events, resume, environment, token and catalogue,
# and every front door (each drives the agent's questions and sessions through the base), and
# an environment's programs first on the PATH of however the CLI starts its shell.
# Sandbox-level checks (limits, egress) and engine-level ones (the SDK's view, metrics) do not
# change with the CLI: they run once, on the local and (below) the docker sandbox. Within these
# files, a test marked `same_on_every_base` (the engine's own logic: idempotency, reattach, the
# doors' refusals, ...) is left out of these passes, and one marked `same_in_every_sandbox` out
# of the docker ones (tests/support/passes.py): a later pass runs only what differs with it.
base_e2e=(tests/test_tasks_e2e.py tests/test_sessions_e2e.py tests/test_security_e2e.py
  tests/test_restart_e2e.py tests/test_harnesses_e2e.py tests/test_token_binding_e2e.py
  tests/test_oumi_harness_e2e.py tests/test_tool_door_e2e.py tests/test_agentos_e2e.py
  tests/test_openai_chat_e2e.py tests/test_parallel_images_e2e.py tests/test_plugins_e2e.py
  tests/test_environments_e2e.py tests/test_agent_memories_e2e.py)
# ---- The opt-in bases (issue 30): enabled only where UHP_BASES names them, so the default
# list below leaves them out. Eight configurations: six bases and the generic `acp` base with
# each of its two ACP test agents (tests/support/acp_agents.py, each on its own wire against
# the native provider). All eight take about half an hour of passes on these 2 cores, more
# than CI's 45 minutes leave, so a whole run takes one of them in turn: the one the number of
# commits in the checkout picks, so that eight commits in a row run all eight and a commit
# always runs the same one. UHP_TEST_OPT_IN_BASES=all runs the eight, =none none, or names
# some (kimi,acp/codex-acp). Each opt-in base's own live tests (tests/test_<base>_base.py) run
# in the whole suite either way. Where a base cannot do what a test drives (no MCP client: no
# MCP servers, plugins' tools, memory tools or question tool), the test asserts the refusal
# the base declares (tests/support/base_under_test.py).
opt_in_all=(openhands kilo mini-swe-agent acp/codex-acp kimi copilot cline acp/claude-code-acp)
case ${UHP_TEST_OPT_IN_BASES:-by-commit} in
  all | 1) opt_in=("${opt_in_all[@]}") ;;
  none | 0) opt_in=() ;;
  by-commit)
    if [[ $(git rev-parse --is-shallow-repository 2>&1) != false ]]; then
      echo "=== NO COMMIT COUNT (a shallow clone, or git fails here): the opt-in" \
        "configuration is the first, ${opt_in_all[0]}, every run ===" >&2
      commits=0
    else
      commits=$(git rev-list --count HEAD)
    fi
    opt_in=("${opt_in_all[$((commits % ${#opt_in_all[@]}))]}")
    echo "=== $commits commits: the opt-in configuration of this one is ${opt_in[0]} ==="
    ;;
  *)
    IFS=, read -ra opt_in <<<"${UHP_TEST_OPT_IN_BASES// /}"
    for config in "${opt_in[@]}"; do
      if [[ " ${opt_in_all[*]} " != *" $config "* ]]; then
        echo "UHP_TEST_OPT_IN_BASES: unknown configuration $config (all, none, or some of:" \
          "${opt_in_all[*]})" >&2
        exit 2
      fi
    done
    ;;
esac
echo "=== the opt-in configurations run here: ${opt_in[*]:-none} (of ${opt_in_all[*]}; UHP_TEST_OPT_IN_BASES=all runs every one) ==="
opt_in_chat_bases=" $(.venv/bin/uhp-server bases list --names --wire chat | tr '\n' ' ') "
for config in "${opt_in[@]}"; do
  if [[ $config == acp/* ]]; then
    agent=${config#acp/}
    run_pass "end-to-end tests again with UHP_TEST_BASE=acp UHP_TEST_ACP_AGENT=$agent" \
      UHP_TEST_BASE=acp UHP_TEST_ACP_AGENT="$agent" -- "${base_e2e[@]}"
    continue
  fi
  provider=native
  [[ "$opt_in_chat_bases" == *" $config "* ]] && provider=chat
  run_pass "end-to-end tests again with UHP_TEST_BASE=$config (opt-in; UHP_TEST_PROVIDER=$provider)" \
    UHP_TEST_BASE="$config" UHP_TEST_PROVIDER="$provider" -- "${base_e2e[@]}"
done
# ---- (end of the opt-in bases)
# A base whose CLI speaks Chat Completions runs against the Chat-only provider (no models
# route, every other path 404, like a bare vLLM): the stricter of the two, its bytes the same.
chat_bases=" $(.venv/bin/uhp-server bases list --names --default --wire chat | tr '\n' ' ') "
# Slowest first, so that the longest passes never end last: the simplest turn costs OpenCode
# 3-5 s of CPU, Qwen Code 3 s, Claude Code 1 s (measured with /usr/bin/time).
default_bases=" $(.venv/bin/uhp-server bases list --names --default | tr '\n' ' ') "
slowest_first=(opencode qwen-code hermes gemini-cli)
bases=()
for base in "${slowest_first[@]}"; do [[ "$default_bases" == *" $base "* ]] && bases+=("$base"); done
for base in $default_bases; do [[ " ${bases[*]} " == *" $base "* ]] || bases+=("$base"); done
for base in "${bases[@]}"; do
  [[ "$base" == codex ]] && continue
  provider=native
  [[ "$chat_bases" == *" $base "* ]] && provider=chat
  run_pass "end-to-end tests again with UHP_TEST_BASE=$base (UHP_TEST_PROVIDER=$provider)" \
    UHP_TEST_BASE="$base" UHP_TEST_PROVIDER="$provider" -- "${base_e2e[@]}"
done
# The same end-to-end files again in the docker sandbox (runc).
run_pass "end-to-end tests again with UHP_TEST_SANDBOX=docker" UHP_TEST_SANDBOX=docker -- \
  "${docker_e2e[@]}"
# Against a Chat-Completions-only provider, the bases that speak another wire: the gateway
# translates Codex's Responses and Claude Code's Anthropic Messages, and the end-to-end files
# whose model traffic differs run through the translation: text, tools, errors and streaming,
# a session's history, the catalogue of a static model list, the agent's questions (a tool
# call the doors wait on), parallel calls and images, MCP tools' names, and the official SDK.
# The doors, restarts, tokens and mounts are the same whichever wire the model speaks.
chat_e2e=(tests/test_tasks_e2e.py tests/test_sessions_e2e.py tests/test_harnesses_e2e.py
  tests/test_oumi_harness_e2e.py tests/test_parallel_images_e2e.py tests/test_plugins_e2e.py
  tests/test_openai_sdk.py)
for base in codex claude-code; do
  run_pass "end-to-end tests again with UHP_TEST_PROVIDER=chat on $base" \
    UHP_TEST_PROVIDER=chat UHP_TEST_BASE="$base" -- "${chat_e2e[@]}"
done
# Two replicas on one PostgreSQL database behind Debian's haproxy (tests/support/replicas.py
# starts them): the end-to-end files of tasks, sessions and the SDK through the balancer, and
# the balancer's own tests (a stream, a replay and a cancel on the replica that does not run
# the turn; kill -9 of a replica mid-stream). After the PostgreSQL pass (its restart).
if [[ -n $postgres_pass ]]; then
  while [[ -v "pass_what[$postgres_pass]" ]]; do finish_pass; done
fi
if [[ -n $haproxy_installed ]]; then
  run_pass "end-to-end tests again through haproxy with UHP_TEST_REPLICAS=2" \
    UHP_TEST_DATABASE=postgresql UHP_TEST_REPLICAS=2 -- tests/test_test_servers.py \
    tests/test_tasks_e2e.py tests/test_sessions_e2e.py tests/test_openai_sdk.py \
    tests/test_balancer_e2e.py
else
  status=1  # no PostgreSQL or no haproxy: said above, loudly, by the scripts that failed
fi
# The protocol's published conformance suite, class full, each run against a server it starts
# (about 20-40 s each): the current suite on the two bases it names, in the local sandbox and
# (Codex) the docker one, its Memories checks again on PostgreSQL (issue 29: with an embedding
# model, so that recall by meaning runs on pgvector), and the 2026-08-11 suite as a client
# pinned to that version. Only on a whole run: pytest's arguments select tests, and these are
# not pytest's.
if ((${#pytest_args[@]} == 0)); then
  run_conformance_pass --base codex --sandbox local
  run_conformance_pass --base claude-code --sandbox local
  if [[ -n $docker_engine ]]; then
    run_conformance_pass --base codex --sandbox docker
  else
    echo "=== no Docker engine: the conformance suite's docker-sandbox run is left out ==="
  fi
  if [[ -n $postgres_ready ]]; then
    UHP_MEMORY_EMBEDDING_MODEL=embed-test run_conformance_pass --base codex --sandbox local \
      --database postgresql --only ME-01,ME-02,ME-03,ME-04,ME-05,ME-06,ME-07,ME-08,ME-09,ME-10
  fi
  # The 2026-08-11 release is on no package registry and not in shared/spec: it runs where a
  # copy was put (scripts/conformance.sh says where it looks); elsewhere the fast tier's pinned
  # client (tests/test_versions.py) is what checks that version, and this says so loudly.
  old_suite=${UHP_CONFORMANCE_SUITE_2026_08_11:-../shared/spec/conformance-2026.8.11}
  [[ -d $old_suite ]] || old_suite=${UHP_CONFORMANCE_HOME:-$HOME/.cache/uhp-conformance}/suite-2026.8.11
  if [[ -d $old_suite ]]; then
    run_conformance_pass --base codex --sandbox local --protocol 2026-08-11
  else
    echo "=== NO 2026-08-11 CONFORMANCE SUITE on this machine: its 52-check run is left out ==="
  fi
fi
[[ -n $postgres_ready && -n $gvisor_current ]] || status=1
while ((passes_running > 0)); do finish_pass; done
exit "$status"
