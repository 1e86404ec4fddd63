import path from 'node:path';
import type { VmAccel } from './accel';
import type { RunFiles } from './vm-paths';

/** The run's configuration port (seed, deadline, run id; see guest-init.sh) ⇄ this socket. */
export function configSocketOf(files: RunFiles): string {
  return path.join(files.dir, 'cfg.sock');
}

export interface QemuLaunch {
  runId: string;
  accel: VmAccel;
  cpus: number;
  memoryMiB: number;
  kernel: string;
  initramfs: string;
  files: RunFiles;
  /** Guest-side wall clock limit in seconds (0 = none); the guest powers itself off after it. */
  deadlineSeconds: number;
  /** QEMU's own seccomp sandbox (`-sandbox on,…`); on unless the build lacks it. */
  seccomp: boolean;
  /** `qcow2` when the scratch disk is an overlay over a snapshot's scratch template. Default raw. */
  scratchFormat?: 'raw' | 'qcow2';
  /** Wait for the VM state to arrive (`-incoming defer`, then QMP `migrate-incoming`): a restore from a snapshot. */
  incoming?: boolean;
}

/**
 * The QEMU command line of a run's VM (qemu-system-x86_64). The guest has:
 * - no NIC at all (`-nodefaults -nic none`): inside, only `lo` exists;
 * - /dev/vda: the per-run qcow2 overlay over the image's read-only base disk (mounted read-only);
 * - /dev/vdb: the per-run scratch disk (ext4, size = the disk limit) for /workspace, /airlock, /tmp, $HOME;
 * - /dev/vport0p1: the channel (virtio-serial) ⇄ a Unix socket in the run directory;
 * - /dev/vport0p2: the helper's stderr ⇄ a Unix socket the host reads into a capped log file;
 * - /dev/vport0p3: the run's configuration (seed, deadline, run id) ⇄ a Unix socket in the run directory;
 * - the serial console ⇄ console.log in the run directory (boot failures are reported from it).
 */
export function buildQemuArgs(l: QemuLaunch): string[] {
  const f = l.files;
  const q = qemuOptionValue;
  const cmdline = [
    'console=ttyS0',
    'quiet',
    'loglevel=3',
    // A kernel panic powers off (with -no-reboot QEMU exits) instead of hanging.
    'panic=-1',
    'rdinit=/init',
    // No need for these on a disposable single-purpose VM; they only slow the boot.
    'nokaslr',
    'random.trust_cpu=on',
    'tsc=reliable',
    'no_timer_check',
    'i8042.noaux',
    'i8042.nokbd',
    // Unknown `KEY=value` parameters become environment variables of /init.
    `AIRLOCK_DEADLINE=${Math.max(0, Math.floor(l.deadlineSeconds))}`,
  ].join(' ');
  const args = [
    '-name', `airlock-${l.runId}`,
    '-nodefaults',
    '-no-user-config',
    '-display', 'none',
    '-no-reboot',
    '-machine', l.accel === 'tcg' ? 'q35' : `q35,accel=${l.accel}`,
    ...(l.accel === 'tcg' ? ['-accel', 'tcg,thread=multi'] : []),
    '-cpu', l.accel === 'tcg' ? 'max' : 'host',
    '-smp', String(Math.max(1, Math.floor(l.cpus))),
    '-m', `${Math.max(128, Math.floor(l.memoryMiB))}M`,
    '-kernel', l.kernel,
    '-initrd', l.initramfs,
    '-append', cmdline,
    '-nic', 'none',
    '-drive', `file=${q(f.overlay)},if=none,id=root,format=qcow2,discard=unmap`,
    '-device', 'virtio-blk-pci,drive=root',
    '-drive', `file=${q(f.scratch)},if=none,id=scratch,format=${l.scratchFormat ?? 'raw'},discard=unmap`,
    '-device', 'virtio-blk-pci,drive=scratch',
    '-device', 'virtio-serial-pci,id=vser',
    '-chardev', `socket,id=channel,path=${q(f.channelSocket)},server=on,wait=off`,
    '-device', 'virtserialport,bus=vser.0,nr=1,chardev=channel,name=airlock.channel',
    // A socket, not a file: the host keeps a capped log of it (capped-log.ts); a file would grow with whatever the guest writes.
    '-chardev', `socket,id=helperlog,path=${q(f.helperLogSocket)},server=on,wait=off`,
    '-device', 'virtserialport,bus=vser.0,nr=2,chardev=helperlog,name=airlock.log',
    '-chardev', `socket,id=config,path=${q(configSocketOf(f))},server=on,wait=off`,
    '-device', 'virtserialport,bus=vser.0,nr=3,chardev=config,name=airlock.config',
    '-serial', `file:${q(f.console)}`,
    // The monitor, host-side only (a Unix socket in the run directory): memory dumps for leak scans.
    '-qmp', `unix:${q(f.qmpSocket)},server=on,wait=off`,
    '-pidfile', f.pidfile,
    ...(l.incoming ? ['-incoming', 'defer'] : []),
  ];
  if (l.seccomp) {
    args.push('-sandbox', 'on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny');
  }
  return args;
}

/** A path inside a QEMU option list: commas separate options, so a literal comma is doubled. */
export function qemuOptionValue(p: string): string {
  return p.replaceAll(',', ',,');
}
