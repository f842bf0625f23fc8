#!/bin/sh
# uhp-launch PORT PROGRAM [ARG...]: make the model gateway reachable on 127.0.0.1:PORT
# inside this network-less container, then become PROGRAM.
#
# The container has no network interface but loopback; the gateway is a Unix socket the
# sandbox mounts at /run/uhp-gateway/gateway.sock. socat relays the one port to it. When the
# operator allows egress, the folder also holds egress.sock, the server's egress proxy,
# relayed to 127.0.0.1:3128 (the sandbox points HTTP_PROXY/HTTPS_PROXY there).
set -eu
port="$1"
shift
# nodelay: a reply the gateway writes in two parts must not wait for the CLI's delayed ACK.
relay() {
  socat "TCP-LISTEN:$1,bind=127.0.0.1,fork,reuseaddr,nodelay" "UNIX-CONNECT:/run/uhp-gateway/$2" &
  # Wait (at most about 2 s) until the port listens, so the CLI's first request finds it.
  hex=$(printf '%04X' "$1")
  tries=0
  until grep -q "^ *[0-9]*: 0100007F:${hex} 00000000:0000 0A" /proc/net/tcp; do
    tries=$((tries + 1))
    [ "$tries" -gt 400 ] && { echo "uhp-launch: relay to $2 did not start" >&2; exit 70; }
    sleep 0.005
  done
}
relay "$port" gateway.sock
[ ! -S /run/uhp-gateway/egress.sock ] || relay 3128 egress.sock
exec "$@"
