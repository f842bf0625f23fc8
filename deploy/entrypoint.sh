#!/bin/sh
# The server image's entrypoint: put the pinned CLIs this image carries into the tools folder
# on the data volume (agent containers mount that folder, so it must live on the volume),
# each <base>/<version> once, then run the command (uhp-server serve).
set -eu
tools="${UHP_TOOLS_DIR:-/data/tools}"
mkdir -p "$tools"
for carried in /opt/uhp-tools-dist/*/*; do
  [ -d "$carried" ] || continue
  target="$tools/${carried#/opt/uhp-tools-dist/}"
  if [ ! -e "$target" ]; then
    mkdir -p "$(dirname "$target")"
    rm -rf "$target.partial"
    cp -a "$carried" "$target.partial"
    mv "$target.partial" "$target"
  fi
done
exec "$@"
