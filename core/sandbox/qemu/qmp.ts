import net from 'node:net';
import { AirlockError } from '../../../contracts/errors';

/**
 * Runs one QMP command on a VM's monitor socket (`-qmp unix:…,server=on,wait=off`): greeting →
 * `qmp_capabilities` → the command; resolves with its `return` value. Asynchronous events QEMU
 * sends meanwhile are skipped. Bounded by `timeoutMs`.
 */
export function qmpCommand(socketPath: string, execute: string, args?: Record<string, unknown>, timeoutMs = 120_000): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(socketPath);
    let buf = '';
    let stage: 'greeting' | 'capabilities' | 'command' = 'greeting';
    const timer = setTimeout(() => done(new AirlockError('COMMAND_TIMEOUT', `QMP ${execute} did not answer within ${timeoutMs} ms`)), timeoutMs);
    function done(err?: Error, value?: unknown) {
      clearTimeout(timer);
      sock.destroy();
      if (err) reject(err);
      else resolve(value);
    }
    sock.on('error', (e) => done(new AirlockError('SANDBOX_FAILED', `Could not reach the VM monitor: ${e.message}`, { cause: e })));
    sock.on('close', () => done(new AirlockError('SANDBOX_FAILED', `The VM monitor closed during ${execute}`)));
    sock.on('data', (chunk: Buffer) => {
      buf += chunk.toString('utf8');
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (!line) continue;
        const msg = JSON.parse(line) as { QMP?: unknown; event?: string; return?: unknown; error?: { class: string; desc: string } };
        if (msg.event) continue;
        if (stage === 'greeting' && msg.QMP) {
          stage = 'capabilities';
          sock.write(`${JSON.stringify({ execute: 'qmp_capabilities' })}\n`);
        } else if (msg.error) {
          done(new AirlockError('SANDBOX_FAILED', `QMP ${stage === 'command' ? execute : 'qmp_capabilities'} failed: ${msg.error.desc}`));
        } else if (stage === 'capabilities') {
          stage = 'command';
          sock.write(`${JSON.stringify(args ? { execute, arguments: args } : { execute })}\n`);
        } else if (stage === 'command') {
          done(undefined, msg.return);
        }
      }
    });
  });
}
