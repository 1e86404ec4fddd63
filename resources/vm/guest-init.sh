#!/opt/airlock-vm/busybox sh
# PID 1 of an Airlock VM after switch_root (installed on the base disk as /opt/airlock-vm/init by
# core/sandbox/qemu/base-disk.ts). The root filesystem is the sandbox image, mounted read-only like
# the Docker sandbox's; everything a run may write lives on the per-run scratch disk /dev/vdb:
#   /workspace, /airlock, /tmp, $HOME  ->  bind mounts of directories on /dev/vdb (size = disk limit)
# Networking: the VM has no NIC (-nic none); only `lo` is brought up, for the channel's TCP forwards.
# The helper runs as root with only SETUID, SETGID and KILL (bounding set cut to
# those, no inheritable ones) and no_new_privs, out of the agent's reach; it starts every command
# as the image's user, whom the kernel leaves no capability (docs/architecture.md §2.3). Its stdin/stdout on the
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
$BB chown "$AIRLOCK_UID:$AIRLOCK_GID" /run/scratch/workspace /run/scratch/home
$BB chown 0:0 /run/scratch/airlock
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

# The run's own configuration arrives from the host on the port airlock.config, after a cold boot as
# after a restore from a snapshot (where every clone starts from this very point): one line
#   seed=<64 hex> deadline=<seconds> run=<run id>
# The seed is mixed into the kernel's pool and the CRNG reseeded from it (RNDRESEEDCRNG, root only),
# so clones of one snapshot never share random bytes; the answer is "ok" or "err <why>". Reading the
# port returns at once (EOF) while no host is connected, hence the retries. Perl (Essential in
# Debian, so in every Debian-based image) is started before the snapshot and waits in its read, so
# a restored VM pays no process start-up for it; python3, then nothing, are the fallbacks.
CONFIGURE_PL='
use strict;
my $bb = "/opt/airlock-vm/busybox";
my $line = "";
while ($line !~ /\n/ && length($line) < 4096) {
  my $n = sysread(STDIN, my $buf, 512);
  if (!$n) { select(undef, undef, undef, 0.1); next; }
  $line .= $buf;
}
sub answer { syswrite(STDOUT, "$_[0]\n"); exit 0 }
my %c = map { /^(seed|deadline|run)=(.*)$/ ? ($1, $2) : () } split(/\s+/, $line);
answer("err bad seed") unless ($c{seed} // "") =~ /^[0-9a-f]{64}$/;
answer("err bad run id") unless ($c{run} // "") =~ /^[A-Za-z0-9_.-]{1,64}$/;
answer("err bad deadline") unless ($c{deadline} // "") =~ /^[0-9]{1,9}$/;
open(my $r, ">", "/dev/urandom") or answer("err urandom: $!");
syswrite($r, pack("H*", $c{seed})) == 32 or answer("err short write to urandom");
ioctl($r, 0x5207, 0) or answer("err RNDRESEEDCRNG: $!");
close($r);
open(my $f, ">", "/run/airlock-run-id") or answer("err run id: $!");
print $f "$c{run}\n";
close($f);
chmod(0444, "/run/airlock-run-id");
if ($c{deadline} > 0 && fork() == 0) {
  open(STDIN, "<", "/dev/null");
  open(STDOUT, ">", "/dev/null");
  exec($bb, "sh", "-c", "$bb sleep $c{deadline}; echo airlock-guest: wall clock limit reached >/dev/console; $bb poweroff -f");
}
answer("ok");
'
configure() {
  port=
  i=0
  while [ -z "$port" ]; do
    for p in /sys/class/virtio-ports/*; do
      [ "$(cat "$p/name" 2>/dev/null)" = airlock.config ] && port=/dev/${p##*/}
    done
    i=$((i + 1))
    [ -z "$port" ] && { [ "$i" -gt 300 ] && die "no configuration port"; $BB usleep 100000; }
  done
  exec 3<>"$port" || die "cannot open the configuration port"
  if command -v perl >/dev/null 2>&1; then
    perl -e "$CONFIGURE_PL" <&3 >&3
    return
  fi
  while :; do
    line=
    IFS= read -r line <&3 && [ -n "$line" ] && break
    $BB usleep 100000
  done
  seed= deadline= run=
  for kv in $line; do
    case "$kv" in
      seed=*) seed=${kv#seed=} ;;
      deadline=*) deadline=${kv#deadline=} ;;
      run=*) run=${kv#run=} ;;
    esac
  done
  case "$seed" in *[!0-9a-f]*|'') echo "err bad seed" >&3; return ;; esac
  [ ${#seed} -eq 64 ] || { echo "err bad seed" >&3; return; }
  case "$run" in *[!A-Za-z0-9_.-]*|'') echo "err bad run id" >&3; return ;; esac
  case "$deadline" in *[!0-9]*|'') echo "err bad deadline" >&3; return ;; esac
  command -v python3 >/dev/null 2>&1 || { echo "err the image has neither perl nor python3 to reseed the kernel RNG" >&3; return; }
  python3 -c 'import fcntl, os, sys; f = os.open("/dev/urandom", os.O_WRONLY); os.write(f, bytes.fromhex(sys.argv[1])); fcntl.ioctl(f, 0x5207)' "$seed" 2>/dev/null || { echo "err could not reseed the kernel RNG" >&3; return; }
  echo "$run" >/run/airlock-run-id
  $BB chmod 0444 /run/airlock-run-id
  if [ "$deadline" -gt 0 ]; then
    ( $BB sleep "$deadline"; say "wall clock limit reached"; $BB poweroff -f ) &
  fi
  echo ok >&3
}
configure &

# The helper exits when the host closes the channel; start it again for the next connection.
while :; do
  (
    cd "$AIRLOCK_WORKDIR" || cd /
    # Airlock's fixed environment only, never the image's ENV (NODE_OPTIONS, LD_PRELOAD... would load
    # code into the root helper); commands get the image's ENV from the host (docs/architecture.md §2.3).
    exec $BB env -i AIRLOCK_AGENT_USER="$AIRLOCK_UID:$AIRLOCK_GID" HOME="$AIRLOCK_HOME_DIR" LANG=C.UTF-8 \
      PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin /usr/bin/setpriv --clear-groups \
      --no-new-privs --inh-caps=-all --bounding-set=-all,+setuid,+setgid,+kill $AIRLOCK_HELPER
  ) <>/dev/virtio-ports/airlock.channel >&0 2>>/dev/virtio-ports/airlock.log
  $BB sleep 1
done
