import { describe, expect, it } from 'vitest';
import { SECCOMP_REMOVED, airlockSeccompProfile, seccompSecurityOpt } from './seccomp-profile';
import { HELPER_CAPS } from './container-config';

describe('Airlock\'s seccomp profile (docs/architecture.md §2.3)', () => {
  const profile = airlockSeccompProfile(HELPER_CAPS);
  const allowed = (name: string) => profile.syscalls.filter((r) => r.names.includes(name) && r.action === 'SCMP_ACT_ALLOW');

  it('refuses by default, and never allows the handle calls, io_uring or the other removed calls, whatever the capabilities', () => {
    expect(profile.defaultAction).toBe('SCMP_ACT_ERRNO');
    expect(profile.defaultErrnoRet).toBe(1);
    const everyCap = airlockSeccompProfile(['SYS_ADMIN', 'DAC_READ_SEARCH', 'SYS_CHROOT', 'SYS_PTRACE', 'SYS_MODULE']);
    for (const name of ['open_by_handle_at', 'name_to_handle_at', 'io_uring_setup', 'io_uring_enter', 'io_uring_register']) {
      expect(Object.keys(SECCOMP_REMOVED)).toContain(name);
      for (const p of [profile, everyCap]) expect(p.syscalls.some((r) => r.names.includes(name))).toBe(false);
    }
    for (const name of ['mount', 'umount2', 'unshare', 'setns', 'pivot_root', 'bpf', 'perf_event_open', 'keyctl', 'add_key', 'userfaultfd', 'kexec_load', 'init_module']) {
      expect(everyCap.syscalls.some((r) => r.names.includes(name))).toBe(false);
    }
  });

  it('keeps what programs need: pipes, files, threads without new namespaces, clone3 falling back to clone, no vsock', () => {
    for (const name of ['pipe2', 'openat', 'execve', 'futex', 'epoll_pwait', 'statx', 'setresuid', 'ptrace', 'getrandom']) expect(allowed(name)).toHaveLength(1);
    expect(allowed('clone')).toEqual([{ names: ['clone'], action: 'SCMP_ACT_ALLOW', args: [{ index: 0, value: 0x7e020000, valueTwo: 0, op: 'SCMP_CMP_MASKED_EQ' }] }]);
    expect(profile.syscalls.find((r) => r.names.includes('clone3'))).toEqual({ names: ['clone3'], action: 'SCMP_ACT_ERRNO', errnoRet: 38 });
    expect(allowed('socket')[0]?.args).toEqual([{ index: 0, value: 40, op: 'SCMP_CMP_NE' }]);
  });

  it('allows chroot only to a container holding SYS_CHROOT', () => {
    expect(allowed('chroot')).toHaveLength(0);
    expect(airlockSeccompProfile(['SYS_CHROOT']).syscalls[0]!.names).toContain('chroot');
  });

  it('is given to the engine inline', () => {
    expect(JSON.parse(seccompSecurityOpt(HELPER_CAPS).slice('seccomp='.length))).toEqual(profile);
  });
});
