#!/usr/bin/env bash
# Make sure a Docker engine answers, for the docker sandbox and its tests.
#
#   docker-engine.sh            engine 1: the default engine (/var/run/docker.sock). As root,
#                               install Debian's docker.io (plus debootstrap, to make a base
#                               image without a registry, and docker-compose when no Compose CLI
#                               exists) and start dockerd in the background when none runs.
#                               Every engine gets gVisor as the runtime `runsc` (on bookworm
#                               the pinned runsc of bookworm-backports), registered in
#                               /etc/docker/daemon.json, which every dockerd here reads: an
#                               engine already running reloads it (SIGHUP; `runtimes` is
#                               reloadable: no container stops).
#   docker-engine.sh N [start]  engine N (N >= 2): a second, fully separate dockerd on this host
#                               (unix:///run/uhp-docker<N>.sock) with its own data root, exec
#                               root, pidfile and containerd, its own bridge (uhp-docker<N>) and
#                               no iptables rules (it runs network-less agent containers only),
#                               and live-restore (its containers outlive a stop, as on a lost
#                               engine). A server copies the runtime image to it from another
#                               engine (docker save | load). Never `--bridge=none`: a dockerd
#                               started so deletes the interface named docker0, engine 1's.
#   docker-engine.sh N stop     stop engine N's dockerd only (an outage: its containers and
#                               containerd keep running, to be reaped when it is back).
#   docker-engine.sh N down     engine N gone for good: its containers, dockerd and containerd.
#   docker-engine.sh gvisor-current
#                               exits 0 when runsc is installed at the release the setup
#                               installs or later (install_gvisor below), 1 when not.
#
# Exits 0 when the engine answers (stop/down: when it is stopped), 1 (saying why, loudly)
# when not.
set -uo pipefail

number=${1:-1}
action=${2:-start}
if [[ $number == 1 ]]; then
  host=unix:///var/run/docker.sock
else
  name=uhp-docker$number
  host=unix:///run/$name.sock
  exec_root=/run/$name
  pidfile=/run/$name.pid
fi

engine_up() { docker -H "$host" info >/dev/null 2>&1; }

stop_pid() {  # stop_pid FILE: TERM the process whose id FILE holds and wait for it
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 0
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null
}

# install_gvisor: gVisor's runsc, for UHP_DOCKER_RUNTIME=runsc, of RUNSC_RELEASE or later:
# bookworm's own (2022-12-19) now and then stalled a turn on a loaded host (docs/gvisor.md).
# On Debian bookworm it comes from bookworm-backports (the build tested here:
# 0.0~20240729.0-4~bpo12+2); elsewhere from the distribution. One that is older after that
# is said, loudly (gvisor_current, which scripts/test.sh asks too).
RUNSC_RELEASE=20240729
# gvisor_current: whether runsc is installed at RUNSC_RELEASE or later (its version names the
# release's date: Debian's 0.0~YYYYMMDD.0, gVisor's own release-YYYYMMDD.0).
gvisor_current() {
  local release
  release=$(runsc --version 2>/dev/null | grep -o '[0-9]\{8\}' | head -1)
  [[ -n $release ]] && ((release >= RUNSC_RELEASE))
}
install_gvisor() {
  gvisor_current && return 0
  local codename target=()
  # shellcheck disable=SC1091
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  if [[ $codename == bookworm ]]; then
    target=(-t bookworm-backports)
    if ! grep -rqs '^[^#]*bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
      printf '%s\n' 'Types: deb' 'URIs: http://deb.debian.org/debian' \
        'Suites: bookworm-backports' 'Components: main' \
        'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' \
        >/etc/apt/sources.list.d/uhp-bookworm-backports.sources
    fi
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
    "${target[@]}" runsc >/dev/null
  gvisor_current || echo "runsc older than release $RUNSC_RELEASE, or none: gVisor turns" \
    "may stall on a loaded host (docs/gvisor.md)" >&2
}

if [[ $number == gvisor-current ]]; then  # `docker-engine.sh gvisor-current`: only the check
  gvisor_current
  exit
fi

