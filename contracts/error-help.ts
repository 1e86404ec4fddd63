import type { ErrorInfo, ErrorKind } from './errors';

/** What a person can do about an error; the UI renders each as a button, the CLI as a hint. */
export type ErrorAction = 'replace-key' | 'add-key' | 'open-setup-check' | 'choose-folder' | 'test-connection' | 'open-keys';

/** An error as a person reads it: a plain title, the message, and what to do next. */
export interface ErrorHelp {
  title: string;
  message: string;
  actions: ErrorAction[];
}

/** Button labels (UI). */
export const ERROR_ACTION_LABEL: Record<ErrorAction, string> = {
  'replace-key': 'Replace key',
  'add-key': 'Add key',
  'open-setup-check': 'Open setup check',
  'choose-folder': 'Choose another folder',
  'test-connection': 'Test connection',
  'open-keys': 'Open Keys',
};

/** The same actions for the terminal. */
export const ERROR_ACTION_CLI: Record<ErrorAction, string> = {
  'replace-key': 'replace the key: airlock keys set <provider>',
  'add-key': 'add a key: airlock keys set <provider>',
  'open-setup-check': 'check the setup: airlock doctor',
  'choose-folder': 'pass a project folder that exists',
  'test-connection': 'test the provider: airlock keys test <provider>',
  'open-keys': 'see its base URL: airlock keys list (change it: airlock keys set-url <provider> <url>)',
};

const TITLE: Record<ErrorKind, string> = {
  INVALID_INPUT: 'Check what was entered',
  NOT_FOUND: 'Not found',
  CONFLICT: 'Not possible right now',
  UNAUTHORIZED: 'Key refused',
  FORBIDDEN: 'Not allowed',
  DOCKER_NOT_INSTALLED: 'Docker is not installed',
  DOCKER_NOT_RUNNING: 'Docker is not running',
  DOCKER_PERMISSION_DENIED: 'No permission to use Docker',
  DOCKER_UNREACHABLE: 'Cannot reach the container engine',
  IMAGE_BUILD_FAILED: 'The sandbox image could not be built',
  IMAGE_INCOMPATIBLE: 'The sandbox image does not fit this Airlock',
  DISK_FULL: 'The disk is full',
  SANDBOX_FAILED: 'The run stopped with an error',
  CHANNEL_CLOSED: 'Lost contact with the sandbox',
  COMMAND_TIMEOUT: 'Time limit reached',
  KEYCHAIN_UNAVAILABLE: 'The keychain is not available',
  KEY_MISSING: 'No key for this provider',
  PROVIDER_UNKNOWN: 'Unknown provider',
  UPSTREAM_ERROR: 'The model provider failed',
  BUDGET_EXCEEDED: 'Budget reached',
  VM_UNAVAILABLE: 'Virtual machine isolation is not available',
  GVISOR_UNAVAILABLE: 'gVisor isolation is not available',
  ENGINE_LIMITS_UNSUPPORTED: 'The container engine cannot limit a sandbox',
  CANCELLED: 'Stopped',
  INTERNAL: 'Something went wrong inside Airlock',
};

const SETUP: ReadonlySet<ErrorKind> = new Set([
  'DOCKER_NOT_INSTALLED',
  'DOCKER_NOT_RUNNING',
  'DOCKER_PERMISSION_DENIED',
  'DOCKER_UNREACHABLE',
  'IMAGE_BUILD_FAILED',
  'IMAGE_INCOMPATIBLE',
  'DISK_FULL',
  'KEYCHAIN_UNAVAILABLE',
  'VM_UNAVAILABLE',
  'GVISOR_UNAVAILABLE',
  'ENGINE_LIMITS_UNSUPPORTED',
  'CHANNEL_CLOSED',
]);

function actionsFor(info: ErrorInfo): ErrorAction[] {
  if (info.kind === 'UNAUTHORIZED') return ['replace-key'];
  if (info.kind === 'KEY_MISSING') return ['add-key'];
  // The provider's server failed a run (unreachable, 5xx): test it, and check where it points.
  if (info.kind === 'UPSTREAM_ERROR' && info.field === 'provider') return ['test-connection', 'open-keys'];
  if (SETUP.has(info.kind)) return ['open-setup-check'];
  if (info.field === 'projectDir') return ['choose-folder'];
  return [];
}

/**
 * The one mapping from error kinds to what a person is shown (UI banners, CLI errors): the kind
 * itself is for programs and never the message.
 */
export function describeError(info: ErrorInfo): ErrorHelp {
  return { title: TITLE[info.kind], message: info.message, actions: actionsFor(info) };
}
