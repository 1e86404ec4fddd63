#!/usr/bin/env node
// The CLI entry: sources are TypeScript, loaded through tsx's ESM hooks.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../core/cli/main.ts');
process.exitCode = await main(process.argv.slice(2));
