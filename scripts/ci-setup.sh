#!/usr/bin/env bash
# Installs and starts what Airlock's tests need on a Debian machine (as root):
# Docker engine, a Secret Service keychain, Chromium, and the base image seeded without a registry.
# Idempotent: each step is skipped when already done.
set -euo pipefail
log() { printf '[ci-setup] %s\n' "$*"; }

need_pkgs=()
command -v dockerd >/dev/null || need_pkgs+=(docker.io)
command -v gnome-keyring-daemon >/dev/null || need_pkgs+=(gnome-keyring)
command -v dbus-run-session >/dev/null || need_pkgs+=(dbus dbus-user-session)
[ -x /usr/bin/chromium ] || need_pkgs+=(chromium)
command -v debootstrap >/dev/null || need_pkgs+=(debootstrap)
command -v git >/dev/null || need_pkgs+=(git)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  log "installing: ${need_pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" libsecret-1-0 ca-certificates iproute2 >/dev/null
fi

# Prefer the engine's own client when the machine ships a different one.
if ! docker info >/dev/null 2>&1; then
  log "starting dockerd"
  (dockerd >/var/log/airlock-dockerd.log 2>&1 &)
  for i in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { log "dockerd did not start; see /var/log/airlock-dockerd.log"; tail -20 /var/log/airlock-dockerd.log; exit 1; }
fi
log "docker engine: $(docker version --format '{{.Server.Version}}')"

# Seed debian:bookworm-slim locally: this machine reaches no container registry.
if ! docker image inspect debian:bookworm-slim >/dev/null 2>&1; then
  log "seeding debian:bookworm-slim with debootstrap (about a minute)"
  root=$(mktemp -d)
  debootstrap --variant=minbase bookworm "$root" >/tmp/airlock-debootstrap.log 2>&1 || { tail -20 /tmp/airlock-debootstrap.log; exit 1; }
  # Keep the mirror the machine itself is configured with, so apt inside builds works.
  tar -C "$root" -c . | docker import - debian:bookworm-slim >/dev/null
  rm -rf "$root"
fi
log "base image ready"
