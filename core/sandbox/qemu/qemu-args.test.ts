import { describe, expect, it } from 'vitest';
import { buildQemuArgs, qemuOptionValue, type QemuLaunch } from './qemu-args';
import { isSafeRunId, runFiles } from './vm-paths';

const launch = (over: Partial<QemuLaunch> = {}): QemuLaunch => ({
  runId: 'r-1',
  accel: 'tcg',
  cpus: 2,
  memoryMiB: 1024,
  kernel: '/a/vmlinuz',
  initramfs: '/a/initramfs.img',
  files: runFiles('/runs', 'r-1'),
  deadlineSeconds: 600,
  seccomp: true,
  ...over,
});

function optionAfter(args: string[], flag: string): string[] {
  return args.flatMap((a, i) => (a === flag ? [args[i + 1] as string] : []));
}

describe('buildQemuArgs', () => {
  it('gives the guest no network card at all', () => {
    const args = buildQemuArgs(launch());
    expect(args).toContain('-nodefaults');
    expect(optionAfter(args, '-nic')).toEqual(['none']);
    expect(args.join(' ')).not.toMatch(/netdev|virtio-net|e1000|user,|hostfwd/);
  });

  it('attaches the overlay, the scratch disk and the two virtio-serial ports from the run directory', () => {
    const args = buildQemuArgs(launch());
    expect(optionAfter(args, '-drive')).toEqual([
      'file=/runs/r-1/root.qcow2,if=none,id=root,format=qcow2,discard=unmap',
      'file=/runs/r-1/scratch.img,if=none,id=scratch,format=raw,discard=unmap',
    ]);
    expect(optionAfter(args, '-chardev')).toEqual([
      'socket,id=channel,path=/runs/r-1/ch.sock,server=on,wait=off',
      'socket,id=helperlog,path=/runs/r-1/hl.sock,server=on,wait=off',
      'socket,id=config,path=/runs/r-1/cfg.sock,server=on,wait=off',
    ]);
    expect(optionAfter(args, '-device')).toContain('virtserialport,bus=vser.0,nr=3,chardev=config,name=airlock.config');
    expect(args).not.toContain('-incoming');
    expect(optionAfter(args, '-device')).toContain('virtserialport,bus=vser.0,nr=1,chardev=channel,name=airlock.channel');
    expect(optionAfter(args, '-pidfile')).toEqual(['/runs/r-1/qemu.pid']);
  });

  it('applies the CPU and memory limits and the guest deadline', () => {
    const args = buildQemuArgs(launch({ cpus: 3, memoryMiB: 2048, deadlineSeconds: 90 }));
    expect(optionAfter(args, '-smp')).toEqual(['3']);
    expect(optionAfter(args, '-m')).toEqual(['2048M']);
    expect(optionAfter(args, '-append')[0]).toContain('AIRLOCK_DEADLINE=90');
    expect(optionAfter(args, '-append')[0]).toContain('panic=-1');
    expect(args).toContain('-no-reboot');
  });

  it('uses KVM with the host CPU when available, TCG with an emulated CPU otherwise', () => {
    expect(optionAfter(buildQemuArgs(launch({ accel: 'kvm' })), '-machine')).toEqual(['q35,accel=kvm']);
    expect(optionAfter(buildQemuArgs(launch({ accel: 'kvm' })), '-cpu')).toEqual(['host']);
    const tcg = buildQemuArgs(launch({ accel: 'tcg' }));
    expect(optionAfter(tcg, '-accel')).toEqual(['tcg,thread=multi']);
    expect(optionAfter(tcg, '-cpu')).toEqual(['max']);
  });

  it('confines QEMU itself with its seccomp sandbox when the build has it', () => {
    expect(optionAfter(buildQemuArgs(launch()), '-sandbox')).toEqual(['on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny']);
    expect(buildQemuArgs(launch({ seccomp: false }))).not.toContain('-sandbox');
  });

  it('escapes commas in paths so they cannot add QEMU options', () => {
    expect(qemuOptionValue('/a,b/c')).toBe('/a,,b/c');
    const args = buildQemuArgs(launch({ files: runFiles('/x,readonly=off', 'r-1') }));
    expect(optionAfter(args, '-drive')[0]).toBe('file=/x,,readonly=off/r-1/root.qcow2,if=none,id=root,format=qcow2,discard=unmap');
  });
});

describe('isSafeRunId', () => {
  it('accepts run ids and refuses path tricks', () => {
    expect(isSafeRunId('r-mx2f3urg-0a1b2c3d')).toBe(true);
    for (const bad of ['', '../etc', 'a/b', '.hidden', 'a..b', 'x'.repeat(65), 'a b']) expect(isSafeRunId(bad), bad).toBe(false);
  });
});
