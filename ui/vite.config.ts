import { defineConfig } from 'vite';

// Preact through esbuild's automatic JSX runtime: no plugin needed.
// The output directory is given by the build (meson passes --outDir).
export default defineConfig({
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: { target: 'es2020', sourcemap: false, assetsInlineLimit: 0 },
  server: {
    // `npm run dev` against a running `tessera server` (web port 8080).
    proxy: { '/api': 'http://127.0.0.1:8080', '/auth': 'http://127.0.0.1:8080' },
  },
});
