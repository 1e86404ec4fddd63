#!/usr/bin/env bash
# Prepares what Airlock's QEMU driver boots (Linux, x86-64, Debian/Ubuntu):
#   - installs qemu-system-x86, qemu-utils, busybox-static, e2fsprogs with apt when missing (as root);
#   - <assets>/vmlinuz         the Debian cloud kernel (linux-image-<ver>-cloud-amd64, unpacked with dpkg -x)
#   - <assets>/initramfs.img   busybox + the kernel's virtio modules + resources/vm/initramfs-init.sh
#   - <assets>/busybox         static busybox, installed on each base disk for the guest init
#   - <assets>/manifest.json   what was built (kernel version, hash of the init script)
# <assets> is $AIRLOCK_VM_ASSETS, else <airlockHome()>/vm (AIRLOCK_HOME, else ~/.local/share/airlock).
# The per-image base disks are made on first use by core/sandbox/qemu/base-disk.ts, not here.
# Idempotent: does nothing when the assets match the current init script.
set -euo pipefail
log() { printf '[prepare-vm-assets] %s\n' "$*"; }
here=$(cd "$(dirname "$0")/.." && pwd)

# The QEMU driver boots an x86-64 guest (Debian's cloud-amd64 kernel, q35, ttyS0) and refuses other
# hosts itself (core/sandbox/qemu/qemu-driver.ts checkAvailable); an arm64 kernel here would boot nothing.
if [ "$(uname -s)" != Linux ]; then
  log "only Linux hosts are prepared by this script (macOS: the Lima driver; Windows: WSL2; see resources/vm/README.md)"
  exit 0
fi
if [ "$(uname -m)" != x86_64 ]; then
  log "this host is $(uname -m): Airlock's QEMU VM isolation supports x86-64 Linux hosts only; use container isolation here (resources/vm/README.md)"
  exit 1
fi

home=${AIRLOCK_HOME:-${XDG_DATA_HOME:-$HOME/.local/share}/airlock}
assets=${AIRLOCK_VM_ASSETS:-$home/vm}
init_src="$here/resources/vm/initramfs-init.sh"
init_hash=$(sha256sum "$init_src" | cut -c1-16)

need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
command -v qemu-img >/dev/null || need+=(qemu-utils)
# The initramfs needs a static busybox (Debian's busybox-static replaces the dynamic one).
dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' || need+=(busybox-static)
command -v mke2fs >/dev/null || need+=(e2fsprogs)
command -v cpio >/dev/null || need+=(cpio)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    log "missing: ${need[*]} — install them with: sudo apt-get install ${need[*]}"
    exit 1
  fi
  log "installing: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if [ -f "$assets/manifest.json" ] && [ -f "$assets/vmlinuz" ] && [ -f "$assets/initramfs.img" ] && [ -x "$assets/busybox" ] \
   && grep -q "\"initHash\": \"$init_hash\"" "$assets/manifest.json"; then
  log "assets up to date in $assets"
  exit 0
fi

mkdir -p "$assets"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The kernel package the meta-package currently points at, e.g. linux-image-6.1.0-57-cloud-amd64.
pkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
if [ -z "$pkg" ]; then
  [ "$(id -u)" = 0 ] && apt-get update -qq
  pkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
fi
[ -n "$pkg" ] || { log "apt knows no linux-image-cloud-amd64 (is this Debian? run apt-get update)"; exit 1; }
log "kernel package: $pkg"
download() { (cd "$work" && chmod 777 . && apt-get download "$pkg" >/dev/null 2>&1); }
if ! download; then
  # Stale package lists name a kernel the mirror no longer has: refresh once and ask again.
  [ "$(id -u)" = 0 ] && apt-get update -qq
  pkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
  download || { log "apt-get download $pkg failed (run apt-get update)"; exit 1; }
fi
dpkg -x "$work"/linux-image-*.deb "$work/k"
kver=${pkg#linux-image-}
moddir="$work/k/lib/modules/$kver"

# The initramfs: static busybox, the virtio modules (uncompressed .ko in Debian's package), /init.
ir="$work/initramfs"
mkdir -p "$ir/bin" "$ir/dev" "$ir/proc" "$ir/sys" "$ir/newroot" "$ir/lib/modules"
cp /bin/busybox "$ir/bin/busybox"
for m in virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci virtio_blk virtio_console; do
  f=$(find "$moddir" -name "$m.ko*" | head -1)
  [ -n "$f" ] || { log "module $m not found in $pkg"; exit 1; }
  case "$f" in
    *.ko.xz) xz -dc "$f" >"$ir/lib/modules/$m.ko" ;;
    *.ko.zst) zstd -qdc "$f" >"$ir/lib/modules/$m.ko" ;;
    *) cp "$f" "$ir/lib/modules/$m.ko" ;;
  esac
done
cp "$init_src" "$ir/init"
chmod 0755 "$ir/init" "$ir/bin/busybox"
(cd "$ir" && find . -print0 | cpio --null -o -H newc --quiet | gzip -1) >"$work/initramfs.img"

install -m 0644 "$work/k/boot/vmlinuz-$kver" "$assets/vmlinuz.tmp" && mv -f "$assets/vmlinuz.tmp" "$assets/vmlinuz"
install -m 0644 "$work/initramfs.img" "$assets/initramfs.img.tmp" && mv -f "$assets/initramfs.img.tmp" "$assets/initramfs.img"
install -m 0755 /bin/busybox "$assets/busybox.tmp" && mv -f "$assets/busybox.tmp" "$assets/busybox"
cat >"$assets/manifest.json.tmp" <<EOF
{
  "kernelPackage": "$pkg",
  "kernelVersion": "$kver",
  "initHash": "$init_hash",
  "builtAt": "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
}
EOF
mv -f "$assets/manifest.json.tmp" "$assets/manifest.json"
log "assets ready in $assets (kernel $kver)"
