export * from './devcontainer-config';
export * from './devcontainer-files';
export * from './environment-choice';
export { parseJsonc } from './jsonc';
