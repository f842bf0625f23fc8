#!/usr/bin/env bash
# Make sure a Docker engine answers, for the docker sandbox and its tests: as root, install
# Debian's docker.io (plus debootstrap, to make a base image without a registry, and
# docker-compose when no Compose CLI exists) and start dockerd in the background when no
# engine runs. Exits 0 when an engine answers, 1 (saying why, loudly) when none can start.
set -uo pipefail

engine_up() { docker info >/dev/null 2>&1; }

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
  if ! engine_up && command -v dockerd >/dev/null; then
    log=/var/log/uhp-dockerd.log
    echo "starting dockerd (log: $log)"
    setsid nohup dockerd >"$log" 2>&1 </dev/null &
    for _ in $(seq 1 60); do
      engine_up && break
      sleep 1
    done
  fi
fi

if engine_up; then
  echo "Docker engine: $(docker version --format '{{.Server.Version}}' 2>/dev/null)"
  exit 0
fi
cat >&2 <<'MSG'
************************************************************************************
*  NO DOCKER ENGINE could be started: the docker sandbox tests will be SKIPPED.     *
*  (Needs root to install docker.io and run dockerd; see /var/log/uhp-dockerd.log.) *
************************************************************************************
MSG
exit 1
