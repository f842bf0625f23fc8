# The UHP Server image, for compose.yaml. The agents do not run in here: the server starts
# one container per turn from the runtime image (uhp-server images build) through the
# Docker socket that compose.yaml mounts.
#
# Two ways to build it:
# - with a normal network: `docker compose build`; pip and npm fetch everything.
# - without a registry (or behind a TLS-inspecting proxy): `bash deploy/vendor.sh` first. It
#   puts wheels built on the host and the host's installed pinned CLIs in .docker-vendor/,
#   which this recipe then installs from, offline. BASE_IMAGE can be a bootstrapped Debian
#   (uhp-debian:bookworm, made by `uhp-server images build`).
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}

ARG DEBIAN_FRONTEND=noninteractive
COPY . /src
# nodejs: the Claude Code base checks its CLI with node; npm only when installing CLIs here.
RUN set -eu; \
    packages="ca-certificates python3 python3-venv nodejs"; \
    [ -d /src/.docker-vendor/tools ] || packages="$packages npm"; \
    # Retries: a package mirror that drops one connection must not fail the whole build.
    apt-get -o Acquire::Retries=5 update; \
    apt-get -o Acquire::Retries=5 install -y --no-install-recommends $packages; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb

RUN set -eu; \
    python3 -m venv /opt/uhp; \
    if [ -d /src/.docker-vendor/wheels ]; then \
      /opt/uhp/bin/pip install --no-index --find-links /src/.docker-vendor/wheels uhp-server; \
    else \
      /opt/uhp/bin/pip install /src; \
    fi

# The pinned CLIs this image carries; the entrypoint copies them into the tools folder on
# the data volume, where the agent containers mount them read-only.
RUN set -eu; \
    if [ -d /src/.docker-vendor/tools ]; then \
      mkdir -p /opt/uhp-tools-dist && cp -a /src/.docker-vendor/tools/. /opt/uhp-tools-dist/; \
    else \
      UHP_TOOLS_DIR=/opt/uhp-tools-dist /opt/uhp/bin/uhp-server bases install; \
    fi; \
    install -m 0755 /src/deploy/entrypoint.sh /usr/local/bin/uhp-entrypoint; \
    rm -rf /src

ENV PATH=/opt/uhp/bin:$PATH \
    UHP_HOST=0.0.0.0 \
    UHP_PORT=8080 \
    UHP_DATA_DIR=/data \
    UHP_TOOLS_DIR=/data/tools \
    UHP_SANDBOX=docker
EXPOSE 8080
VOLUME /data
ENTRYPOINT ["uhp-entrypoint"]
CMD ["uhp-server", "serve"]
