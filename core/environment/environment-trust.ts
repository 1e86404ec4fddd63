import path from 'node:path';
import { z } from 'zod';
import { AirlockError } from '../../contracts/errors';
import { StoredFile } from '../common/stored-file';
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
  private readonly stored: StoredFile<TrustFile>;

  constructor(projectDir: string, home: string) {
    // Missing: nothing accepted. Damaged: an error naming it (a default would drop every acceptance on the next write).
    this.stored = new StoredFile(path.join(projectDataDir(projectDir, home), 'environment-trust.json'), {
      parse: (file, text) => parseStoredJson(TrustFile, file, text, "fix or delete it (deleting asks again before this project's environments are used)."),
      empty: () => ({ version: 1, project: path.resolve(projectDir), accepted: {} }),
    });
  }

  private load(): Promise<TrustFile> {
    return this.stored.read();
  }

  /** `trusted`: this content was accepted; `changed`: an earlier content was; `new`: never. */
  async state(env: Pick<DevcontainerEnvironment, 'configPath' | 'contentHash'>): Promise<'trusted' | 'changed' | 'new'> {
    const entry = (await this.load()).accepted[env.configPath];
    return !entry ? 'new' : entry.contentHash === env.contentHash ? 'trusted' : 'changed';
  }

  /** Records the user's acceptance of this content (returns when it is on disk). */
  async accept(env: Pick<DevcontainerEnvironment, 'configPath' | 'contentHash'>): Promise<void> {
    await this.stored.update((body) => ({ ...body, accepted: { ...body.accepted, [env.configPath]: { contentHash: env.contentHash, at: new Date().toISOString() } } }));
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
