import { describe, expect, it } from 'vitest';
import { extract } from 'tar-stream';
import { buildContextTar, contextHash } from './image';

const payload = { files: { 'helper.js': Buffer.from('x'), 'agent/agent.js': Buffer.from('y') }, hash: 'h' };

describe('image build context', () => {
  it('hash changes with the Dockerfile or any payload file, not with key order', () => {
    const df = Buffer.from('FROM x\n');
    const h = contextHash(df, payload);
    expect(contextHash(df, { files: { 'agent/agent.js': Buffer.from('y'), 'helper.js': Buffer.from('x') }, hash: 'other' })).toBe(h);
    expect(contextHash(Buffer.from('FROM y\n'), payload)).not.toBe(h);
    expect(contextHash(df, { ...payload, files: { ...payload.files, 'helper.js': Buffer.from('z') } })).not.toBe(h);
  });

  it('puts the Dockerfile at the root and the payload under payload/', async () => {
    const tar = await buildContextTar(Buffer.from('FROM x\n'), payload);
    const names: string[] = [];
    await new Promise<void>((resolve, reject) => {
      const ex = extract();
      ex.on('entry', (header, stream, next) => {
        names.push(header.name);
        stream.resume();
        stream.on('end', next);
      });
      ex.on('finish', resolve);
      ex.on('error', reject);
      ex.end(tar);
    });
    expect(names).toEqual(['Dockerfile', 'payload/', 'payload/agent/agent.js', 'payload/helper.js', 'certs/']);
  });

  it('refuses payload paths that escape /opt/airlock', async () => {
    await expect(buildContextTar(Buffer.from(''), { files: { '../etc/passwd': Buffer.from('') }, hash: '' })).rejects.toThrow(/inside \/opt\/airlock/);
  });
});
