// ESLint, type-aware (docs/architecture.md §3): the few rules that catch real bugs in async,
// event-driven code, not style. `npm run lint` runs it after the type check.
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['out/**', 'dist/**', 'node_modules/**', 'bench/results/**'] },
  {
    files: ['**/*.ts', '**/*.tsx', '**/*.mts'],
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: { project: './tsconfig.json', tsconfigRootDir: import.meta.dirname },
    },
    plugins: { '@typescript-eslint': tseslint.plugin },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // A promise nobody awaits or catches fails silently (or crashes the process as an unhandled rejection).
      '@typescript-eslint/no-floating-promises': 'error',
      // An async function where a void callback is expected: its rejection goes nowhere.
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { args: 'after-used', argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_', ignoreRestSiblings: true }],
      '@typescript-eslint/consistent-type-imports': ['error', { prefer: 'type-imports', fixStyle: 'inline-type-imports' }],
    },
  },
  {
    // Components render; they reach the host through stores and hooks (docs/architecture.md §5
    // "Screens and their hooks"). Tests may install a fake API.
    files: ['renderer/src/components/**/*.tsx'],
    ignores: ['**/*.test.tsx'],
    rules: {
      'no-restricted-imports': ['error', { paths: [{ name: '../api', importNames: ['api', 'setApi'], message: 'components call a store or hook (renderer/src/stores, renderer/src/hooks), not the host API' }] }],
    },
  },
);
