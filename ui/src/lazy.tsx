// A page loaded when first shown, in a chunk of its own: the main
// script stays small (docs/architecture.md, "The webserver": under 250 KB)
// while pages few open (the admin Dashboard, About) are fetched only by
// those who open them.
import type { ComponentType } from 'preact';
import { useEffect, useState } from 'preact/hooks';

export function lazyPage<P extends object>(load: () => Promise<ComponentType<P>>): ComponentType<P> {
  let loaded: ComponentType<P> | null = null;
  return function LazyPage(props: P) {
    const [page, setPage] = useState<{ C: ComponentType<P> } | null>(loaded ? { C: loaded } : null);
    const [error, setError] = useState<string | null>(null);
    useEffect(() => {
      if (page) return;
      load().then((C) => { loaded = C; setPage({ C }); })
        .catch(() => setError('Cannot load this page from the webserver (was Tessera upgraded?): reload to try again.'));
    }, []);
    if (error) return <p class="error" role="alert">{error}</p>;
    return page ? <page.C {...props} /> : <p class="loading">Loading…</p>;
  };
}
