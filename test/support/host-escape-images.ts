/**
 * Images for the host-escape tests (docs/architecture.md §2.3): a static `open_by_handle_at` probe
 * (compiled in a throwaway Debian build container; the engine's layer cache keeps it across runs) and
 * a hostile project image that tries every way an image could load code into Airlock's helper.
 */
import { createHash } from 'node:crypto';
import type Docker from 'dockerode';
import { extract } from 'tar-stream';
import type { Readable } from 'node:stream';
import { AirlockError } from '../../contracts/errors';
import { engineBuild, imageId } from '../../core/environment/engine-build';
import { connectEngine, type Engine } from '../../core/sandbox/docker/engine';
import { buildContextTar } from '../../core/sandbox/image';

/**
 * For each path: open it, then `open_by_handle_at` relative to that fd with ext4's root-directory
 * handle (inode 2, generation 0), read-only, as a directory. Prints `<path> handle-opened <names…>`
 * (the listing of whatever root that reached) or `<path> handle-refused <errno>`, then whether
 * `name_to_handle_at` (no capability needed; only a seccomp profile refuses it) works on the path.
 * It writes nothing anywhere.
 */
const PROBE_C = `#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
struct root_handle { unsigned int bytes; int type; unsigned int ino, gen; };
struct any_handle { unsigned int bytes; int type; unsigned char f[128]; };
int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    int fd = open(argv[i], O_RDONLY);
    if (fd < 0) { printf("%s open-failed %d\\n", argv[i], errno); continue; }
    struct root_handle h = { 8, 1, 2, 0 };
    int r = open_by_handle_at(fd, (struct file_handle *)&h, O_RDONLY | O_DIRECTORY);
    if (r < 0) printf("%s handle-refused %d\\n", argv[i], errno);
    else {
      DIR *d = fdopendir(r);
      struct dirent *e;
      printf("%s handle-opened", argv[i]);
      while (d && (e = readdir(d))) printf(" %s", e->d_name);
      printf("\\n");
    }
    struct any_handle n = { 128, 0 };
    int mount_id;
    r = name_to_handle_at(AT_FDCWD, argv[i], (struct file_handle *)&n, &mount_id, 0);
    printf("%s name-to-handle %s %d\\n", argv[i], r == 0 ? "ok" : "refused", r == 0 ? 0 : errno);
    close(fd);
  }
  return 0;
}
`;

/** The hostile image's load hooks: each leaves /tmp/hostile-<how>-<euid> when it runs. */
const HOOK_C = `#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void hook(void) {
  char p[64];
  snprintf(p, sizeof p, "/tmp/hostile-preload-%d", (int)geteuid());
  int fd = open(p, O_WRONLY | O_CREAT, 0666);
  if (fd >= 0) close(fd);
}
`;
const HOOK_JS = `require('fs').writeFileSync('/tmp/hostile-node-' + process.geteuid(), '');\n`;
const ENTRY_SH = `#!/bin/sh\ntouch /tmp/hostile-entry-$(id -u)\nexec "$@"\n`;

const b64 = (s: string) => Buffer.from(s).toString('base64');
const GCC_STAGE = 'FROM debian:bookworm-slim AS cc\nRUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev && rm -rf /var/lib/apt/lists/*\n';

export const PROBE_DOCKERFILE = `${GCC_STAGE}RUN echo ${b64(PROBE_C)} | base64 -d > /probe.c && gcc -static -O1 -o /probe /probe.c
FROM debian:bookworm-slim
COPY --from=cc /probe /probe
`;

/**
 * A project image as hostile as an image can be toward the helper: NODE_OPTIONS, LD_PRELOAD and
 * NODE_PATH in its ENV, an ENTRYPOINT and CMD of its own, its own WORKDIR, USER root.
 */
export const HOSTILE_DOCKERFILE = `${GCC_STAGE}RUN echo ${b64(HOOK_C)} | base64 -d > /hook.c && gcc -shared -fPIC -o /hook.so /hook.c
FROM debian:bookworm-slim
COPY --from=cc /hook.so /hostile/hook.so
RUN mkdir -p /hostile/node_modules && echo ${b64(HOOK_JS)} | base64 -d > /hostile/hook.js && echo ${b64(ENTRY_SH)} | base64 -d > /hostile/entry.sh && chmod 755 /hostile/entry.sh
ENV NODE_OPTIONS="--require /hostile/hook.js" LD_PRELOAD=/hostile/hook.so NODE_PATH=/hostile/node_modules HOSTILE_MARK=1
WORKDIR /hostile
USER root
ENTRYPOINT ["/hostile/entry.sh"]
CMD ["sleep", "infinity"]
`;

