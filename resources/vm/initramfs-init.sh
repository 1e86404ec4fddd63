#!/bin/busybox sh
# /init of Airlock's VM initramfs (built by scripts/prepare-vm-assets.sh). PID 1 until the root
# disk is mounted: load the virtio drivers (modules in the Debian cloud kernel), mount the per-run
# root disk read-only, and hand over to the guest init shipped on that disk
# (/opt/airlock-vm/init, from resources/vm/guest-init.sh). Any failure powers the VM off, so QEMU
# (started with -no-reboot) exits and the host reports the console log.
/bin/busybox --install -s /bin
export PATH=/bin

die() {
  echo "airlock-initramfs: $*" >/dev/console
  echo "airlock-initramfs: devices: $(ls /dev | tr '\n' ' ')" >/dev/console
  echo "airlock-initramfs: virtio: $(ls /sys/bus/virtio/devices 2>/dev/null | tr '\n' ' ')" >/dev/console
  poweroff -f
}

mount -t devtmpfs devtmpfs /dev || die "cannot mount /dev"
mount -t proc proc /proc
mount -t sysfs sysfs /sys
# Order matters: each module needs the ones before it.
for m in virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci virtio_blk virtio_console; do
  insmod "/lib/modules/$m.ko" || die "cannot load kernel module $m"
done

# Devices appear asynchronously after the PCI probe; wait up to ~30 s (slow under emulation).
# Ports are found by name (their /dev/vportNpM number depends on PCI order) and linked where udev
# would put them: /dev/virtio-ports/<name>.
i=0
while :; do
  mkdir -p /dev/virtio-ports
  for p in /sys/class/virtio-ports/*; do
    [ -f "$p/name" ] || continue
    n=$(cat "$p/name")
    [ -n "$n" ] && [ ! -e "/dev/virtio-ports/$n" ] && ln -s "../${p##*/}" "/dev/virtio-ports/$n"
  done
  [ -b /dev/vda ] && [ -b /dev/vdb ] && [ -e /dev/virtio-ports/airlock.channel ] && [ -e /dev/virtio-ports/airlock.log ] && break
  i=$((i + 1))
  [ "$i" -gt 600 ] && die "virtio disks or the channel port did not appear"
  usleep 50000
done

mkdir -p /newroot
mount -t ext4 -o ro,noatime /dev/vda /newroot || die "cannot mount the root disk /dev/vda"
[ -x /newroot/opt/airlock-vm/init ] || die "the root disk has no /opt/airlock-vm/init (rebuild the VM base disk)"
mount --move /dev /newroot/dev
umount /sys
umount /proc
exec switch_root /newroot /opt/airlock-vm/init
