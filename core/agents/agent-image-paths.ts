/** Where the built-in agent lives in the image; run it as `node /opt/airlock/agent/agent.js`. */
export const AGENT_DIR_IN_IMAGE = '/opt/airlock/agent';
export const AGENT_SCRIPT_IN_IMAGE = `${AGENT_DIR_IN_IMAGE}/agent.js`;
/** A writable scratch folder for third-party CLIs' config and session files (the root filesystem is read-only). */
export const AGENT_SCRATCH_DIR = '/tmp/airlock-agent';
/** Airlock's own Node in every sandbox image (the helper's; a derived image's only Node, docs/architecture.md §16). */
export const AIRLOCK_NODE_IN_IMAGE = '/opt/airlock/node/node';
