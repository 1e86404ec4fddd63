import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LimitError } from '../../core/common/limit-error';
import { readCapped } from '../../core/mcp/sandbox-read';
import { requirePrerequisite } from '../support/prerequisites';
import { createRunFixture, type RunFixture } from '../support/run-fixture';

const docker = await requirePrerequisite('docker');

// Issue 39: limits travel as typed errors. sandbox_read_file's cap is a LimitError, told apart by its
// class and `limit`, never by the helper's words; any other failure is not one.
describe.skipIf(!docker.ok)("sandbox_read_file's cap, read from a live MCP session's sandbox (real Docker)", () => {
  let fx: RunFixture;
  let projectDir: string;

  beforeAll(async () => {
    fx = await createRunFixture();
    projectDir = await fx.project({ 'hundred.txt': 'x'.repeat(100) });
  }, 600_000);
  afterAll(async () => {
    await fx?.close();
  });

  it('a file at the cap is read whole; one byte over is a LimitError (file-bytes); a missing file is not a limit', async () => {
    const session = await fx.core.runs.startSession({ projectDir, client: 'read-cap-test', isolation: 'container', network: 'none', timeoutSec: 600 });
    try {
      const channel = fx.core.runs.sessionSandbox(session.id).channel;
      expect((await readCapped(channel, '/workspace/hundred.txt', 100)).toString('utf8')).toBe('x'.repeat(100));
      const over: unknown = await readCapped(channel, '/workspace/hundred.txt', 99).catch((err: unknown) => err);
      expect(over).toBeInstanceOf(LimitError);
      expect(over).toMatchObject({ kind: 'INVALID_INPUT', limit: 'file-bytes', cap: 99, message: expect.stringContaining('larger than the 99-byte cap') });
      const missing: unknown = await readCapped(channel, '/workspace/no-such-file', 99).catch((err: unknown) => err);
      expect(missing).toBeInstanceOf(Error);
      expect(missing).not.toBeInstanceOf(LimitError);
    } finally {
      await fx.core.runs.endSession(session.id, 'test over');
    }
  }, 600_000);
});
