import type { Readable } from 'node:stream';
import { AirlockError } from '../../../contracts/errors';
import { engineConnectError, statusCodeOf, type Engine } from './engine';
import { debugLog } from '../../common/debug-log';

/** What a VM needs to know of a sandbox image besides its files. */
export interface ImageConfig {
  id: string;
  user: string;
  env: string[];
  workdir: string;
  /** The image's labels (a derived image names the image it was made from). */
  labels: Record<string, string>;
}

/**
 * A Docker image made into another kind of sandbox (a VM disk, a WSL root filesystem) is read
 * through the engine API, the same way every container is made (one access path to the engine;
 * no `docker` CLI needed), and through the engine the caller was given: the one the settings chose,
 * where the image was built (docs/architecture.md §13). `what` names the use in errors.
 */
export async function inspectImageConfig(image: string, what: string, e: Engine): Promise<ImageConfig> {
  try {
    const info = await e.docker.getImage(image).inspect();
    return { id: info.Id, user: info.Config?.User ?? '', env: info.Config?.Env ?? [], workdir: info.Config?.WorkingDir || '/workspace', labels: info.Config?.Labels ?? {} };
  } catch (err) {
    if (statusCodeOf(err) === 404) throw new AirlockError('NOT_FOUND', `Image '${image}' is not in the Docker engine. Run \`airlock doctor\` to build the Airlock image (${what} is made from it).`);
    throw (await engineConnectError(err, e.endpoint)) ?? new AirlockError('VM_UNAVAILABLE', `${what} is made from the Docker image '${image}', but the engine could not inspect it: ${err instanceof Error ? err.message : String(err)}. Start the Docker engine and retry.`, { cause: err });
  }
}

/**
 * Streams the root filesystem of `image` (a tar, as `docker export` gives it) to `use`, from a
 * container that never starts and has no network, removed afterwards whatever happens.
 */
export async function withImageFilesystem<T>(image: string, use: (tar: Readable) => Promise<T>, e: Engine): Promise<T> {
  const container = await e.docker.createContainer({ Image: image, Cmd: ['true'], NetworkDisabled: true, HostConfig: { NetworkMode: 'none' } }).catch(async (err: unknown) => {
    throw (await engineConnectError(err, e.endpoint)) ?? new AirlockError('SANDBOX_FAILED', `Could not create a container of ${image} to export its files: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  });
  try {
    const tar = (await container.export()) as Readable;
    return await use(tar);
  } finally {
    await container.remove({ force: true }).catch(debugLog.swallow('image.export.container.remove'));
  }
}
