import { createHash } from 'node:crypto';
import path from 'node:path';
import type Docker from 'dockerode';
import { z } from 'zod';
import { StoredFile } from '../common/stored-file';
import { imageId } from './engine-build';

/**
 * The host's record of devcontainer images it built (docs/architecture.md §16, "The prepared path"):
 * for each build, a key made of everything the build reads — the Dockerfile and the whole build
 * context as Airlock streams it (names, modes, times, bytes), the build args and target, and the
 * engine's ids of the images its FROM lines name — and the id of the image it made. The next run
 * with the same key skips the engine's build (its cache check streams the context and walks every
 * step) when the tag still names that very image. Everything in the key is read on the host by
 * Airlock; nothing comes from a sandbox. A FROM that Airlock cannot resolve on its own (a build
 * argument, an image the engine lacks) means no key: the engine builds as before.
 */

/** Bump when what the key covers changes: every build is checked by the engine once again. */
const RECORD_RECIPE = 'airlock-build-record-v1';
const MAX_RECORDS = 200;

const RecordsFile = z.object({ version: z.literal(1), builds: z.record(z.string(), z.object({ imageId: z.string(), at: z.string() })) });
type Records = z.infer<typeof RecordsFile>;
const noRecords = (): Records => ({ version: 1, builds: {} });

export interface BuildInputs {
  /** The tag the build makes. */
  tag: string;
  dockerfile: string;
  /** The Dockerfile's text (its FROM lines are resolved to image ids). */
  dockerfileText: string;
  /** sha256 of the build context tar, exactly as it is sent to the engine. */
  contextDigest: string;
  target?: string;
  args: Record<string, string>;
  labels: Record<string, string>;
}

export class BuildRecords {
  private readonly stored: StoredFile<Records>;

  constructor(home: string) {
    this.stored = new StoredFile(path.join(home, 'environment-builds.json'), {
      parse: (_file, text) => {
        try {
          const parsed = RecordsFile.safeParse(JSON.parse(text));
          if (parsed.success) return parsed.data;
        } catch {
          // Not JSON: treated like a damaged record, below.
        }
        // A record is only a shortcut: when damaged, every build is checked by the engine and the file is written anew.
        return noRecords();
      },
      empty: noRecords,
    });
  }

  /**
   * The key of a build, or undefined when one of its FROM images is not pinned by what the host can
   * see (then the engine must check). Stage names (`FROM x AS name`) are not images.
   */
  async keyOf(docker: Docker, b: BuildInputs): Promise<string | undefined> {
    const bases = fromImages(b.dockerfileText);
    if (!bases) return undefined;
    const ids: string[] = [];
    for (const ref of bases) {
      const id = await imageId(docker, ref);
      if (!id) return undefined;
      ids.push(`${ref}=${id}`);
    }
    const args = Object.entries(b.args).sort(([x], [y]) => x.localeCompare(y));
    const labels = Object.entries(b.labels).sort(([x], [y]) => x.localeCompare(y));
    return createHash('sha256')
      .update(JSON.stringify([RECORD_RECIPE, b.tag, b.dockerfile, createHash('sha256').update(b.dockerfileText).digest('hex'), b.contextDigest, b.target ?? null, args, labels, ids]))
      .digest('hex');
  }

  /** The image a build with this key made, when the tag still names exactly it on this engine. */
  async find(docker: Docker, key: string, tag: string): Promise<string | undefined> {
    const recorded = (await this.read())[key]?.imageId;
    if (!recorded) return undefined;
    const current = await imageId(docker, tag);
    return current === recorded ? current : undefined;
  }

  async remember(key: string, id: string): Promise<void> {
    await this.stored.update(({ builds }) => {
      builds[key] = { imageId: id, at: new Date().toISOString() };
      // The oldest go first: a record is only a shortcut, the engine can always check again.
      const kept = Object.entries(builds)
        .sort(([, a], [, b]) => b.at.localeCompare(a.at))
        .slice(0, MAX_RECORDS);
      return { version: 1, builds: Object.fromEntries(kept) };
    });
  }

  private async read(): Promise<Records['builds']> {
    return (await this.stored.read()).builds;
  }
}

/**
 * The images a Dockerfile's FROM lines name, without stage names; undefined when one is not a
 * plain reference (a build argument, `--platform`, a parser directive or line continuation the
 * host would have to interpret) or the build fetches something itself (a remote ADD). Images named
 * by `--from=` count too. Lines that only look like FROM (inside a continued RUN) add an image to
 * resolve at worst, never hide one.
 */
export function fromImages(dockerfile: string): string[] | undefined {
  const lines = dockerfile.split('\n');
  if (lines.some((l) => /\\\s*$/.test(l) && /^\s*from\b/i.test(l))) return undefined;
  if (/^\s*#\s*(syntax|escape)\s*=/im.test(dockerfile)) return undefined;
  const stages = new Set<string>();
  const images: string[] = [];
  for (const line of lines) {
    const m = /^\s*from\s+(.*)$/i.exec(line);
    if (!m) continue;
    const words = (m[1] ?? '').trim().split(/\s+/);
    const ref = words[0] ?? '';
    if (!ref || ref.startsWith('--') || ref.includes('$')) return undefined;
    const named = words.length === 3 && words[1]?.toLowerCase() === 'as' ? words[2]?.toLowerCase() : undefined;
    if (words.length !== 1 && !named) return undefined;
    // An earlier stage, or no image at all: nothing for the engine to resolve.
    if (!stages.has(ref.toLowerCase()) && ref.toLowerCase() !== 'scratch') images.push(ref);
    if (named) stages.add(named);
  }
  // `COPY --from=IMAGE` (and `--mount=from=IMAGE`) read an image too; a remote ADD is fetched by every build.
  for (const m of dockerfile.matchAll(/(?:--from=|[,=\s]from=)([^\s,]+)/gi)) {
    const ref = m[1] ?? '';
    if (ref.includes('$')) return undefined;
    if (!/^\d+$/.test(ref) && !stages.has(ref.toLowerCase()) && !images.includes(ref)) images.push(ref);
  }
  if (/^\s*add\s.*\b(https?:\/\/|git@)/im.test(dockerfile)) return undefined;
  return images.length ? images : undefined;
}
