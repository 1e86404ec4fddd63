import { describe, expect, it } from 'vitest';
import { AirlockError } from '../../../contracts/errors';
import { engineConnectError, resolveEngineEndpoint } from './engine';

const local = (host: string) => resolveEngineEndpoint({ DOCKER_HOST: host, PATH: process.env.PATH });

describe('engine errors', () => {
  it('maps connection failures of a local engine to typed errors with what to do', async () => {
    const endpoint = await local('unix:///nowhere.sock');
    const refused = await engineConnectError(Object.assign(new Error('x'), { code: 'ECONNREFUSED' }), endpoint, { DOCKER_HOST: 'unix:///nowhere.sock' });
    expect(refused).toBeInstanceOf(AirlockError);
    expect(refused?.kind).toBe('DOCKER_NOT_RUNNING');
    expect(refused?.message).toMatch(/DOCKER_HOST/);
    const denied = await engineConnectError(Object.assign(new Error('x'), { code: 'EACCES' }), endpoint, {});
    expect(denied?.kind).toBe('DOCKER_PERMISSION_DENIED');
    expect(denied?.message).toMatch(/docker' group/);
    const notInstalled = await engineConnectError(Object.assign(new Error('x'), { code: 'ENOENT' }), { ...endpoint, guessed: true }, { PATH: '/nonexistent' });
    expect(notInstalled?.kind).toBe('DOCKER_NOT_INSTALLED');
    expect(await engineConnectError(new Error('something else'), endpoint, {})).toBeUndefined();
  });

  it('a remote engine that drops or refuses says where, why and what to do', async () => {
    const endpoint = await local('ssh://me@build-box');
    endpoint.options.agent?.destroy();
    const dropped = await engineConnectError(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }), endpoint, {});
    expect(dropped?.kind).toBe('DOCKER_UNREACHABLE');
    expect(dropped?.message).toMatch(/over SSH at build-box/);
    expect(dropped?.message).toMatch(/results already collected are kept/);
    const hostKey = await engineConnectError(Object.assign(new Error('ssh exited 255: Host key verification failed.'), { code: 'EHOSTKEY' }), endpoint, {});
    expect(hostKey?.message).toMatch(/ssh build-box/);
    const auth = await engineConnectError(Object.assign(new Error('ssh exited 255: Permission denied (publickey).'), { code: 'EAUTH' }), endpoint, {});
    expect(auth?.message).toMatch(/ssh-agent/);
  });
});
