/**
 * Airlock's own seccomp profile for every container it starts (sandboxes, setup sandboxes, sidecars,
 * the image check): an allowlist that behaves like the engine's default for a container without
 * CAP_SYS_ADMIN, minus the calls a sandbox never needs (SECCOMP_REMOVED, with why). The engine's
 * default lets `open_by_handle_at` through whenever CAP_DAC_READ_SEARCH is held, and that one call
 * opens the host's root directory from any host-backed file (docs/architecture.md §2.3); this profile
 * refuses it whatever the capabilities.
 *
 * Docker takes the profile's JSON inline (`SecurityOpt: ['seccomp=<json>']`); Podman's compatible API
 * takes a path on its own machine, so `createContainerWithProfile` writes the JSON to a private file
 * for the create call and removes it after (Podman reads it while it creates the container's spec).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { AirlockError } from '../../../contracts/errors';
import type { EngineKind } from './engine-endpoint';

/** One rule of the engine's profile format (moby's and containers/common's JSON). */
export interface SeccompRule {
  names: string[];
  action: 'SCMP_ACT_ALLOW' | 'SCMP_ACT_ERRNO';
  errnoRet?: number;
  args?: Array<{ index: number; value: number; valueTwo?: number; op: 'SCMP_CMP_EQ' | 'SCMP_CMP_NE' | 'SCMP_CMP_MASKED_EQ' }>;
  includes?: { arches?: string[] };
}

export interface SeccompProfile {
  defaultAction: 'SCMP_ACT_ERRNO';
  defaultErrnoRet: number;
  archMap: Array<{ architecture: string; subArchitectures: string[] }>;
  syscalls: SeccompRule[];
}

/**
 * Calls the engine's default allows (unconditionally or with a capability a sandbox may hold) that
 * this profile refuses, and why a sandbox never needs them.
 */
export const SECCOMP_REMOVED: Readonly<Record<string, string>> = {
  open_by_handle_at: 'opens a file by its inode handle, bypassing every path and mount: relative to any host-backed fd (/etc/hosts, a volume) it reaches the host filesystem ("shocker")',
  name_to_handle_at: 'the other half of the pair: hands out inode handles (file-system internals) that only open_by_handle_at uses',
  io_uring_setup: 'io_uring runs file and socket operations that seccomp never sees, and has been a steady source of kernel privilege escalations; libuv and every tool fall back to plain calls',
  io_uring_enter: 'see io_uring_setup',
  io_uring_register: 'see io_uring_setup',
  memfd_secret: 'secret memory areas hidden from the kernel\'s own inspection; no build tool uses them',
  remap_file_pages: 'deprecated since Linux 3.16 (emulated); no tool needs it',
  fanotify_mark: 'useless without fanotify_init, which needs CAP_SYS_ADMIN',
};

