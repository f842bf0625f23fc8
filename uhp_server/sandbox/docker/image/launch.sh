#!/bin/sh
# uhp-launch PORT PROGRAM [ARG...]: make the model gateway reachable on 127.0.0.1:PORT
# inside this network-less container, then become PROGRAM.
#
# The container has no network interface but loopback; the gateway is a Unix socket the
# sandbox mounts at /run/uhp-gateway/gateway.sock. socat relays the one port to it.
set -eu
port="$1"
shift
socat "TCP-LISTEN:${port},bind=127.0.0.1,fork,reuseaddr" \
  UNIX-CONNECT:/run/uhp-gateway/gateway.sock &
# Wait (at most about 2 s) until the port listens, so the CLI's first request finds it.
hex=$(printf '%04X' "$port")
tries=0
until grep -q "^ *[0-9]*: 0100007F:${hex} 00000000:0000 0A" /proc/net/tcp; do
  tries=$((tries + 1))
  [ "$tries" -gt 400 ] && { echo "uhp-launch: gateway relay did not start" >&2; exit 70; }
  sleep 0.005
done
exec "$@"
