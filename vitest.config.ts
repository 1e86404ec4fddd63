import { defineConfig } from 'vitest/config';

/**
 * Two projects: `unit` (fast, no engine) and `integration` (real Docker engine, keychain, Chromium).
 * Integration files run one at a time: they share one Docker engine on a 2-core machine.
 */
export default defineConfig({
  test: {
    // The sandbox payload and the CLI are built, never transpiled at run time: build them once first.
    globalSetup: ['test/support/build-once.ts'],
    projects: [
      {
        test: {
          name: 'unit',
          include: ['contracts/**/*.test.ts', 'core/**/*.test.ts', 'renderer/**/*.test.{ts,tsx}', 'main/**/*.test.ts', 'resources/**/*.test.ts', 'test/unit/**/*.test.ts'],
          environment: 'node',
          testTimeout: 20_000,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts', 'test/e2e/**/*.test.ts'],
          environment: 'node',
          testTimeout: 180_000,
          hookTimeout: 600_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
