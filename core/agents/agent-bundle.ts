import { readBuiltBundle, type BuiltBundle } from '../common/built-bundle';

export { AGENT_DIR_IN_IMAGE, AGENT_SCRIPT_IN_IMAGE } from './agent-image-paths';

let cached: Promise<BuiltBundle> | undefined;

/**
 * The built-in agent, built at build time into one CommonJS file for Node 18 (the image's Debian
 * Node) with no dependencies (scripts/build.mjs). `files` are relative to `/opt/airlock/agent/`
 * (`agent.js`, and a package.json that keeps Node from reading it as ESM); `hash` is part of the
 * image tag. Read once per process.
 */
export function loadAgentBundle(): Promise<BuiltBundle> {
  if (!cached) {
    cached = readBuiltBundle('built-in agent', 'agent', ['agent.js', 'package.json']);
    cached.catch(() => {
      cached = undefined;
    });
  }
  return cached;
}