/** The programs a hostile project image replaces; each wrapper leaves /tmp/hostile-<name>-<uid>, then runs the real one. */
export const HOSTILE_TOOLS = ['sh', 'git', 'tar', 'find', 'inotifywait'] as const;

/**
 * A project image whose `/bin/sh`, git, tar, find and inotifywait are the project's own scripts: what
 * a derived image's Airlock commands would run as root if they started any of them by name.
 */
export const HOSTILE_TOOLS_DOCKERFILE = `FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends git inotify-tools && rm -rf /var/lib/apt/lists/*
RUN set -e; for t in git tar find inotifywait; do p=$(command -v $t); mv "$p" "$p.real"; \\
      printf '#!/usr/bin/dash\\n: > /tmp/hostile-%s-$(id -u)\\nexec %s.real "$@"\\n' $t "$p" > "$p"; chmod 755 "$p"; done; \\
    printf '#!/usr/bin/dash\\n: > /tmp/hostile-sh-$(id -u)\\nexec /usr/bin/dash "$@"\\n' > /bin/sh.hostile; chmod 755 /bin/sh.hostile; \\
    mv -f /bin/sh.hostile /bin/sh
`;

/** `base` with /etc/ld.so.preload naming the hook (which every glibc loader reads). */
export function preloadDockerfile(base: string): string {
  return `FROM ${base}\nUSER 0:0\nRUN echo /hostile/hook.so > /etc/ld.so.preload\n`;
}

/** Builds `dockerfile` once per machine (tagged by its hash; the engine's cache does the rest). */
export async function testImage(name: string, dockerfile: string, engine?: Engine): Promise<string> {
  const tag = `airlock-test-${name}:${createHash('sha256').update(dockerfile).digest('hex').slice(0, 16)}`;
  const docker = (engine ?? (await connectEngine(process.env))).docker;
  if (await imageId(docker, tag)) return tag;
  await engineBuild(docker, { tag, context: await buildContextTar(Buffer.from(dockerfile)), what: `the ${name} test image`, emit: () => undefined }, (f) => new AirlockError('IMAGE_BUILD_FAILED', `building ${tag} failed at ${f.where}: ${f.error}\n${f.tail}`));
  return tag;
}

/** The probe binary's bytes, read out of its image through the archive API. */
export async function probeBinary(docker: Docker, image: string): Promise<Buffer> {
  const c = await docker.createContainer({ Image: image, Cmd: ['true'], NetworkDisabled: true, Labels: { 'airlock.test': 'handle-probe' }, HostConfig: { NetworkMode: 'none' } });
  try {
    const tar = (await c.getArchive({ path: '/probe' })) as unknown as Readable;
    return await new Promise<Buffer>((resolve, reject) => {
      const x = extract();
      const chunks: Buffer[] = [];
      x.on('entry', (_h, stream, next) => {
        stream.on('data', (d: unknown) => chunks.push(d as Buffer));
        stream.on('end', next);
      });
      x.on('finish', () => resolve(Buffer.concat(chunks)));
      x.on('error', reject);
      tar.pipe(x);
    });
  } finally {
    await c.remove({ force: true });
  }
}

/** One line of the probe's output per path and call. */
export interface ProbeResult {
  handle: { opened: boolean; errno?: number; names?: string[] };
  nameToHandle: { ok: boolean; errno: number };
}

export function parseProbe(out: string): Map<string, ProbeResult> {
  const res = new Map<string, ProbeResult>();
  for (const line of out.split('\n')) {
    const [path, what, ...rest] = line.trim().split(' ');
    if (!path || !what) continue;
    const r = res.get(path) ?? { handle: { opened: false }, nameToHandle: { ok: false, errno: -1 } };
    if (what === 'handle-opened') r.handle = { opened: true, names: rest };
    else if (what === 'handle-refused') r.handle = { opened: false, errno: Number(rest[0]) };
    else if (what === 'open-failed') r.handle = { opened: false, errno: -Number(rest[0]) };
    else if (what === 'name-to-handle') r.nameToHandle = { ok: rest[0] === 'ok', errno: Number(rest[1]) };
    res.set(path, r);
  }
  return res;
}
