/**
 * The in-sandbox helper (resources/sandbox/helper), built at build time into one CommonJS file for
 * Node 18 (scripts/build.mjs). The sandbox image copies `files` into /opt/airlock/ and is tagged by
 * `hash`, so a changed helper gives a new image.
 */
import { readBuiltBundle, type BuiltBundle } from '../common/built-bundle';

export type HelperBundle = BuiltBundle;

let cached: Promise<HelperBundle> | undefined;

/** The built helper (`helper.js`), read once per process. */
export function loadHelperBundle(): Promise<HelperBundle> {
  if (!cached) {
    cached = readBuiltBundle('sandbox helper', '', ['helper.js']);
    cached.catch(() => {
      cached = undefined; // Let a later call retry (after a build, say).
    });
  }
  return cached;
}
