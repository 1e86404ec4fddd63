#!/usr/bin/env bash
# The arm64 check (docs/architecture.md §4 "Image architecture", resources/vm/README.md "arm64"):
# on an x86-64 Linux host, as root, builds Airlock's sandbox image for linux/arm64 through the app's
# own build path and completes runs in it under QEMU user emulation, with the real CLI against the
# scripted fake provider: the built-in agent, a devcontainer FROM an arm64 Debian, Claude Code and
# Codex on the agents image (scripts/arm64-drive.ts). No registry is needed.
#
#   1. registers qemu-user-static for aarch64 ELF binaries with binfmt_misc (flags F: the kernel
#      opens the interpreter now, so it works inside containers), mounting binfmt_misc if needed;
#      undone on exit (only what this script registered or mounted);
#   2. makes an arm64 Debian bookworm (debootstrap --arch arm64 --variant=minbase, from the Debian
#      mirror apt is configured with), cached as a tarball, imported as $AIRLOCK_ARM64_BASE
#      (never under debian:bookworm-slim, which is this engine's own x86-64 base);
#   3. runs the driver with AIRLOCK_SANDBOX_ARCH=arm64 and AIRLOCK_SANDBOX_BASE_IMAGE.
#
# Usage: bash scripts/arm64-check.sh [--clean] [--steps builtin,devcontainer,agents]
#   --clean   first removes what an earlier check left in the engine (arm64 sandbox, agents and
#             derived images, the imported base), so everything is built again; the base tarball
#             stays cached unless AIRLOCK_ARM64_FRESH_BASE=1.
# Environment: AIRLOCK_ARM64_CACHE (default /var/cache/airlock-arm64), AIRLOCK_ARM64_BASE (default
# airlock-arm64-base:bookworm), AIRLOCK_ARM64_MIRROR (default: apt's configured Debian mirror).
# The last run's log: $AIRLOCK_ARM64_CACHE/last-run.log. Emulated processes run at nice 19.
set -euo pipefail

CACHE=${AIRLOCK_ARM64_CACHE:-/var/cache/airlock-arm64}
BASE_TAG=${AIRLOCK_ARM64_BASE:-airlock-arm64-base:bookworm}
TARBALL="$CACHE/bookworm-arm64-minbase.tar"
BINFMT=/proc/sys/fs/binfmt_misc
HANDLER=airlock-qemu-aarch64
QEMU=/usr/bin/qemu-aarch64-static
# aarch64 ELF executables, as Debian's qemu-user-static declares them (/usr/share/binfmts/qemu-aarch64).
MAGIC='\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00'
MASK='\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff'
REPO=$(cd "$(dirname "$0")/.." && pwd)

clean=0
steps=${AIRLOCK_ARM64_STEPS:-builtin,devcontainer,agents}
while [ $# -gt 0 ]; do
  case "$1" in
    --clean) clean=1 ;;
    --steps) steps=$2; shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "arm64-check: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

mkdir -p "$CACHE"
exec > >(tee "$CACHE/last-run.log") 2>&1
log() { echo "[arm64-check $(date -u +%H:%M:%S)] $*"; }
die() { log "FAILED: $*"; exit 1; }
started=$(date +%s)

[ "$(id -u)" = 0 ] || die "run as root: it registers a binfmt_misc handler and runs debootstrap"
host=$(uname -m)
[ "$host" = x86_64 ] || [ "$host" = aarch64 ] || die "this check runs on an x86-64 host (emulating arm64) or an arm64 host, not $host"
command -v docker >/dev/null || die "the docker CLI is needed (the check loads the base with it)"
docker version >/dev/null 2>&1 || die "the Docker engine does not answer; start it first"
exec 9>"$CACHE/lock"
flock -n 9 || die "another arm64 check is running ($CACHE/lock)"

need=()
command -v debootstrap >/dev/null || need+=(debootstrap)
[ "$host" = aarch64 ] || [ -x "$QEMU" ] || need+=(qemu-user-static)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >/dev/null
fi

