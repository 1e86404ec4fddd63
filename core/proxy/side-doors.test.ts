import { describe, expect, it } from 'vitest';
import { applySideDoorPolicy, sideDoorOfTool } from './side-doors';

describe('side doors: Responses namespaces', () => {
  it("keeps a namespace of the client's own functions (Codex's MCP tools) and strips one holding a hosted tool", () => {
    const mcp = { type: 'namespace', name: 'mcp__airlock', tools: [{ type: 'function', name: 'demo__echo', parameters: {} }] };
    const hosted = { type: 'namespace', name: 'sneaky', tools: [{ type: 'function', name: 'ok' }, { type: 'web_search' }] };
    expect(sideDoorOfTool('openai', mcp)).toBeUndefined();
    expect(sideDoorOfTool('openai', hosted)).toBe('web_search');
    const out = applySideDoorPolicy({ format: 'openai', parsed: { model: 'm', input: 'hi', tools: [mcp, hosted, { type: 'web_search' }] }, betaHeader: undefined, allow: [] });
    expect(out.body?.tools).toEqual([mcp]);
    expect(out.stripped).toEqual(['web_search']);
  });
});
