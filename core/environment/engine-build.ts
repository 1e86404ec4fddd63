import type Docker from 'dockerode';
import { AirlockError } from '../../contracts/errors';
import { BuildProgressParser, consumeBuildStream } from '../sandbox/build-progress';
import { statusCodeOf } from '../sandbox/docker/engine';
import type { ImageProgress } from '../sandbox/driver';
import { LABEL_KIND } from '../sandbox/labels';

export interface EngineBuild {
  tag: string;
  context: NodeJS.ReadableStream | Buffer;
  dockerfile?: string;
  target?: string;
  buildargs?: Record<string, string>;
  labels?: Record<string, string>;
  /** What is built, for messages ("the devcontainer image of .devcontainer/devcontainer.json"). */
  what: string;
  emit: (p: ImageProgress) => void;
}

/** The failing step and the tail of its output, and the marker line a recipe printed (if any). */
export interface BuildFailure {
  where: string;
  error: string;
  tail: string;
}

/**
 * Builds through the engine's own builder over Airlock's engine connection (never the `docker`
 * command line, docs/architecture.md §16), streaming progress. Resolves the image id; a failed build
 * rejects with the failing step and its output's tail via `onFailure`.
 */
export async function engineBuild(docker: Docker, b: EngineBuild, onFailure: (f: BuildFailure) => AirlockError): Promise<string> {
  const parser = new BuildProgressParser(b.emit, 'custom');
  const stream = await docker.buildImage(b.context as unknown as NodeJS.ReadableStream, {
    t: b.tag,
    rm: true,
    forcerm: true,
    ...(b.dockerfile ? { dockerfile: b.dockerfile } : {}),
    ...(b.target ? { target: b.target } : {}),
    buildargs: b.buildargs ?? {},
    labels: { [LABEL_KIND]: 'image', ...(b.labels ?? {}) },
  });
  await consumeBuildStream(stream, parser);
  if (parser.error) {
    const where = parser.step ? `step ${parser.step}/${parser.totalSteps} (${parser.stepTitle.slice(0, 160)})` : 'the build';
    throw onFailure({ where, error: parser.error, tail: parser.outputTail(40) });
  }
  const id = await imageId(docker, b.tag);
  if (!id) throw new AirlockError('IMAGE_BUILD_FAILED', `The engine finished building ${b.what} but ${b.tag} is not there; try again.`);
  return id;
}

/** The engine's id of an image, or undefined when it has none by that reference. */
export async function imageId(docker: Docker, ref: string): Promise<string | undefined> {
  try {
    return (await docker.getImage(ref).inspect()).Id;
  } catch (err) {
    if (statusCodeOf(err) === 404) return undefined;
    throw err;
  }
}

/** Pulls an image the engine does not have, with progress; NOT_FOUND with the engine's words when it cannot. */
export async function pullImage(docker: Docker, ref: string, emit: (p: ImageProgress) => void): Promise<string> {
  emit({ phase: 'build', message: `pulling ${ref}`, variant: 'custom' });
  try {
    const stream = await docker.pull(ref);
    await new Promise<void>((resolve, reject) => {
      docker.modem.followProgress(stream, (err: Error | null) => (err ? reject(err) : resolve()), (e: { status?: string; progress?: string }) => {
        if (e.status) emit({ phase: 'build', message: `${e.status}${e.progress ? ` ${e.progress}` : ''}`.slice(0, 200), variant: 'custom' });
      });
    });
  } catch (err) {
    throw new AirlockError('NOT_FOUND', `Image '${ref}' is not on the engine and pulling it failed: ${(err as Error).message.slice(0, 300)}. Pull or build it yourself, or fix the image name.`, { cause: err, field: 'environment' });
  }
  const id = await imageId(docker, ref);
  if (!id) throw new AirlockError('NOT_FOUND', `Pulled '${ref}' but the engine does not list it; pull it yourself and try again.`, { field: 'environment' });
  return id;
}
