/**
 * Airlock's own runtime inside every sandbox image, Airlock's and derived ones alike (docs/architecture.md
 * §2.3): its Node, its copy of the dynamic loader and the C libraries its programs were linked with, and
 * the few tools the helper itself runs (git, inotifywait). A program started through `airlockProgram`
 * uses none of the image's files: not its `/bin/sh`, not its libc, not its `/etc/ld.so.cache`, not a
 * program found on a PATH. Only `/etc/ld.so.preload` is read by every loader; images carrying it are
 * refused before anything runs.
 */
export const AIRLOCK_LOADER = '/opt/airlock/lib/ld.so';
export const AIRLOCK_LIB = '/opt/airlock/lib';
/** The official Node build the helper runs on (see the sandbox Dockerfile). */
export const AIRLOCK_NODE = '/opt/airlock/node/node';
/** Airlock's copies of git, tar, find and inotifywait (linked against `AIRLOCK_LIB`). */
export const AIRLOCK_LIBEXEC = '/opt/airlock/libexec';
/**
 * A folder that holds no program: the PATH and GIT_EXEC_PATH of what the helper runs as itself, so
 * nothing it starts can find one of the image's programs by name.
 */
export const AIRLOCK_NO_PROGRAMS = '/opt/airlock/no-programs';

/** The argv that starts `program` (an absolute path under /opt/airlock) through Airlock's loader and libraries. */
export function airlockProgram(program: string): string[] {
  return [AIRLOCK_LOADER, '--inhibit-cache', '--library-path', AIRLOCK_LIB, program];
}

/** Airlock's Node, through its loader, with an empty OpenSSL configuration (the default is the image's file). */
export const AIRLOCK_NODE_ARGV: readonly string[] = [...airlockProgram(AIRLOCK_NODE), '--openssl-config=/dev/null'];
