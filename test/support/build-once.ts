/**
 * vitest globalSetup: builds the CLI, sandbox helper and agent bundles once before any test when a
 * source is newer than them (tests import the core from source, but it reads the built payload).
 */
import { ensureBuilt } from '../../scripts/build.mjs';

export default async function setup(): Promise<void> {
  await ensureBuilt(['bundles']);
}
