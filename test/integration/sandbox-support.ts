import { newRunId } from '../../contracts/ids';
import { ensureSandboxImage } from '../../core/sandbox/image';

/** A fresh run id in the format RunService uses. */
export function testRunId(): string {
  return newRunId();
}

let image: Promise<string> | undefined;

/** The Airlock sandbox image, built once per test process (cached by content hash across runs). */
export function sandboxImage(): Promise<string> {
  image ??= ensureSandboxImage({
    onProgress: (p) => {
      if (p.phase === 'build' && p.message.startsWith('step ')) console.log(`[image] ${p.message}`);
    },
  }).then((r) => r.ref);
  return image;
}
