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
# gVisor's runsc (--isolation gvisor), Podman (a second Docker-API engine), sshd and openssl (remote engines on loopback).
command -v runsc >/dev/null || need_pkgs+=(runsc)
command -v podman >/dev/null || need_pkgs+=(podman)
# Podman's --init (the sandbox's PID 1 under Podman).
[ -x /usr/libexec/podman/catatonit ] || need_pkgs+=(catatonit)
# Rootless Podman (newuidmap/newgidmap for its user namespace).
command -v newuidmap >/dev/null || need_pkgs+=(uidmap)
[ -x /usr/sbin/sshd ] || need_pkgs+=(openssh-server)
command -v openssl >/dev/null || need_pkgs+=(openssl)
# An OCI registry on loopback for published devcontainer features (environment-published-features.test.ts starts it).
command -v docker-registry >/dev/null || need_pkgs+=(docker-registry)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  log "installing: ${need_pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" libsecret-1-0 ca-certificates iproute2 >/dev/null
fi

# Register gVisor with the engine. runsc must own no network (Airlock's sandboxes have none anyway):
# without --network=none it refuses to start in the root network namespace.
mkdir -p /etc/docker
python3 - <<'PY'
import json, os
p = '/etc/docker/daemon.json'
cfg = json.load(open(p)) if os.path.exists(p) and os.path.getsize(p) > 0 else {}
want = {'path': '/usr/bin/runsc', 'runtimeArgs': ['--network=none']}
if cfg.get('runtimes', {}).get('runsc') != want:
    cfg.setdefault('runtimes', {})['runsc'] = want
    json.dump(cfg, open(p, 'w'), indent=2)
    print('[ci-setup] registered runsc in /etc/docker/daemon.json')
PY
# A running engine reloads its runtimes on SIGHUP; no restart needed.
if docker info >/dev/null 2>&1 && ! docker info --format '{{json .Runtimes}}' | grep -q runsc; then
  pkill -HUP -x dockerd || true
  sleep 1
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
log "runtimes: $(docker info --format '{{range $k, $v := .Runtimes}}{{$k}} {{end}}')"

# Podman as a second Docker-API engine (test/integration/podman-engine.test.ts): its rootful API
# service on /run/podman/podman.sock. cgroupfs and file events: there is no systemd here.
# Rootful Podman raises nofile/nproc in every container to values above this machine's hard limits
# (no CAP_SYS_RESOURCE here), and then no container starts: cap them at what we have.
if command -v podman >/dev/null; then
  mkdir -p /etc/containers/containers.conf.d
  nproc=$(ulimit -Hu); pidmax=$(cat /proc/sys/kernel/pid_max)
  { [ "$nproc" = unlimited ] || [ "$nproc" -gt "$pidmax" ]; } && nproc=$pidmax
  printf '[containers]\ndefault_ulimits = ["nofile=%s:%s", "nproc=%s:%s"]\n' "$(ulimit -Hn)" "$(ulimit -Hn)" "$nproc" "$nproc" >/etc/containers/containers.conf.d/airlock-ci.conf
fi
if command -v podman >/dev/null && ! curl -sf --unix-socket /run/podman/podman.sock http://d/_ping >/dev/null 2>&1; then
  log "starting podman system service"
  mkdir -p /run/podman
  # From /: conmon writes an empty \`oom\` marker into the service's working directory when a container
  # is OOM-killed (the hardening test's memory bomb), which must not land in the checkout.
  (cd / && exec setsid podman --cgroup-manager=cgroupfs --events-backend=file system service --time=0 unix:///run/podman/podman.sock </dev/null >/var/log/airlock-podman.log 2>&1 &)
  for i in $(seq 1 30); do curl -sf --unix-socket /run/podman/podman.sock http://d/_ping >/dev/null 2>&1 && break; sleep 1; done
fi
# No registry here: seed Podman's storage from Docker's copy, under the name a Dockerfile's FROM resolves to.
if command -v podman >/dev/null && ! podman image exists docker.io/library/debian:bookworm-slim; then
  docker save debian:bookworm-slim | podman load -q >/dev/null
  podman tag localhost/debian:bookworm-slim docker.io/library/debian:bookworm-slim
  log "seeded debian:bookworm-slim into podman"
fi

# Rootless Podman (test/integration/podman-rootless.test.ts): a user of its own with subordinate ids,
# its API service on /run/airlock-rl/podman/podman.sock. On a cgroup v1 host it cannot apply a
# sandbox's limits, and the test checks that Airlock refuses it and says why.
if command -v podman >/dev/null && command -v newuidmap >/dev/null; then
  id airlock-rl >/dev/null 2>&1 || useradd -m -s /bin/bash airlock-rl
  grep -q '^airlock-rl:' /etc/subuid || echo 'airlock-rl:100000:65536' >>/etc/subuid
  grep -q '^airlock-rl:' /etc/subgid || echo 'airlock-rl:100000:65536' >>/etc/subgid
  if ! curl -sf --unix-socket /run/airlock-rl/podman/podman.sock http://d/_ping >/dev/null 2>&1; then
    log "starting rootless podman system service (user airlock-rl)"
    install -d -m 0700 -o airlock-rl -g airlock-rl /run/airlock-rl /run/airlock-rl/podman
    (cd / && exec setsid runuser -u airlock-rl -- env HOME=/home/airlock-rl XDG_RUNTIME_DIR=/run/airlock-rl \
      podman --cgroup-manager=cgroupfs --events-backend=file system service --time=0 unix:///run/airlock-rl/podman/podman.sock \
      </dev/null >/var/log/airlock-podman-rootless.log 2>&1 &)
    for i in $(seq 1 30); do curl -sf --unix-socket /run/airlock-rl/podman/podman.sock http://d/_ping >/dev/null 2>&1 && break; sleep 1; done
    curl -sf --unix-socket /run/airlock-rl/podman/podman.sock http://d/_ping >/dev/null 2>&1 || { log "rootless podman did not start:"; tail -20 /var/log/airlock-podman-rootless.log; }
  fi
fi

# Claude Code and Codex on the host, as a user installs them, for the MCP client tests
# (test/integration/mcp-clients.test.ts): a prefix of their own, outside the repo's dependencies, so
# `npm ci` stays small. The same packages the agents image installs; ~40 s once, offline afterwards.
AGENT_CLIS=${AIRLOCK_TEST_AGENT_CLIS:-/opt/airlock-test-clis}
if [ ! -x "$AGENT_CLIS/node_modules/.bin/claude" ] || [ ! -x "$AGENT_CLIS/node_modules/.bin/codex" ]; then
  log "installing Claude Code and Codex under $AGENT_CLIS (MCP client tests)"
  mkdir -p "$AGENT_CLIS"
  npm install --prefix "$AGENT_CLIS" --no-audit --no-fund --no-update-notifier @anthropic-ai/claude-code @openai/codex >/dev/null
fi