/** Everything a program, a build or a test runner calls: the engine default's unconditional set, minus SECCOMP_REMOVED. */
const ALLOWED: readonly string[] = [
  // Files and directories.
  'access', 'chdir', 'chmod', 'chown', 'chown32', 'close', 'close_range', 'copy_file_range', 'creat', 'dup', 'dup2', 'dup3',
  'faccessat', 'faccessat2', 'fadvise64', 'fadvise64_64', 'fallocate', 'fchdir', 'fchmod', 'fchmodat', 'fchown', 'fchown32',
  'fchownat', 'fcntl', 'fcntl64', 'fdatasync', 'fgetxattr', 'flistxattr', 'flock', 'fremovexattr', 'fsetxattr', 'fstat',
  'fstat64', 'fstatat64', 'fstatfs', 'fstatfs64', 'fsync', 'ftruncate', 'ftruncate64', 'futimesat', 'getcwd', 'getdents',
  'getdents64', 'getxattr', 'lchown', 'lchown32', 'lgetxattr', 'link', 'linkat', 'listxattr', 'llistxattr', '_llseek',
  'lremovexattr', 'lseek', 'lsetxattr', 'lstat', 'lstat64', 'mkdir', 'mkdirat', 'mknod', 'mknodat', 'newfstatat', 'open',
  'openat', 'openat2', 'pread64', 'preadv', 'preadv2', 'pwrite64', 'pwritev', 'pwritev2', 'read', 'readahead', 'readlink',
  'readlinkat', 'readv', 'removexattr', 'rename', 'renameat', 'renameat2', 'rmdir', 'sendfile', 'sendfile64', 'setxattr',
  'splice', 'stat', 'stat64', 'statfs', 'statfs64', 'statx', 'symlink', 'symlinkat', 'sync', 'sync_file_range', 'syncfs',
  'tee', 'truncate', 'truncate64', 'umask', 'unlink', 'unlinkat', 'utime', 'utimensat', 'utimensat_time64', 'utimes',
  'vmsplice', 'write', 'writev',
  // Waiting for files and events.
  'epoll_create', 'epoll_create1', 'epoll_ctl', 'epoll_ctl_old', 'epoll_pwait', 'epoll_pwait2', 'epoll_wait', 'epoll_wait_old',
  'eventfd', 'eventfd2', 'pipe', 'pipe2', 'inotify_add_watch', 'inotify_init', 'inotify_init1', 'inotify_rm_watch', 'io_cancel', 'io_destroy',
  'io_getevents', 'io_pgetevents', 'io_pgetevents_time64', 'io_setup', 'io_submit', 'ioctl', '_newselect', 'pause', 'poll',
  'ppoll', 'ppoll_time64', 'pselect6', 'pselect6_time64', 'select', 'signalfd', 'signalfd4', 'timerfd_create',
  'timerfd_gettime', 'timerfd_gettime64', 'timerfd_settime', 'timerfd_settime64',
  // Memory.
  'brk', 'madvise', 'membarrier', 'memfd_create', 'mincore', 'mlock', 'mlock2', 'mlockall', 'mmap', 'mmap2', 'mprotect',
  'mremap', 'msync', 'munlock', 'munlockall', 'munmap', 'pkey_alloc', 'pkey_free', 'pkey_mprotect',
  // Processes, threads, identity, limits.
  'capget', 'capset', 'execve', 'execveat', 'exit', 'exit_group', 'fork', 'futex', 'futex_time64', 'futex_waitv', 'getcpu',
  'getegid', 'getegid32', 'geteuid', 'geteuid32', 'getgid', 'getgid32', 'getgroups', 'getgroups32', 'getpgid', 'getpgrp',
  'getpid', 'getppid', 'getpriority', 'getrandom', 'getresgid', 'getresgid32', 'getresuid', 'getresuid32', 'getrlimit',
  'get_robust_list', 'getrusage', 'getsid', 'get_thread_area', 'gettid', 'getuid', 'getuid32', 'ioprio_get', 'ioprio_set',
  'kill', 'landlock_add_rule', 'landlock_create_ruleset', 'landlock_restrict_self', 'pidfd_open', 'pidfd_send_signal',
  'prctl', 'prlimit64', 'process_mrelease', 'restart_syscall', 'rseq', 'sched_getaffinity', 'sched_getattr',
  'sched_getparam', 'sched_get_priority_max', 'sched_get_priority_min', 'sched_getscheduler', 'sched_rr_get_interval',
  'sched_rr_get_interval_time64', 'sched_setaffinity', 'sched_setattr', 'sched_setparam', 'sched_setscheduler',
  'sched_yield', 'seccomp', 'setfsgid', 'setfsgid32', 'setfsuid', 'setfsuid32', 'setgid', 'setgid32', 'setgroups',
  'setgroups32', 'setpgid', 'setpriority', 'setregid', 'setregid32', 'setresgid', 'setresgid32', 'setresuid', 'setresuid32',
  'setreuid', 'setreuid32', 'setrlimit', 'set_robust_list', 'setsid', 'set_thread_area', 'set_tid_address', 'setuid',
  'setuid32', 'sysinfo', 'tgkill', 'tkill', 'ugetrlimit', 'uname', 'vfork', 'wait4', 'waitid', 'waitpid',
  // The agent debugging its own processes (same user only; the helper is root and out of reach). Linux >= 4.8.
  'ptrace', 'process_vm_readv', 'process_vm_writev',
  // Signals.
  'rt_sigaction', 'rt_sigpending', 'rt_sigprocmask', 'rt_sigqueueinfo', 'rt_sigreturn', 'rt_sigsuspend', 'rt_sigtimedwait',
  'rt_sigtimedwait_time64', 'rt_tgsigqueueinfo', 'sigaltstack', 'sigprocmask', 'sigreturn',
  // Time.
  'adjtimex', 'alarm', 'clock_adjtime', 'clock_adjtime64', 'clock_getres', 'clock_getres_time64', 'clock_gettime',
  'clock_gettime64', 'clock_nanosleep', 'clock_nanosleep_time64', 'getitimer', 'gettimeofday', 'nanosleep', 'setitimer',
  'time', 'timer_create', 'timer_delete', 'timer_getoverrun', 'timer_gettime', 'timer_gettime64', 'timer_settime',
  'timer_settime64', 'times',
  // Sockets (socket itself below, by family) and System V / POSIX IPC inside the container's own namespace.
  'accept', 'accept4', 'bind', 'connect', 'getpeername', 'getsockname', 'getsockopt', 'listen', 'recv', 'recvfrom',
  'recvmmsg', 'recvmmsg_time64', 'recvmsg', 'send', 'sendmmsg', 'sendmsg', 'sendto', 'setsockopt', 'shutdown', 'socketcall',
  'socketpair', 'ipc', 'mq_getsetattr', 'mq_notify', 'mq_open', 'mq_timedreceive', 'mq_timedreceive_time64', 'mq_timedsend',
  'mq_timedsend_time64', 'mq_unlink', 'msgctl', 'msgget', 'msgrcv', 'msgsnd', 'semctl', 'semget', 'semop', 'semtimedop',
  'semtimedop_time64', 'shmat', 'shmctl', 'shmdt', 'shmget',
];

/** Capability-gated calls of the engine default that a container Airlock starts may hold the capability for. */
const BY_CAPABILITY: Readonly<Record<string, readonly string[]>> = {
  SYS_CHROOT: ['chroot'],
};

