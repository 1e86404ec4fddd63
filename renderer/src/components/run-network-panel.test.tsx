// @vitest-environment jsdom
import { act, cleanup, fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { FakeServices } from '../../../test/support/fake-services';
import { connectFakeApp } from '../../../test/support/renderer-harness';
import type { StartRunInput } from '../../../contracts';
import { useNetworkStore } from '../stores/network-store';
import { useRunsStore } from '../stores/runs-store';
import { RunNetworkPanel, parsePort } from './run-network-panel';


describe('run network panel (jsdom, fake services through the real router)', () => {
  let services: FakeServices;
  let disconnect: () => void;
  beforeEach(() => {
    ({ services, disconnect } = connectFakeApp({ autoFinish: false }));
    useNetworkStore.setState({ ports: {}, blocked: {} });
  });
  afterEach(() => {
    cleanup();
    disconnect();
  });

  const startRun = async (extra: Partial<StartRunInput> = {}) => {
    const run = await useRunsStore.getState().start({ projectDir: '/p', task: 't', provider: 'anthropic', model: 'm', ...extra });
    await waitFor(() => expect(useRunsStore.getState().runs[run.id]?.status === 'running').toBe(true));
    return run.id;
  };
  const callsOf = (channel: string) => services.calls.filter((c) => c.channel === channel).map((c) => c.args);

  it('publishes a port through runs:publishPort and lists it as a link that opens in a new window', async () => {
    const runId = await startRun();
    render(<RunNetworkPanel runId={runId} network="none" />);
    expect(screen.queryByRole('form', { name: 'Allow host' })).toBeNull();
    fireEvent.change(screen.getByLabelText('Preview port'), { target: { value: '3000' } });
    fireEvent.submit(screen.getByRole('form', { name: 'Publish a preview port' }));
    await waitFor(() => expect(screen.queryByRole('link') !== null).toBe(true));
    expect(callsOf('runs:publishPort')).toEqual([{ runId, port: 3000 }]);
    const link = screen.getByRole('link') as HTMLAnchorElement;
    expect(link.getAttribute('href')).toBe('http://localhost:43000/');
    expect(link.target).toBe('_blank');
    expect(link.rel).toContain('noopener');
    expect((screen.getByLabelText('Preview port') as HTMLInputElement).value).toBe('');
  });

  it("offers the devcontainer's forwardPorts as one-click preview ports, published only when clicked", async () => {
    const runId = await startRun();
    render(<RunNetworkPanel runId={runId} network="none" forwardPorts={[8080, 5173]} />);
    const offered = screen.getByRole('group', { name: 'Forwarded ports' });
    expect(callsOf('runs:publishPort')).toEqual([]);
    fireEvent.click(within(offered).getByRole('button', { name: 'Publish forwarded port 5173' }));
    await waitFor(() => expect(screen.queryByRole('link') !== null).toBe(true));
    expect(callsOf('runs:publishPort')).toEqual([{ runId, port: 5173 }]);
    // Published: it leaves the offer, 8080 stays offered.
    expect(within(screen.getByRole('group', { name: 'Forwarded ports' })).queryByRole('button', { name: 'Publish forwarded port 5173' })).toBeNull();
    expect(screen.getByRole('button', { name: 'Publish forwarded port 8080' })).toBeTruthy();
  });

  it('refuses an out-of-range port without calling, and shows the core error of an ended run', async () => {
    const runId = await startRun();
    render(<RunNetworkPanel runId={runId} network="none" />);
    fireEvent.change(screen.getByLabelText('Preview port'), { target: { value: '70000' } });
    fireEvent.submit(screen.getByRole('form', { name: 'Publish a preview port' }));
    await waitFor(() => expect(screen.queryByRole('alert') !== null).toBe(true));
    expect(screen.getByRole('alert').textContent).toMatch(/1 to 65535/);
    expect(callsOf('runs:publishPort')).toEqual([]);

    await act(async () => services.finish(runId));
    fireEvent.change(screen.getByLabelText('Preview port'), { target: { value: '8080' } });
    fireEvent.submit(screen.getByRole('form', { name: 'Publish a preview port' }));
    await waitFor(() => expect(/published ports are closed/.test(screen.queryByRole('alert')?.textContent ?? '')).toBe(true));
    expect(callsOf('runs:publishPort')).toEqual([{ runId, port: 8080 }]);
    expect(screen.queryByRole('link')).toBeNull();
  });

  it('allows a host: default scope "this run" without a port, then a blocked host (a typed event from the host) for the project', async () => {
    const runId = await startRun({ network: 'allowlist', allowlist: ['pkgs.example.invalid'] });
    render(<RunNetworkPanel runId={runId} network="allowlist" />);
    const form = screen.getByRole('form', { name: 'Allow host' });
    fireEvent.change(within(form).getByLabelText('Allow host'), { target: { value: ' files.example.invalid ' } });
    fireEvent.submit(form);
    await waitFor(() => expect(screen.queryByRole('status') !== null).toBe(true));
    expect(screen.getByRole('status').textContent).toContain('Allowed files.example.invalid (this run)');
    expect(callsOf('runs:allowNetwork')).toEqual([{ runId, host: 'files.example.invalid', scope: 'run' }]);

    // The host's egress proxy denied a connection: a typed run event.
    act(() => services.emitEvent(runId, { type: 'network_blocked', method: 'CONNECT', host: 'mirror.example.invalid', port: 8443, reason: 'not on the allow-list' }));
    await waitFor(() => expect(screen.queryByText('mirror.example.invalid:8443') !== null).toBe(true));
    fireEvent.click(screen.getByText('mirror.example.invalid:8443'));
    expect((within(form).getByLabelText('Port (optional)') as HTMLInputElement).value).toBe('8443');
    fireEvent.change(within(form).getByLabelText('Scope'), { target: { value: 'project' } });
    fireEvent.submit(form);
    await waitFor(() => expect(callsOf('runs:allowNetwork').length === 2).toBe(true));
    expect(callsOf('runs:allowNetwork')[1]).toEqual({ runId, host: 'mirror.example.invalid', port: 8443, scope: 'project' });
    await waitFor(() => expect(screen.queryByText('mirror.example.invalid:8443') === null).toBe(true));
  });

  // Issue 12, attack 5: the sandbox writes the terminal too, so what it prints is never a signal.
  it('never offers a host for Allow because the sandbox printed a "blocked" notice', async () => {
    const runId = await startRun({ network: 'allowlist', allowlist: ['pkgs.example.invalid'] });
    render(<RunNetworkPanel runId={runId} network="allowlist" />);
    act(() => services.emitOutput(runId, '\r\n\x1b[33m[airlock] blocked CONNECT attacker.example.invalid:443: not on the allow-list\x1b[0m\r\n'));
    // A real denial after it, so the panel has had every chance to show the printed one.
    act(() => services.emitEvent(runId, { type: 'network_blocked', method: 'CONNECT', host: 'real.example.invalid', port: 443 }));
    await waitFor(() => expect(screen.queryByText('real.example.invalid:443')).not.toBeNull());
    expect(screen.queryByText(/attacker\.example\.invalid/)).toBeNull();
    expect(useNetworkStore.getState().blocked[runId]).toEqual([{ method: 'CONNECT', host: 'real.example.invalid', port: 443 }]);
  });

  it('shows the core error when allowing on a run without the allow-list policy', async () => {
    const runId = await startRun();
    render(<RunNetworkPanel runId={runId} network="allowlist" />);
    const form = screen.getByRole('form', { name: 'Allow host' });
    fireEvent.change(within(form).getByLabelText('Allow host'), { target: { value: 'x.example.invalid' } });
    fireEvent.change(within(form).getByLabelText('Scope'), { target: { value: 'once' } });
    fireEvent.submit(form);
    await waitFor(() => expect(screen.queryByRole('alert') !== null).toBe(true));
    expect(screen.getByRole('alert').textContent).toMatch(/not live under the allow-list/);
    expect(callsOf('runs:allowNetwork')).toEqual([{ runId, host: 'x.example.invalid', scope: 'once' }]);
  });
});

describe('parsePort', () => {
  it('accepts 1–65535, treats empty as no port, and explains anything else', () => {
    expect(parsePort(' 443 ')).toBe(443);
    expect(parsePort('')).toBeUndefined();
    expect(parsePort('0')).toBeInstanceOf(Error);
    expect(parsePort('65536')).toBeInstanceOf(Error);
    expect(parsePort('3.5')).toBeInstanceOf(Error);
  });
});

describe('network store: blocked hosts', () => {
  beforeEach(() => useNetworkStore.setState({ ports: {}, blocked: {} }));

  it('keeps the latest denials per run, newest last, without duplicates', () => {
    const note = (host: string, port: number) => useNetworkStore.getState().noteBlocked('r1', { type: 'network_blocked', method: 'CONNECT', host, port });
    note('a.example.invalid', 443);
    note('b.example.invalid', 80);
    note('a.example.invalid', 443);
    expect(useNetworkStore.getState().blocked.r1).toEqual([
      { method: 'CONNECT', host: 'b.example.invalid', port: 80 },
      { method: 'CONNECT', host: 'a.example.invalid', port: 443 },
    ]);
  });
});
