#!/opt/airlock-vm/busybox sh
# PID 1 of an Airlock VM after switch_root (installed on the base disk as /opt/airlock-vm/init by
# core/sandbox/qemu/base-disk.ts). The root filesystem is the sandbox image, mounted read-only like
# the Docker sandbox's; everything a run may write lives on the per-run scratch disk /dev/vdb:
#   /workspace, /airlock, /tmp, $HOME  ->  bind mounts of directories on /dev/vdb (size = disk limit)
# Networking: the VM has no NIC (-nic none); only `lo` is brought up, for the channel's TCP forwards.
# The helper runs as the image's user with no capabilities and no_new_privs, its stdin/stdout on the
# virtio-serial port named airlock.channel (the channel; /dev/virtio-ports/airlock.channel, linked by the
# initramfs), stderr on the port airlock.log (a log file on the host).
BB=/opt/airlock-vm/busybox
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

say() { echo "airlock-guest: $*" >/dev/console; }
die() {
  say "$*"
  $BB poweroff -f
}

. /opt/airlock-vm/config.sh || die "missing /opt/airlock-vm/config.sh"

$BB mount -t proc -o nosuid,nodev,noexec proc /proc
$BB mount -t sysfs -o nosuid,nodev,noexec sysfs /sys
$BB mount -t tmpfs -o nosuid,nodev,mode=0755,size=16m tmpfs /run || die "cannot mount /run"
$BB mkdir -p /dev/pts /dev/shm
$BB mount -t devpts -o nosuid,noexec,gid=5,mode=0620,ptmxmode=0666 devpts /dev/pts
$BB mount -t tmpfs -o nosuid,nodev,mode=1777,size=64m tmpfs /dev/shm
[ -e /dev/ptmx ] || $BB ln -s pts/ptmx /dev/ptmx

$BB mkdir -p /run/scratch
$BB mount -t ext4 -o nosuid,nodev,noatime,noinit_itable /dev/vdb /run/scratch || die "cannot mount the scratch disk /dev/vdb"
for d in workspace airlock home tmp; do $BB mkdir -p "/run/scratch/$d"; done
$BB chown "$AIRLOCK_UID:$AIRLOCK_GID" /run/scratch/workspace /run/scratch/airlock /run/scratch/home
$BB chmod 0755 /run/scratch/workspace /run/scratch/airlock /run/scratch/home
$BB chmod 1777 /run/scratch/tmp
$BB mount --bind /run/scratch/workspace /workspace || die "cannot mount /workspace"
$BB mount --bind /run/scratch/airlock /airlock || die "cannot mount /airlock"
$BB mount --bind /run/scratch/tmp /tmp || die "cannot mount /tmp"
if [ -n "$AIRLOCK_HOME_DIR" ] && [ -d "$AIRLOCK_HOME_DIR" ]; then
  $BB mount --bind /run/scratch/home "$AIRLOCK_HOME_DIR" || die "cannot mount $AIRLOCK_HOME_DIR"
fi

$BB ip link set lo up || die "cannot bring up lo"
$BB hostname airlock

# Wall clock limit, enforced inside the guest too, so a VM outlives no crashed host process for long.
if [ -n "$AIRLOCK_DEADLINE" ] && [ "$AIRLOCK_DEADLINE" -gt 0 ] 2>/dev/null; then
  ( $BB sleep "$AIRLOCK_DEADLINE"; say "wall clock limit reached"; $BB poweroff -f ) &
fi

[ -x /usr/bin/setpriv ] || die "the image has no /usr/bin/setpriv (util-linux): cannot drop privileges"

# The helper exits when the host closes the channel; start it again for the next connection.
while :; do
  (
    cd "$AIRLOCK_WORKDIR" || cd /
    exec $BB env -i /usr/bin/setpriv --reuid="$AIRLOCK_UID" --regid="$AIRLOCK_GID" --clear-groups \
      --no-new-privs --inh-caps=-all --bounding-set=-all \
      $BB sh -c '. /opt/airlock-vm/env.sh; exec "$@"' airlock-helper $AIRLOCK_HELPER
  ) <>/dev/virtio-ports/airlock.channel >&0 2>>/dev/virtio-ports/airlock.log
  $BB sleep 1
done
