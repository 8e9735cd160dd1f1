// The About page (/about, every user; docs/user-guide.md, "About"): the
// version and the health of the cluster's components, from GET /v1/about
// (docs/api.md, "About"; `tessera about` prints the same), read again
// every 15 s and on Refresh.
import { useEffect, useState } from 'preact/hooks';
import { call } from './api';
import { Button, ErrorText } from './components';

interface Component { name: string; status: 'up' | 'down' | 'degraded' | 'unknown'; detail: string }
export interface About { version: string; status: 'ok' | 'degraded'; started_at: string; uptime_s: number; components: Component[] }

function uptime(s: number): string {
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
}

// A status in words and a shape besides its colour.
const MARK: Record<Component['status'], string> = { up: '●', down: '✕', degraded: '▲', unknown: '?' };

export function AboutPage() {
  const [about, setAbout] = useState<About | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = () => call<About>('GET', '/api/v1/about').then((a) => { setAbout(a); setError(null); })
    .catch((e) => setError(`Cannot reach the manager: ${(e as Error).message}`));
  useEffect(() => {
    load();
    const t = window.setInterval(() => { if (!document.hidden) load(); }, 15000);
    return () => clearInterval(t);
  }, []);
  return (
    <section class="about-page" aria-labelledby="about-title">
      <div class="toolbar">
        <h1 id="about-title">About Tessera</h1>
        <span class="spacer" />
        <Button onClick={load}>Refresh</Button>
      </div>
      <ErrorText error={error} />
      {about === null ? (!error && <p>Loading…</p>) : (
        <>
          <dl class="about-facts">
            <dt>Version</dt><dd data-testid="version">tessera {about.version}</dd>
            <dt>Manager up since</dt><dd>{new Date(about.started_at).toLocaleString()} ({uptime(about.uptime_s)})</dd>
            <dt>Overall</dt><dd><span class={`health h-${about.status === 'ok' ? 'up' : 'degraded'}`}>
              {about.status === 'ok' ? 'All components answer' : 'Some components need attention'}</span></dd>
          </dl>
          <h2>Components</h2>
          <div class="table-scroll">
            <table class="about-components">
              <thead><tr><th scope="col">Component</th><th scope="col">Health</th><th scope="col">Detail</th></tr></thead>
              <tbody>
                {about.components.map((c) => (
                  <tr key={c.name} data-component={c.name} data-health={c.status}>
                    <th scope="row">{c.name}</th>
                    <td><span class={`health h-${c.status}`}><span aria-hidden="true">{MARK[c.status]} </span>{c.status}</span></td>
                    <td>{c.detail}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <p class="hint">"unknown": nothing proves it up or down (a webserver or app proxy that nobody has used since
            the manager started calls it not at all).</p>
        </>
      )}
    </section>
  );
}
