import { describe, expect, it } from 'vitest';
import { AirlockError } from '../../../contracts/errors';
import { parseStdioCommand } from './stdio-command';
import { packageName } from './stdio-sidecar';

describe('parseStdioCommand (docs/architecture.md §20)', () => {
  it('turns npx -y PKG@VER ARGS into a package fetched on the host and the arguments of its program', () => {
    expect(parseStdioCommand(['npx', '-y', '@modelcontextprotocol/server-everything@2026.8.31', 'stdio'])).toEqual({ package: '@modelcontextprotocol/server-everything@2026.8.31', command: ['stdio'] });
    expect(parseStdioCommand(['npx', 'some-server'])).toEqual({ package: 'some-server', command: [] });
  });

  it('keeps any other command as is (it runs in the sidecar), and with --image even npx', () => {
    expect(parseStdioCommand(['node', '/srv/index.js'], { env: ['MODE=ro'] })).toEqual({ command: ['node', '/srv/index.js'], env: { MODE: 'ro' } });
    expect(parseStdioCommand(['npx', '-y', 'x'], { image: 'ghcr.io/acme/mcp:1' })).toEqual({ command: ['npx', '-y', 'x'], image: 'ghcr.io/acme/mcp:1' });
  });

  it('refuses no command, a flag for a package, a bad env pair or a package spec that is not one', () => {
    for (const [cmd, env] of [[[], []], [['npx', '-y'], []], [['npx', '--registry', 'x'], []], [['node'], ['NOEQUALS']], [['node'], ['1BAD=x']], [['npx', '-y', '../../etc'], []]] as Array<[string[], string[]]>) {
      expect(() => parseStdioCommand(cmd, { env })).toThrow(AirlockError);
    }
  });

  it('names the package of a spec', () => {
    expect(packageName('@scope/name@1.2.3')).toBe('@scope/name');
    expect(packageName('name@^2')).toBe('name');
    expect(packageName('name')).toBe('name');
  });
});
