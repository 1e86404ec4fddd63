import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { AirlockError } from '../../contracts/errors';
import { parseStoredJson } from '../common/stored-json';
import { projectDataDir } from '../network/project-network-store';
import type { DevcontainerEnvironment } from './devcontainer-config';

/**
 * Building a devcontainer runs the project's own instructions (docs/architecture.md §16, "Trust"), so
 * an environment is built only after the user accepted that configuration's content for that
 * project: `<home>/projects/<hash>/environment-trust.json` keeps the accepted content hash per
 * configuration, and a changed file (config, Dockerfile, compose files, any file of a build context)
 * asks again.
 */
const TrustFile = z.object({
  version: z.literal(1),
  project: z.string().optional(),
  accepted: z.record(z.string(), z.object({ contentHash: z.string(), at: z.string() })),
});
type TrustFile = z.infer<typeof TrustFile>;

export class EnvironmentTrust {
  private readonly file: string;

  constructor(
    private readonly projectDir: string,
    home: string,
  ) {
    this.file = path.join(projectDataDir(projectDir, home), 'environment-trust.json');
  }

  private async load(): Promise<TrustFile> {
    // Missing: nothing accepted. Damaged: an error naming it (a default would drop every acceptance on the next write).
    const text = await readFile(this.file, 'utf8').catch((err: NodeJS.ErrnoException) => (err.code === 'ENOENT' ? undefined : Promise.reject(err)));
    if (text !== undefined) return parseStoredJson(TrustFile, this.file, text, "fix or delete it (deleting asks again before this project's environments are used).");
    return { version: 1, project: path.resolve(this.projectDir), accepted: {} };
  }

  /** `trusted`: this content was accepted; `changed`: an earlier content was; `new`: never. */
  async state(env: Pick<DevcontainerEnvironment, 'configPath' | 'contentHash'>): Promise<'trusted' | 'changed' | 'new'> {
    const entry = (await this.load()).accepted[env.configPath];
    return !entry ? 'new' : entry.contentHash === env.contentHash ? 'trusted' : 'changed';
  }

  /** Records the user's acceptance of this content (returns when it is on disk). */
  async accept(env: Pick<DevcontainerEnvironment, 'configPath' | 'contentHash'>): Promise<void> {
    const body = await this.load();
    body.accepted[env.configPath] = { contentHash: env.contentHash, at: new Date().toISOString() };
    await mkdir(path.dirname(this.file), { recursive: true, mode: 0o700 });
    const tmp = `${this.file}.${process.pid}.tmp`;
    await writeFile(tmp, `${JSON.stringify(body, null, 2)}\n`, { mode: 0o600 });
    await rename(tmp, this.file);
  }
}

/** The refusal when a devcontainer is not (or no longer) accepted. */
export function untrustedError(env: DevcontainerEnvironment, changed: boolean): AirlockError {
  // Said plainly (docs/architecture.md §16, "Trust"): a build runs the project's code with the engine's network.
  const building = "building runs the project's own code with the engine's network";
  const what =
    env.source.kind === 'build'
      ? `builds ${env.source.dockerfile} from the folder '${env.source.context || '.'}' (${building}: its steps can reach the internet and read every file of that folder)`
      : env.source.kind === 'image'
        ? `runs the image ${env.source.image}`
        : `starts compose services${[env.source.workspace, ...env.source.sidecars].some((s) => s.source.kind === 'build') ? ` (${building})` : ''}`;
  return new AirlockError(
    'FORBIDDEN',
    `${changed ? 'The project environment changed since you accepted it' : 'The project environment is not trusted yet'}: ${env.configPath} ${what}${Object.keys(env.lifecycle).length ? ' and runs its setup commands' : ''}, which is the project's own code. Read it, then accept it (--trust-environment, or the New run form), or choose --environment airlock.`,
    { field: 'environment' },
  );
}