# register_gvisor: the `runsc` runtime in /etc/docker/daemon.json (the file's other keys
# kept), and a running engine told to reload it. gVisor there cannot run with the host's
# network (its own network stack refuses the root namespace), so it always gets
# --network=none: the docker sandbox's containers have no network anyway, and reach the
# gateway through a Unix socket, which --host-uds=open lets them connect to (gVisor's
# default refuses every host socket; `open` allows connecting to the ones a container
# mounts, never creating one on the host). --oci-seccomp: gVisor applies a container's
# seccomp profile inside the sandbox (by default it ignores it); the docker sandbox passes
# one made for gVisor (uhp_server/sandbox/docker/runtimes.py says why not Docker's own).
register_gvisor() {
  command -v runsc >/dev/null || return 0
  local config=/etc/docker/daemon.json changed
  mkdir -p /etc/docker
  changed=$(/usr/bin/python3 - "$config" <<'PY'
import json, os, sys
path = sys.argv[1]
config = json.load(open(path)) if os.path.exists(path) else {}
wanted = {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none", "--host-uds=open", "--oci-seccomp"]}
if config.get("runtimes", {}).get("runsc") != wanted:
    config.setdefault("runtimes", {})["runsc"] = wanted
    with open(path + ".tmp", "w") as file:
        json.dump(config, file, indent=2)
        file.write("\n")
    os.replace(path + ".tmp", path)
    print("changed")
PY
  )
  local running_pidfile=${pidfile:-/var/run/docker.pid}
  if engine_up && { [[ -n $changed ]] || ! engine_has_gvisor; }; then
    kill -HUP "$(cat "$running_pidfile")" 2>/dev/null || return 0
    for _ in $(seq 1 50); do
      engine_has_gvisor && break
      sleep 0.1
    done
  fi
}

engine_has_gvisor() {
  docker -H "$host" info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'
}

if [[ $number != 1 && $action != start ]]; then
  if [[ $action == down ]] && engine_up; then
    ids=$(docker -H "$host" ps -aq)
    [[ -z $ids ]] || docker -H "$host" rm -f $ids >/dev/null
  fi
  stop_pid "$pidfile"
  [[ $action == down ]] && stop_pid "$exec_root/containerd/containerd.pid"
  ! engine_up
  exit $?
fi

if [[ $(id -u) -eq 0 ]]; then
  need=()
  command -v dockerd >/dev/null || need+=(docker.io)
  command -v debootstrap >/dev/null || need+=(debootstrap)
  if ! docker compose version >/dev/null 2>&1 && ! command -v docker-compose >/dev/null; then
    need+=(docker-compose)  # Compose v1: the Compose CLI Debian bookworm ships
  fi
  if ((${#need[@]})); then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
      "${need[@]}" >/dev/null
  fi
  install_gvisor
  register_gvisor
  if ! engine_up && command -v dockerd >/dev/null; then
    if [[ $number == 1 ]]; then
      log=/var/log/uhp-dockerd.log
      flags=()
    else
      log=/var/log/$name.log
      if ! ip link show "$name" >/dev/null 2>&1; then
        ip link add name "$name" type bridge
        ip addr add "172.31.$((250 + number)).1/24" dev "$name"
        ip link set "$name" up
      fi
      flags=(-H "$host" --data-root "/var/lib/$name" --exec-root "$exec_root"
        --pidfile "$pidfile" --bridge="$name" --iptables=false --ip6tables=false
        --live-restore)
    fi
    echo "starting dockerd $number (log: $log)"
    setsid nohup dockerd "${flags[@]}" >"$log" 2>&1 </dev/null &
    for _ in $(seq 1 60); do
      engine_up && break
      sleep 1
    done
  fi
fi

if ! engine_up; then
  cat >&2 <<MSG
************************************************************************************
*  NO DOCKER ENGINE $number could be started: its docker sandbox tests will be SKIPPED.
*  (Needs root to install docker.io and run dockerd; see /var/log/uhp-dockerd*.log.)
************************************************************************************
MSG
  exit 1
fi
echo "Docker engine $number ($host): $(docker -H "$host" version --format '{{.Server.Version}}')"
if engine_has_gvisor; then
  echo "  with gVisor: the runtime runsc ($(runsc --version 2>/dev/null | head -1))"
else
  echo "  WITHOUT gVisor (no runtime runsc): UHP_DOCKER_RUNTIME=runsc tests will be SKIPPED" >&2
fi
