import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { AirlockError } from '../../../contracts/errors';
import { parseRule, RuleSet } from './rules';

/**
 * A project's own egress policy, `<project>/.airlock/egress.json`: `{ "rules": ["github.com git-fetch"] }`.
 * It is read on the host from the user's project (never from the sandbox's copy) and can only
 * tighten: its rules refuse, they never admit a host or a request the user's rules refuse
 * (`decideWithProject`, docs/architecture.md §2.8).
 */
export const PROJECT_RULES_FILE = path.join('.airlock', 'egress.json');

const FileSchema = z.object({ rules: z.array(z.string().min(1).max(400)).max(200) }).strict();

export async function loadProjectRules(projectPath: string): Promise<RuleSet | undefined> {
  const file = path.join(projectPath, PROJECT_RULES_FILE);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ENOTDIR') return undefined;
    throw err;
  }
  let parsed: z.infer<typeof FileSchema>;
  try {
    parsed = FileSchema.parse(JSON.parse(text));
  } catch (err) {
    throw new AirlockError('INVALID_INPUT', `${file} is not a valid egress policy (write {"rules": ["host git-fetch", …]}): ${(err as Error).message.slice(0, 200)}`);
  }
  return new RuleSet(parsed.rules.map(parseRule));
}
