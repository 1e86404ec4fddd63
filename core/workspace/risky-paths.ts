/**
 * Review flags: edits that change what runs on the user's machine later (CI, hooks, lifecycle
 * scripts, IDE tasks, agent config, shell startup, build scripts). Applying them is fine when
 * intended, but the reviewer must see them called out.
 */

export interface RiskyPath {
  path: string;
  reason: string;
}

/** A changed path, optionally with its unified diff and modes (for content-aware checks). */
export type RiskInput = string | { path: string; oldPath?: string; diff?: string; oldMode?: string; newMode?: string };

interface Rule {
  test: (p: string, name: string) => boolean;
  reason: string;
}

const ci = /^(\.github\/(workflows|actions)\/|\.gitlab-ci\.ya?ml$|\.gitlab\/|\.circleci\/|azure-pipelines\.ya?ml$|\.azure-pipelines\/|\.travis\.ya?ml$|Jenkinsfile$|bitbucket-pipelines\.ya?ml$|\.buildkite\/|\.drone\.ya?ml$|\.woodpecker(\/|\.ya?ml$)|appveyor\.ya?ml$|\.forgejo\/workflows\/|\.gitea\/workflows\/)/;

const RULES: Rule[] = [
  { test: (p) => ci.test(p), reason: 'CI pipeline: runs on CI with its secrets' },
  { test: (p) => /^(\.githooks|\.husky|\.git-hooks)\//.test(p) || /(^|\/)(lefthook(-local)?\.ya?ml|\.pre-commit-config\.ya?ml|\.huskyrc(\..*)?|\.lintstagedrc(\..*)?|lint-staged\.config\.[cm]?js)$/.test(p), reason: 'git hook: runs on commit/push' },
  { test: (p) => /(^|\/)\.vscode\/(tasks|launch|settings)\.json$/.test(p) || /\.code-workspace$/.test(p), reason: 'VS Code tasks/launch/settings: can run commands when the folder is opened or debugged' },
  { test: (p) => /(^|\/)\.idea\//.test(p), reason: 'JetBrains IDE config (run configurations, startup tasks)' },
  { test: (p) => /^\.devcontainer\//.test(p) || p === '.devcontainer.json', reason: 'dev container config: runs commands when the container is built' },
  { test: (p) => /^\.claude\/(settings(\.local)?\.json|hooks\/)/.test(p), reason: 'Claude Code settings/hooks: commands and permissions for future agent sessions' },
  { test: (p) => /(^|\/)\.mcp\.json$/.test(p) || /^\.(cursor|continue|codex|gemini|windsurf|roo|kiro)\//.test(p), reason: 'agent / MCP config: tools and servers a future agent session starts' },
  { test: (_p, n) => ['AGENTS.md', 'CLAUDE.md', 'GEMINI.md', '.cursorrules', '.windsurfrules', '.clinerules', '.aider.conf.yml'].includes(n), reason: 'agent instructions: steer future agent sessions' },
  { test: (_p, n) => ['.bashrc', '.bash_profile', '.bash_login', '.profile', '.zshrc', '.zprofile', '.zshenv', '.zlogin', 'config.fish', '.inputrc'].includes(n), reason: 'shell startup file' },
  { test: (_p, n) => n === '.envrc', reason: 'direnv file: runs when you enter the folder' },
  { test: (_p, n) => ['Makefile', 'makefile', 'GNUmakefile', 'justfile', 'Justfile', 'Taskfile.yml', 'Taskfile.yaml', 'Rakefile'].includes(n) || n.endsWith('.mk'), reason: 'build script (make/just/task)' },
  { test: (_p, n) => ['setup.py', 'setup.cfg', 'pyproject.toml', 'conftest.py', 'noxfile.py', 'tox.ini', 'build.rs'].includes(n), reason: 'Python/Rust build or test hook: runs on install, build or test' },
  { test: (p) => /(^|\/)\.cargo\/config(\.toml)?$/.test(p) || /(^|\/)(gradlew|gradle-wrapper\.properties|build\.gradle(\.kts)?|settings\.gradle(\.kts)?)$/.test(p), reason: 'build tool config: runs on build' },
  { test: (_p, n) => ['.npmrc', '.yarnrc', '.yarnrc.yml', '.pnpmfile.cjs', 'bunfig.toml', 'pip.conf', '.pypirc'].includes(n), reason: 'package manager config: registry or install-script behaviour' },
  // Git-steering files (docs/architecture.md §11, "Git-steering files").
  { test: (_p, n) => n === '.gitmodules', reason: 'git submodules: your git clones and checks out these URLs and paths (clone --recursive, submodule update)' },
  { test: (_p, n) => n === '.gitattributes', reason: 'git attributes: name filters and diff drivers your git runs on checkout, diff and commit' },
  { test: (_p, n) => n === '.lfsconfig', reason: 'Git LFS config: where git-lfs fetches from and pushes to' },
  { test: (_p, n) => n === '.gitignore', reason: 'git ignore rules: decide which files git status and commits leave out' },
  { test: (_p, n) => /^\.git(?!hub|lab|pod|ea)/i.test(n) && !['.gitmodules', '.gitattributes', '.gitignore', '.gitkeep'].includes(n), reason: 'git control file: read by git or git tools' },
  { test: (_p, n) => n === '.mailmap', reason: 'git mailmap: rewrites the authors git shows' },
];

/** Lines of git config that name a command or another config (a `config` file anywhere, planted or not). */
const GIT_CONFIG_COMMAND_LINE = /^\+\s*(?:\[\s*(?:include|includeif|filter|diff|merge|credential|gpg|core|alias|sequence|uploadpack|receive|remote)\b|(?:fsmonitor|hookspath|sshcommand|pager|editor|askpass|gitproxy|textconv|clean|smudge|process|external|program|helper|driver|command|proxycommand|uploadpack|receivepack|path)\s*=)/im;

const LIFECYCLE = ['preinstall', 'install', 'postinstall', 'prepare', 'prepublish', 'prepublishOnly', 'prepack', 'postpack', 'preuninstall', 'uninstall', 'postuninstall'];
const LIFECYCLE_LINE = new RegExp(`^[+-]\\s*"(${LIFECYCLE.join('|')})"\\s*:`, 'm');
const URL_DEPENDENCY_LINE = /^\+\s*"[^"]+"\s*:\s*"(git\+|git:|https?:|file:|github:|gitlab:|bitbucket:|[\w.-]+\/[\w.-]+(#|"))/m;

/** Flags the changed paths whose edits affect what runs on the user's machine later. */
export function classifyRiskyPaths(changes: RiskInput[]): RiskyPath[] {
  const out: RiskyPath[] = [];
  for (const c of changes) {
    const change = typeof c === 'string' ? { path: c } : c;
    const reasons: string[] = [];
    for (const p of new Set([change.path, change.oldPath].filter((x): x is string => !!x))) {
      const name = p.slice(p.lastIndexOf('/') + 1);
      for (const rule of RULES) if (rule.test(p, name)) reasons.push(rule.reason);
      if (name === 'package.json') reasons.push(...packageJsonReasons(change.diff));
      if ((name === 'config' || name === 'config.worktree') && change.diff !== undefined && GIT_CONFIG_COMMAND_LINE.test(change.diff)) reasons.push('git config that names commands or other config (fsmonitor, hooksPath, filters, includes…): runs when git reads this folder');
    }
    if (change.newMode === '100755' && change.oldMode !== '100755') reasons.push('made executable');
    if (change.newMode === '120000' && change.oldMode !== '120000') reasons.push('now a symlink: check where it points');
    for (const reason of new Set(reasons)) out.push({ path: change.path, reason });
  }
  return out;
}

function packageJsonReasons(diff: string | undefined): string[] {
  if (diff === undefined) return ['package.json changed: check lifecycle scripts (postinstall, prepare…) and new dependencies'];
  const reasons: string[] = [];
  if (LIFECYCLE_LINE.test(diff)) reasons.push('package.json lifecycle script changed: runs on npm/yarn/pnpm install');
  if (URL_DEPENDENCY_LINE.test(diff)) reasons.push('package.json adds a dependency from a URL, git or local path');
  return reasons;
}
