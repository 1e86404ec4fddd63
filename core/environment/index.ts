export * from './devcontainer-config';
export * from './devcontainer-files';
export * from './environment-choice';
export { parseJsonc } from './jsonc';
export * from './derived-image';
export * from './environment-image';
export * from './environment-trust';
export * from './run-environment';
export * from './setup-plan';
