/** An error the helper reports to the host with a kind from contracts/errors.ts ErrorKind. */
export class HelperError extends Error {
  constructor(
    readonly kind: string,
    message: string,
  ) {
    super(message);
    this.name = 'HelperError';
  }
}

/** Maps a Node system error to a kind and a message that names the path and what to do. */
export function fromSystemError(err: unknown, what: string): HelperError {
  if (err instanceof HelperError) return err;
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  const detail = err instanceof Error ? err.message : String(err);
  switch (code) {
    case 'ENOENT':
      return new HelperError('NOT_FOUND', `${what}: no such file or directory`);
    case 'EACCES':
    case 'EPERM':
      return new HelperError('FORBIDDEN', `${what}: permission denied (the sandbox user may not access it)`);
    case 'EROFS':
      return new HelperError('FORBIDDEN', `${what}: read-only file system (write under the workspace or /tmp)`);
    case 'EEXIST':
      return new HelperError('INVALID_INPUT', `${what}: a path component exists and is not a directory`);
    case 'ENOTDIR':
      return new HelperError('INVALID_INPUT', `${what}: a path component is not a directory`);
    case 'EISDIR':
      return new HelperError('INVALID_INPUT', `${what}: is a directory`);
    case 'ENOSPC':
      return new HelperError('DISK_FULL', `${what}: no space left in the sandbox`);
    default:
      return new HelperError('INTERNAL', `${what}: ${detail}`);
  }
}
