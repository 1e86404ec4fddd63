import { AirlockError } from '../../contracts/errors';

/**
 * Where the engine's embedded DNS may forward names it does not know, on a compose run's network
 * (docs/architecture.md §16, "No DNS leaves a compose run's network").
 *
 * Docker answers service names from its embedded resolver (127.0.0.11 in every container on a
 * user-defined network) and forwards every other name to upstream servers. By default those are the
 * host's own resolvers, and before Docker 26.0.0 a resolver on the host's loopback (systemd-resolved's
 * 127.0.0.53, a local dnsmasq) is asked *from the host's network namespace*, even for a container on
 * an internal network (CVE-2024-29018): a way out of a run with no network. Naming the upstream for
 * the container (`Dns`) replaces the host's list entirely, and an upstream given that way is always
 * dialled from the container's own namespace. The upstream named is the run network's gateway
 * address, which the engine's IPAM reserves (no container is ever given it) and which nobody holds:
 * the bridge is made with `inhibit_ipv4`, so the host has no address there. A lookup of an outside
 * name therefore goes to an address nobody answers and fails after the short timeout below, on any
 * engine version; service names are still answered by the engine itself.
 */
export interface SidecarDns {
  /** The one upstream the engine may forward to: the run network's unheld gateway address. */
  servers: string[];
  /** resolv.conf options: fail fast instead of retrying an upstream that never answers. */
  options: string[];
  /** No search domains of the host (`.` means none). */
  search: string[];
}

/** The DNS settings of every container on a Docker run network, from what the engine says about that network. */
export function sidecarDns(info: { Internal?: boolean; IPAM?: { Config?: Array<{ Subnet?: string; Gateway?: string }> } }): SidecarDns {
  const cfg = info.IPAM?.Config?.find((c) => c.Subnet && /^\d+\.\d+\.\d+\.\d+\/\d+$/.test(c.Subnet));
  let gateway = cfg?.Gateway && /^\d+\.\d+\.\d+\.\d+$/.test(cfg.Gateway) ? cfg.Gateway : undefined;
  if (!gateway && cfg?.Subnet) {
    // IPAM reserves the subnet's first address for the gateway even when it does not report it.
    const [addr, bits] = cfg.Subnet.split('/');
    const n = (addr ?? '').split('.').reduce((a, x) => a * 256 + Number(x), 0);
    const size = 2 ** (32 - Number(bits));
    gateway = [24, 16, 8, 0].map((sh) => Math.floor((n - (n % size) + 1) / 2 ** sh) % 256).join('.');
  }
  if (info.Internal !== true || !gateway || gateway.startsWith('127.')) {
    throw new AirlockError('SANDBOX_FAILED', `The engine made the run's network without an internal IPv4 subnet (${cfg?.Subnet ?? 'none'}), so its name service could not be kept from forwarding outside names; compose services run only where it can. Choose --environment airlock, or report this engine's version.`, { field: 'environment' });
  }
  return { servers: [gateway], options: ['timeout:1', 'attempts:1'], search: ['.'] };
}

/** The container config fields that apply `dns` (Docker's names). */
export function dnsHostConfig(dns: SidecarDns | undefined): { Dns?: string[]; DnsOptions?: string[]; DnsSearch?: string[] } {
  return dns ? { Dns: dns.servers, DnsOptions: dns.options, DnsSearch: dns.search } : {};
}
