// The console is served by the gateway at /console; the build goes inside the Python package so pip needs no Node.
import preact from '@preact/preset-vite';
import { defineConfig } from 'vite';

export default defineConfig({
  base: '/console/',
  plugins: [preact()],
  build: {
    outDir: '../src/pier/console/static',
    emptyOutDir: true,
    modulePreload: { polyfill: false }, // no inline script: the page's CSP allows none
    sourcemap: false,
    reportCompressedSize: false,
  },
});
