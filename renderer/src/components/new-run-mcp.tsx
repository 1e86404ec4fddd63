import { useEffect } from 'react';
import { useMcpServersStore } from '../stores/mcp-servers-store';
import { useNewRunForm } from '../stores/new-run-form-store';

/**
 * The user's MCP servers the run gets (docs/architecture.md §20): ticked as enabled for the project
 * on the MCP servers screen, changeable per run. Shown only when the user has servers and the agent
 * can use the gateway (a custom command cannot).
 */
export function McpServersField() {
  const servers = useMcpServersStore((s) => s.servers);
  const projectDir = useNewRunForm((s) => s.draft.projectDir.trim());
  const agent = useNewRunForm((s) => s.draft.agent);
  // The array itself, not a fresh `?? []` per render (a new value each time would render forever).
  const chosen = useNewRunForm((s) => s.draft.mcpServers);
  const picked = chosen ?? [];
  useEffect(() => {
    if (useMcpServersStore.getState().servers === undefined) void useMcpServersStore.getState().load();
  }, []);
  useEffect(() => {
    if (!projectDir || useNewRunForm.getState().draft.mcpProject === projectDir) return;
    // Best effort: a folder the host cannot read yet simply gets no servers ticked.
    useMcpServersStore.getState().projectServers(projectDir).then((names) => useNewRunForm.getState().presetMcp(projectDir, names), () => undefined);
  }, [projectDir]);
  if (!servers?.length || agent === 'custom') return null;
  const toggle = (name: string, on: boolean) => useNewRunForm.getState().set({ mcpServers: on ? [...picked, name] : picked.filter((n) => n !== name) });
  return (
    <>
      <label>MCP servers</label>
      <div className="stack" style={{ gap: 4 }}>
        <div className="row" role="group" aria-label="MCP servers for the run">
          {servers.map((s) => (
            <label key={s.name} className="row" style={{ gap: 4 }}>
              <input type="checkbox" aria-label={`MCP server ${s.name}`} checked={picked.includes(s.name)} onChange={(e) => toggle(s.name, e.target.checked)} />
              <span className="mono">{s.name}</span>
            </label>
          ))}
        </div>
        <span className="hint">Reached through Airlock's gateway on this machine: their tokens never enter the sandbox. Ticked: the ones enabled for this project (MCP servers screen).</span>
      </div>
    </>
  );
}
