import { resolve } from 'node:path';
import react from '@vitejs/plugin-react';
import { defineConfig } from 'electron-vite';

/**
 * Three bundles: main (Node, Electron), preload (sandboxed: one CommonJS file, no Node modules),
 * renderer (a plain web page, also served by `airlock serve`). Native and Electron modules stay
 * external to main; the renderer gets only what it imports (contracts + React + xterm).
 */
export default defineConfig({
  main: {
    build: {
      outDir: 'out/main',
      externalizeDeps: true,
      rollupOptions: { input: { index: resolve(__dirname, 'main/index.ts') } },
    },
  },
  preload: {
    build: {
      outDir: 'out/preload',
      // A sandboxed preload cannot require() anything but electron: bundle zod and the contracts in.
      externalizeDeps: { exclude: ['zod'] },
      rollupOptions: {
        input: { index: resolve(__dirname, 'preload/index.ts') },
        output: { format: 'cjs', entryFileNames: '[name].cjs' },
      },
    },
  },
  renderer: {
    root: resolve(__dirname, 'renderer'),
    base: './',
    plugins: [react()],
    build: {
      outDir: resolve(__dirname, 'out/renderer'),
      emptyOutDir: true,
      sourcemap: false,
      rollupOptions: { input: { index: resolve(__dirname, 'renderer/index.html') } },
    },
  },
});
