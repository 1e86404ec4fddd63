/**
 * Summary and usage of the commands whose modules are heavy (they load the core): `airlock <command>
 * --help` prints these without loading the command, so it costs about what `airlock --help` does
 * (`cli.start`, docs/architecture.md §8). Each command takes its own text from here.
 */
export interface CommandHelp {
  summary: string;
  usage: string;
}

export const COMMAND_HELP = {
  run: {
    summary: "Run an agent on a copy of a project in a fresh, disposable sandbox.",
    usage: "airlock run <projectDir> --task \"…\" | airlock run --continue <runId> --task \"…\"\n       [--agent builtin|claude-code|codex|custom] [--custom-command CMD]\n       [--provider P] [--model M] [--approve-commands] [--timeout S] [--budget-tokens N] [--budget-usd N]\n       [--isolation container|gvisor|vm] [--engine docker|podman|auto] [--network none|allowlist|open] [--allow DOMAIN|preset:npm]… [--rule 'HOST read-only']… [--secret NAME]… [--internal-host NAME]… [--mcp NAME]… [--no-mcp] [--network-approvals ask|deny] [--publish PORT]… [--key-env VAR]\n       [--git-history none|N|all] [--environment auto|airlock|devcontainer[:PATH]|image:REF]\n       [--trust-environment] [--allow-local-env NAME]… [--setup-allow DOMAIN|preset:NAME]… [--json]\n       [--check 'npm test'] [--check-timeout S] [--attempts claude-code,codex,builtin:MODEL,AGENT:PROVIDER/MODEL]\n       airlock run --again <runId> [projectDir] [any option above, to change that setting]\n--network-approvals also decides MCP calls that ask: ask waits for your answer here, deny refuses them at once.\nWithout --mcp a new run gets the MCP servers enabled for its project (MCP servers screen, airlock mcp-servers project); --no-mcp: none.",
  },
  sandbox: {
    summary: "Run one command in a fresh sandbox on a copy of a project and show the diff it caused.",
    usage: "airlock sandbox exec <projectDir> [--image REF] [--timeout SECONDS] [--include PATTERN]… [--exclude PATTERN]… [--patch FILE] [--no-diff] -- <command…>",
  },
  mcp: {
    summary: "Serve Airlock sandboxes and runs to an MCP client (Claude Code, Codex, Cursor, VS Code) over stdio.",
    usage: "airlock mcp [--project DIR]… [--allow-apply] [--cold] [--foreground]   (--project: a folder clients may use besides those granted in Settings → MCP, repeatable; --allow-apply: run_apply writes unflagged changes into granted folders without asking the user, recorded in the audit log; --cold: keep no started sandbox ready for the next sandbox_create; --foreground: serve in this process, see docs/architecture.md §17)",
  },
  compare: {
    summary: "Compare an attempt group's attempts side by side (check, changes, tokens, cost, time).",
    usage: "airlock compare <groupId> [--json | --markdown]",
  },
  env: {
    summary: "Show a project's environment plan before a run; list or remove prepared environments",
    usage: "airlock env plan [DIR] [--environment auto|airlock|devcontainer[:PATH]|image:REF] [--allow-local-env NAME]… [--json]\nairlock env list [--json]\nairlock env prune [--older-than AGE] [--json]   (AGE: 30d, 12h, 90m, 45s; without it every prepared environment is removed)",
  },
  runs: {
    summary: "List past and current runs, newest first.",
    usage: "airlock runs [--json] [--limit N]",
  },
  show: {
    summary: "Show one run: its record, changed files (risky ones flagged) and usage.",
    usage: "airlock show <runId> [--thread | --checkpoint N] [--json] [--diff] [--hunks]   (--hunks: number each file's hunks and changed lines, for apply/patch --hunks/--lines; --thread: the whole thread's change up to this turn)",
  },
  apply: {
    summary: "Apply a run's result to the project (or another folder): working tree or a new branch.",
    usage: "airlock apply <runId> --reviewed SHA256 [--thread | --checkpoint N] [--to DIR] [--branch NAME [--message TEXT]] [--files a,b,…] [--hunks PATH:1,3] [--lines PATH:-3,+4] [--skip-conflicts] [--json]   (SHA256: from airlock show, or airlock patch with the same selection; --thread: the whole thread's change up to this turn; --checkpoint N: the run's change up to that checkpoint, see airlock checkpoints; whole or nothing: one conflicting file and nothing is written, unless --skip-conflicts writes the files that do not conflict)",
  },
  patch: {
    summary: "Print a run's result as a patch (git apply accepts it), or write it to a file.",
    usage: "airlock patch <runId> [--thread | --checkpoint N] [--out FILE] [--files a,b,…] [--hunks PATH:1,3] [--lines PATH:-3,+4]   (hunk numbers and line ids: airlock show <runId> --hunks)",
  },
  checkpoints: {
    summary: "List a run's checkpoints: its change after each turn that changed files (the last is its result).",
    usage: "airlock checkpoints <runId> [--json]   (review one: airlock show <runId> --checkpoint N; apply it alone: airlock apply <runId> --checkpoint N --reviewed SHA256; continue from it: airlock run --continue <runId> --checkpoint N --task \"…\")",
  },
  doctor: {
    summary: "Check the container engine, the sandbox image (building it if missing) and the sandbox helper.",
    usage: "airlock doctor [--json] [--no-build] [--agents] [--image REF] [--prune]",
  },
} as const satisfies Record<string, CommandHelp>;

/** The help of a command, when it is one of those above. */
export function commandHelp(name: string): CommandHelp | undefined {
  return Object.hasOwn(COMMAND_HELP, name) ? COMMAND_HELP[name as keyof typeof COMMAND_HELP] : undefined;
}