/** The new-namespace flags of clone(2) (NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET): refused without CAP_SYS_ADMIN. */
const CLONE_NAMESPACE_FLAGS = 0x7e020000;
const AF_VSOCK = 40;
const ENOSYS = 38;
const EPERM = 1;

/** Personalities a program may ask for: Linux, with no address randomisation, 32-bit, and the query. */
const PERSONALITIES = [0x0, 0x8, 0x20000, 0x20008, 0xffffffff];

/**
 * Airlock's profile for a container holding `caps` (as in CapAdd, without `CAP_`). x86-64 and arm64
 * (with their 32-bit modes), the architectures Airlock's image is built for.
 */
export function airlockSeccompProfile(caps: readonly string[] = []): SeccompProfile {
  const removed = new Set(Object.keys(SECCOMP_REMOVED));
  const allowed = ALLOWED.filter((n) => !removed.has(n));
  const byCap = caps.flatMap((c) => BY_CAPABILITY[c.replace(/^CAP_/, '')] ?? []);
  return {
    defaultAction: 'SCMP_ACT_ERRNO',
    defaultErrnoRet: EPERM,
    archMap: [
      { architecture: 'SCMP_ARCH_X86_64', subArchitectures: ['SCMP_ARCH_X86', 'SCMP_ARCH_X32'] },
      { architecture: 'SCMP_ARCH_AARCH64', subArchitectures: ['SCMP_ARCH_ARM'] },
    ],
    syscalls: [
      { names: [...allowed, ...byCap], action: 'SCMP_ACT_ALLOW' },
      // Every socket family but vsock, which reaches the hypervisor's host (Docker Desktop's, a VM's).
      { names: ['socket'], action: 'SCMP_ACT_ALLOW', args: [{ index: 0, value: AF_VSOCK, op: 'SCMP_CMP_NE' }] },
      ...PERSONALITIES.map((p): SeccompRule => ({ names: ['personality'], action: 'SCMP_ACT_ALLOW', args: [{ index: 0, value: p, op: 'SCMP_CMP_EQ' }] })),
      // Threads and processes, never a new namespace (a user namespace is where most kernel bugs are reached from).
      { names: ['clone'], action: 'SCMP_ACT_ALLOW', args: [{ index: 0, value: CLONE_NAMESPACE_FLAGS, valueTwo: 0, op: 'SCMP_CMP_MASKED_EQ' }] },
      // clone3 passes its flags in memory seccomp cannot read: ENOSYS makes libc fall back to clone.
      { names: ['clone3'], action: 'SCMP_ACT_ERRNO', errnoRet: ENOSYS },
      { names: ['arch_prctl'], action: 'SCMP_ACT_ALLOW', includes: { arches: ['amd64', 'x32'] } },
      { names: ['modify_ldt'], action: 'SCMP_ACT_ALLOW', includes: { arches: ['amd64', 'x32', 'x86'] } },
      { names: ['arm_fadvise64_64', 'arm_sync_file_range', 'sync_file_range2', 'breakpoint', 'cacheflush', 'set_tls'], action: 'SCMP_ACT_ALLOW', includes: { arches: ['arm', 'arm64'] } },
    ],
  };
}

/** The `SecurityOpt` entry that applies Airlock's profile (inline JSON, as Docker's API takes it). */
export function seccompSecurityOpt(caps: readonly string[] = []): string {
  return `seccomp=${JSON.stringify(airlockSeccompProfile(caps))}`;
}

/**
 * Creates a container whose config carries `seccompSecurityOpt`. Docker takes it as it is; Podman's
 * compatible API reads `seccomp=` as a file path on its own machine, so the JSON goes to a private
 * file for the call (Podman reads it while creating the container) and the file is removed after.
 */
export async function createContainerWithProfile(docker: Docker, engine: EngineKind, config: Docker.ContainerCreateOptions): Promise<Docker.Container> {
  const opts: string[] = config.HostConfig?.SecurityOpt ?? [];
  const at = opts.findIndex((o) => o.startsWith('seccomp={'));
  if (engine !== 'podman' || at < 0) return docker.createContainer(config);
  const dir = await mkdtemp(join(tmpdir(), 'airlock-seccomp-'));
  try {
    const file = join(dir, 'profile.json');
    await writeFile(file, opts[at]!.slice('seccomp='.length), { mode: 0o644 });
    const securityOpt = opts.map((o: string, i: number) => (i === at ? `seccomp=${file}` : o));
    try {
      return await docker.createContainer({ ...config, HostConfig: { ...config.HostConfig, SecurityOpt: securityOpt } });
    } catch (err) {
      if (/seccomp profile/i.test(err instanceof Error ? err.message : String(err))) {
        throw new AirlockError(
          'SANDBOX_FAILED',
          `Podman could not read Airlock's seccomp profile from ${file}: it reads it from its own machine, so Airlock needs a Podman on this machine (a remote or VM-hosted Podman does not see this file). Use Docker, or a local Podman service.`,
          { cause: err },
        );
      }
      throw err;
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
