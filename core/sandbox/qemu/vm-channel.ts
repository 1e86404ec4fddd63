import net from 'node:net';
import { PassThrough } from 'node:stream';
import { AirlockError } from '../../../contracts/errors';
import type { ChannelStream } from '../driver';
import type { LiveVm } from './vm-boot';
import { isAlive, readPidfile } from './vm-process';
import type { RunFiles } from './vm-paths';

/**
 * The channel to a VM's helper (docs/architecture.md §4): its virtio-serial port, which QEMU serves
 * as a Unix socket. The first channel of a VM this process started takes the connection made during
 * boot (a restored guest's helper said hello before the snapshot: that hello is replayed first);
 * later ones (or another process's) connect again, and the guest starts a fresh helper for each.
 */
export async function openVmChannel(runId: string, files: RunFiles, vm: LiveVm | undefined): Promise<ChannelStream> {
  let socket = vm?.firstSocket;
  if (vm) vm.firstSocket = undefined;
  if (!socket) {
    const pid = vm?.child.pid ?? (await readPidfile(files.pidfile));
    if (!pid || !isAlive(pid)) {
      throw new AirlockError('SANDBOX_FAILED', `The VM of run ${runId} is not running; create a new sandbox.`);
    }
    socket = await new Promise<net.Socket>((resolve, reject) => {
      const s = net.connect(files.channelSocket);
      s.once('connect', () => resolve(s));
      s.once('error', (e) => reject(new AirlockError('CHANNEL_CLOSED', `Could not connect to the VM of run ${runId}: ${e.message}`, { cause: e })));
    });
  }
  const s = socket;
  s.setNoDelay(true);
  let closed = false;
  let readable: NodeJS.ReadableStream = s;
  const hello = vm?.hello;
  if (vm && hello) {
    vm.hello = undefined;
    const replay = new PassThrough();
    replay.write(hello);
    s.pipe(replay);
    s.once('close', () => replay.end());
    readable = replay;
  }
  return {
    readable,
    writable: s,
    close: () => {
      if (closed) return;
      closed = true;
      s.end();
      s.destroy();
    },
  };
}
