import { createServer, connect as netConnect, type AddressInfo } from 'node:net';
import { ChannelClient } from './channel-client';
import { startLocalHelper } from './local-helper';
import { mkdir } from 'node:fs/promises';
const h = await startLocalHelper();
const c = await ChannelClient.connect(h.stream);
try { await c.writeFile('/etc/hostname/x', 'x'); } catch (e) { console.log(e); }
const dead = createServer(); await new Promise<void>((r) => dead.listen(0, '127.0.0.1', r));
const deadPort = (dead.address() as AddressInfo).port; await new Promise<void>((r) => dead.close(() => r()));
const exposed = await c.exposeHostService(0, () => netConnect({ host: '127.0.0.1', port: deadPort }));
const script = `
      const net = require('net');
      const s = net.connect({ host: '127.0.0.1', port: ${exposed.port}, allowHalfOpen: true });
      let got = '';
      s.on('data', (d) => { got += d; });
      s.on('end', () => { process.stdout.write(got + '|end'); });
      s.on('error', (e) => { process.stdout.write('ERR ' + e.code); });
      s.on('close', () => process.stdout.write('|closed'));
`;
const r = await c.run({ argv: [process.execPath, '-e', script], timeoutMs: 15000 });
console.log(r, r.stdout.toString(), r.stderr.toString(), h.stderr());
c.dispose(); await h.dispose();
