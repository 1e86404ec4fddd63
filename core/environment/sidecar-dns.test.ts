import { describe, expect, it } from 'vitest';
import { sidecarContainerConfig } from './compose-sidecars';
import { dnsHostConfig, sidecarDns } from './sidecar-dns';

describe('sidecar DNS (docs/architecture.md §16, CVE-2024-29018)', () => {
  it("forwards outside names only to the run network's unheld gateway, never the host's resolvers", () => {
    const dns = sidecarDns({ Internal: true, IPAM: { Config: [{ Subnet: '172.18.0.0/16', Gateway: '172.18.0.1' }] } });
    expect(dns).toEqual({ servers: ['172.18.0.1'], options: ['timeout:1', 'attempts:1'], search: ['.'] });
    // No gateway reported: the subnet's first address, which IPAM reserves for it.
    expect(sidecarDns({ Internal: true, IPAM: { Config: [{ Subnet: '10.89.3.0/24' }] } }).servers).toEqual(['10.89.3.1']);
    const svc = { name: 'db', environment: {}, tmpfs: [], writableRoot: false, source: { kind: 'image' as const, image: 'redis' } };
    const cfg = sidecarContainerConfig('r-1', { service: svc, image: 'redis', imageVolumes: [] }, {}, { name: 'airlock-r-1-net', dns });
    expect(cfg.HostConfig).toMatchObject(dnsHostConfig(dns));
    expect(cfg.HostConfig?.Dns).toEqual(['172.18.0.1']);
  });

  it('refuses a network that is not internal, or has no IPv4 subnet', () => {
    expect(() => sidecarDns({ Internal: false, IPAM: { Config: [{ Subnet: '172.18.0.0/16', Gateway: '172.18.0.1' }] } })).toThrow(/could not be kept from forwarding/);
    expect(() => sidecarDns({ Internal: true, IPAM: { Config: [] } })).toThrow(/without an internal IPv4 subnet/);
  });
});
