import { describe, expect, it } from 'vitest';
import { AirlockError } from '../../../contracts/errors';
import { engineConnectError, parseDockerHost, resolveEngineEndpoint } from './engine';

describe('engine endpoint', () => {
  it('parses DOCKER_HOST forms', () => {
    expect(parseDockerHost('unix:///run/user/1000/podman/podman.sock').options).toEqual({ socketPath: '/run/user/1000/podman/podman.sock' });
    expect(parseDockerHost('tcp://127.0.0.1:2375', {}).options).toEqual({ host: '127.0.0.1', port: 2375, protocol: 'http' });
    expect(parseDockerHost('tcp://127.0.0.1:2376', { DOCKER_TLS_VERIFY: '1' }).options).toMatchObject({ protocol: 'https' });
    expect(parseDockerHost('npipe:////./pipe/docker_engine').options).toEqual({ socketPath: '//./pipe/docker_engine' });
  });

  it('rejects a malformed DOCKER_HOST with the accepted forms', () => {
    expect(() => parseDockerHost('ssh://me@box')).toThrow(/unix:\/\/.*tcp:\/\/host:port/);
  });

  it('DOCKER_HOST wins over the well-known sockets', async () => {
    const e = await resolveEngineEndpoint({ DOCKER_HOST: 'unix:///nowhere.sock' });
    expect(e.display).toBe('unix:///nowhere.sock');
    expect(e.guessed).toBe(false);
  });

  it('maps connection failures to typed errors with what to do', async () => {
    const endpoint = parseDockerHost('unix:///nowhere.sock');
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
});
