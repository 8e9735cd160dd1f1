import { defineConfig, type Plugin } from 'vite';
import { fileURLToPath } from 'node:url';

// terminal.html is served by the app proxy on each terminal's own origin,
// for every path but /ws (docs/apps.md): it must stand alone, so its script
// and styles are inlined into it rather than left as /assets/ files the
// proxy would have to find and serve beside it.
function inlineTerminalPage(): Plugin {
  return {
    name: 'tessera-inline-terminal',
    enforce: 'post',
    apply: 'build',
    generateBundle(_options, bundle) {
      const page = bundle['terminal.html'];
      if (!page || page.type !== 'asset') return;
      let html = String(page.source);
      const take = (ref: string): string => {
        const file = ref.replace(/^\//, '');
        const out = bundle[file];
        if (!out) this.error(`terminal.html refers to ${ref}, which the build did not make`);
        delete bundle[file];
        if (out.type === 'chunk') {
          if (out.imports.length || out.dynamicImports.length)
            this.error(`${file} imports other chunks (${[...out.imports, ...out.dynamicImports].join(', ')}); it cannot be inlined`);
          return out.code;
        }
        return String(out.source);
      };
      html = html.replace(/<script type="module" crossorigin src="([^"]+)"><\/script>/g, (_m, src: string) =>
        `<script type="module">${take(src).replace(/<\/script/gi, '<\\/script')}</script>`);
      html = html.replace(/<link rel="stylesheet" crossorigin href="([^"]+)">/g, (_m, href: string) =>
        `<style>${take(href).replace(/<\/style/gi, '<\\/style')}</style>`);
      if (/\/assets\//.test(html)) this.error('terminal.html still refers to /assets/ after inlining');
      page.source = html;
    },
  };
}

// Preact through esbuild's automatic JSX runtime: no plugin needed.
// The output directory is given by the build (meson passes --outDir).
export default defineConfig({
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  plugins: [inlineTerminalPage()],
  build: {
    target: 'es2020', sourcemap: false, assetsInlineLimit: 0,
    // Every browser the UI supports has modulepreload; the polyfill would be
    // a chunk shared by both pages, which terminal.html cannot inline.
    modulePreload: { polyfill: false },
    rollupOptions: {
      input: {
        main: fileURLToPath(new URL('./index.html', import.meta.url)),
        terminal: fileURLToPath(new URL('./terminal.html', import.meta.url)),
      },
    },
  },
  server: {
    // `npm run dev` against a running `tessera server` (web port 8080).
    proxy: { '/api': 'http://127.0.0.1:8080', '/auth': 'http://127.0.0.1:8080' },
  },
});