# ---- 1. binfmt_misc: aarch64 binaries through qemu-user-static ----------------------------------
mounted_here=0
registered_here=0
renicer=
undo() {
  local rc=$?
  [ -n "$renicer" ] && kill "$renicer" 2>/dev/null || true
  if [ "$registered_here" = 1 ] && [ -e "$BINFMT/$HANDLER" ]; then echo -1 >"$BINFMT/$HANDLER" && log "unregistered binfmt handler $HANDLER"; fi
  if [ "$mounted_here" = 1 ]; then umount "$BINFMT" && log "unmounted $BINFMT"; fi
  log "finished in $(( $(date +%s) - started )) s, exit $rc"
}
trap undo EXIT

if [ "$host" = x86_64 ]; then
  if ! mountpoint -q "$BINFMT"; then
    mount -t binfmt_misc binfmt_misc "$BINFMT" || die "cannot mount binfmt_misc at $BINFMT (a container without privileges?)"
    mounted_here=1
    log "mounted binfmt_misc"
  fi
  existing=$(grep -l '^magic 7f454c460201010000000000000000000200b700' "$BINFMT"/* 2>/dev/null | head -1 || true)
  if [ -n "$existing" ]; then
    # Someone else's handler: used as it is, left in place. Containers need its F flag.
    grep -q '^enabled' "$existing" || die "the aarch64 binfmt handler $existing is disabled; enable it or remove it"
    grep -q '^flags:.*F' "$existing" || die "the aarch64 binfmt handler $existing lacks the F flag, so aarch64 programs in containers cannot find its interpreter; re-register it with F (update-binfmts --package qemu-user-static --install ... --fix-binary yes)"
    log "using the existing aarch64 handler $existing ($(grep '^interpreter' "$existing"))"
  else
    # F: the interpreter is opened now, so container root filesystems need no copy of it. P, O, C:
    # argv[0], an unreadable binary and setuid binaries behave as on a real arm64 machine.
    printf '%s' ":$HANDLER:M::$MAGIC:$MASK:$QEMU:POCF" >"$BINFMT/register" || die "registering the binfmt handler failed"
    registered_here=1
    log "registered binfmt handler $HANDLER ($QEMU, flags POCF)"
  fi
  # Other engineers share this machine's cores: every emulated process (the build's RUN steps, the
  # sandboxes) runs at nice 19. They are found by their executable, the interpreter above.
  interp=$(sed -n 's/^interpreter //p' "${existing:-$BINFMT/$HANDLER}")
  ( while sleep 2; do
      for exe in /proc/[0-9]*/exe; do
        [ "$(readlink "$exe" 2>/dev/null)" = "$interp" ] || continue
        pid=${exe#/proc/}; pid=${pid%/exe}
        renice -n 19 -p "$pid" >/dev/null 2>&1 || true
      done
    done ) &
  renicer=$!
fi

# ---- --clean: what an earlier check left in the engine --------------------------------------------
if [ "$clean" = 1 ]; then
  log "removing earlier arm64 check images"
  for img in $(docker images --format '{{.Repository}}:{{.Tag}}' | grep -E '^airlock-sandbox:(agents-)?arm64-' || true); do docker rmi -f "$img" >/dev/null && log "  removed $img"; done
  for img in $(docker images -q airlock-env | sort -u); do
    [ "$(docker image inspect -f '{{.Architecture}}' "$img" 2>/dev/null)" = arm64 ] && docker rmi -f "$img" >/dev/null && log "  removed derived image $img"
  done
  for img in $(docker images -q airlock-env-base | sort -u); do
    [ "$(docker image inspect -f '{{.Architecture}}' "$img" 2>/dev/null)" = arm64 ] && docker rmi -f "$img" >/dev/null && log "  removed devcontainer image $img"
  done
  docker image inspect "$BASE_TAG" >/dev/null 2>&1 && docker rmi -f "$BASE_TAG" >/dev/null && log "  removed $BASE_TAG"
  [ "${AIRLOCK_ARM64_FRESH_BASE:-0}" = 1 ] && rm -f "$TARBALL" && log "  removed $TARBALL"
fi

# ---- 2. the arm64 Debian base ---------------------------------------------------------------------
mirror=${AIRLOCK_ARM64_MIRROR:-}
if [ -z "$mirror" ]; then
  # The Debian mirror apt already uses (deb822 sources, then the one-line format).
  mirror=$(awk '/^URIs:/ && $2 !~ /security/ { print $2; exit }' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
  [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $3 ~ /^bookworm$/ { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true)
  [ -n "$mirror" ] || die "no Debian mirror configured for apt; set AIRLOCK_ARM64_MIRROR"
fi
if [ ! -s "$TARBALL" ]; then
  root="$CACHE/rootfs.tmp"
  rm -rf "$root"
  log "debootstrap --arch arm64 --variant=minbase bookworm (emulated second stage; several minutes)"
  t=$(date +%s)
  nice -n 19 debootstrap --arch arm64 --variant=minbase bookworm "$root" "$mirror" >"$CACHE/debootstrap.log" 2>&1 \
    || { tail -30 "$CACHE/debootstrap.log"; die "debootstrap failed (log: $CACHE/debootstrap.log)"; }
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb
  nice -n 19 tar -C "$root" --numeric-owner -cf "$TARBALL.tmp" . && mv "$TARBALL.tmp" "$TARBALL"
  rm -rf "$root"
  log "arm64 base made in $(( $(date +%s) - t )) s: $TARBALL ($(du -h "$TARBALL" | cut -f1))"
else
  log "arm64 base from the cache: $TARBALL"
fi
if [ "$(docker image inspect -f '{{.Architecture}}' "$BASE_TAG" 2>/dev/null || true)" != arm64 ]; then
  # `docker import --platform` is honoured only by an experimental daemon (20.10 records the host's
  # architecture otherwise), so the base is loaded as an image archive whose config says arm64. Its
  # dates come from the tarball, so the same tarball always gives the same image id.
  load="$CACHE/load.tmp"
  rm -rf "$load" && mkdir -p "$load/layer"
  ln "$TARBALL" "$load/layer/layer.tar" 2>/dev/null || cp "$TARBALL" "$load/layer/layer.tar"
  diff_id=$(sha256sum "$TARBALL" | cut -d' ' -f1)
  made=$(date -u -r "$TARBALL" +%Y-%m-%dT%H:%M:%SZ)
  printf '{"architecture":"arm64","os":"linux","created":"%s","config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"Cmd":["bash"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created":"%s","created_by":"debootstrap --arch arm64 --variant=minbase bookworm (scripts/arm64-check.sh)"}]}' \
    "$made" "$diff_id" "$made" >"$load/config.json"
  config_id=$(sha256sum "$load/config.json" | cut -d' ' -f1)
  mv "$load/config.json" "$load/$config_id.json"
  printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["layer/layer.tar"]}]' "$config_id" "$BASE_TAG" >"$load/manifest.json"
  tar -C "$load" -cf - manifest.json "$config_id.json" layer | docker load >/dev/null
  rm -rf "$load"
  [ "$(docker image inspect -f '{{.Architecture}}' "$BASE_TAG")" = arm64 ] || die "the engine loaded $BASE_TAG as $(docker image inspect -f '{{.Architecture}}' "$BASE_TAG"), not arm64"
  log "loaded $BASE_TAG (linux/arm64, $(docker image inspect -f '{{.Size}}' "$BASE_TAG" | awk '{ printf "%d MB", $1 / 1e6 }'))"
fi
out=$(docker run --rm --platform linux/arm64 --network none --label airlock.arm64-check=1 "$BASE_TAG" uname -m 2>/dev/null) || die "an arm64 container does not start: $out"
[ "$out" = aarch64 ] || die "an arm64 container says it runs on '$out'"
log "an arm64 container runs: uname -m = $out"

# ---- 3. build and run through the app ----------------------------------------------------------------
log "driver: steps $steps"
cd "$REPO"
# The payload (helper, built-in agent) and the CLI the driver runs, built from this checkout when stale.
nice -n 19 node scripts/build.mjs bundles --if-stale || die "building Airlock's bundles failed (above)"
AIRLOCK_SANDBOX_ARCH=arm64 AIRLOCK_SANDBOX_BASE_IMAGE="$BASE_TAG" AIRLOCK_ARM64_STEPS="$steps" \
  nice -n 19 node_modules/.bin/tsx scripts/arm64-drive.ts || die "the driver failed (above)"
log "PASS"
