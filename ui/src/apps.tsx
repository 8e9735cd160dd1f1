import { useEffect, useId, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { api, MAIN_CONTAINER, type App, type Session, type SessionContainer } from './api';
import { Button, Dialog, ErrorText } from './components';

// How the UI names an app of `ai.backend.service-ports` (docs/apps.md);
// others show their name with its words capitalized.
const APP_LABELS: Record<string, string> = {
  terminal: 'Terminal', jupyter: 'Jupyter Notebook', jupyterlab: 'JupyterLab', 'mlflow-ui': 'MLflow UI',
  tensorboard: 'TensorBoard', vscode: 'VS Code', ttyd: 'Terminal (ttyd)', sshd: 'SSH / SFTP',
};
export function appLabel(name: string): string {
  if (APP_LABELS[name]) return APP_LABELS[name];
  if (/^\d+$/.test(name)) return `Port ${name}`;
  return name.split(/[-_]+/).filter(Boolean).map((w) => w[0].toUpperCase() + w.slice(1)).join(' ') || name;
}

// A small picture per kind of app (decorative: the label names the app).
export function AppIcon({ name, size = 20 }: { name: string; size?: number }) {
  const common = { width: size, height: size, viewBox: '0 0 24 24', 'aria-hidden': 'true', class: 'app-icon' } as const;
  switch (name) {
    case 'terminal':
      return (
        <svg {...common}><rect x="2" y="3.5" width="20" height="17" rx="2.5" fill="#1d2330" />
          <path d="M6 9l3.5 3L6 15" stroke="#7ee787" stroke-width="1.8" fill="none" stroke-linecap="round" stroke-linejoin="round" />
          <path d="M11.5 15.5h6" stroke="#e6edf3" stroke-width="1.8" stroke-linecap="round" /></svg>
      );
    case 'jupyter':
    case 'jupyterlab':
      return (
        <svg {...common}><ellipse cx="12" cy="7" rx="8.5" ry="2.6" fill="none" stroke="#f37726" stroke-width="2" />
          <ellipse cx="12" cy="17" rx="8.5" ry="2.6" fill="none" stroke="#f37726" stroke-width="2" />
          <circle cx="12" cy="12" r="2.2" fill="#616262" /><circle cx="4.5" cy="3.5" r="1.2" fill="#767677" />
          <circle cx="19.5" cy="20.5" r="1.2" fill="#989798" /></svg>
      );
    case 'mlflow-ui':
    case 'tensorboard':
      return (
        <svg {...common}><rect x="2" y="3" width="20" height="18" rx="2.5" fill="#eef3ff" stroke="#2454c5" stroke-width="1.5" />
          <path d="M5 17l4-5 3.5 3L19 7" stroke={name === 'tensorboard' ? '#ff6f00' : '#0194e2'} stroke-width="2" fill="none"
            stroke-linecap="round" stroke-linejoin="round" /></svg>
      );
    default:
      return (
        <svg {...common}><rect x="2" y="4" width="20" height="16" rx="2.5" fill="#eef1f6" stroke="#5a6478" stroke-width="1.5" />
          <path d="M2 8.5h20" stroke="#5a6478" stroke-width="1.5" /><circle cx="5" cy="6.3" r=".8" fill="#5a6478" />
          <circle cx="7.5" cy="6.3" r=".8" fill="#5a6478" /></svg>
      );
  }
}

// The apps of a session's row, as chips (what it has; the launcher opens them).
export function AppChips({ apps }: { apps: App[] | undefined }) {
  if (!apps || apps.length === 0) return null;
  return (
    <ul class="app-chips" aria-label="Apps">
      {apps.map((a) => (
        <li key={a.name} class="app-chip" title={a.protocol === 'preopen' ? `${appLabel(a.name)}: start it yourself, then open it` : appLabel(a.name)}>
          <AppIcon name={a.name} size={14} />{appLabel(a.name)}
        </li>
      ))}
    </ul>
  );
}

// Which container of a cluster session the terminal, the apps or the log
// reach (main1 first, as the API defaults to it); each option says its
// node and status, since a container not RUNNING has no apps.
export function ContainerPicker(props: { containers: SessionContainer[]; value: string; onChange: (name: string) => void }) {
  const id = useId();
  return (
    <div class="field container-picker">
      <label for={id}>Container</label>
      <select id={id} value={props.value} onChange={(e) => props.onChange((e.target as HTMLSelectElement).value)}>
        {props.containers.map((c) => (
          <option key={c.name} value={c.name}>{c.name}{c.agent ? ` on ${c.agent}` : ''}{c.status !== 'RUNNING' ? ` (${c.status})` : ''}</option>
        ))}
      </select>
    </div>
  );
}

// A cluster session's containers, main1 first then sub1, sub2, ...; none
// for a one-container session (nothing to choose).
export function clusterContainers(s: Session | null): SessionContainer[] {
  if (!s || (s.cluster_size ?? 1) <= 1 || !s.containers?.length) return [];
  return [...s.containers].sort((a, b) => Number(a.role !== 'main') - Number(b.role !== 'main') || a.idx - b.idx);
}

// What a freshly opened tab shows until the app's URL is known.
function holdTab(tab: Window, label: string) {
  try {
    tab.document.title = `Opening ${label}…`;
    tab.document.body.style.cssText = 'font-family:system-ui,sans-serif;background:#1d2330;color:#e6edf3;padding:2rem';
    tab.document.body.textContent = `Opening ${label}…`;
  } catch { /* a tab we cannot write to still takes a location */ }
}

// The app launcher: one big button per app of the session, and a field to
// open any port of it. A click opens a tab at once (a tab opened later,
// after the POST answers, is a popup that browsers block), asks the
// manager for the app's URL (POST /v1/sessions/{id}/apps/{app}: a
// single-use token, valid 60 s) and sends the tab there.
export function AppLauncherDialog(props: { session: Session | null; onClose: () => void }) {
  const s = props.session;
  const [apps, setApps] = useState<App[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<{ label: string; url: string } | null>(null);
  const [busy, setBusy] = useState<string | null>(null);
  const [port, setPort] = useState('');
  const [sshHelp, setSshHelp] = useState(false);
  // Whose apps: main1 unless the user picks another container.
  const [container, setContainer] = useState(MAIN_CONTAINER);
  const containers = clusterContainers(s);
  const portId = useId();
  const epoch = useRef(0);
  const grid = useRef<HTMLDivElement>(null);
  // The first app has the focus once the list is in: the dialog opened
  // while it loaded, when "Open port" was the first field to take it.
  useEffect(() => {
    if (apps?.length) grid.current?.querySelector<HTMLButtonElement>('button.app-button:not(:disabled)')?.focus();
  }, [apps]);

  // A layout effect, as the other resets on opening: it runs before the
  // dialog can take input (components.tsx, Dialog).
  useLayoutEffect(() => {
    const mine = ++epoch.current;
    setApps(null);
    setError(null);
    setNotice(null);
    setBusy(null);
    setPort('');
    setSshHelp(false);
    if (!s) { setContainer(MAIN_CONTAINER); return; }
    api.apps(s.id, container).then((a) => { if (epoch.current === mine) setApps(a); })
      .catch((e) => {
        if (epoch.current !== mine) return;
        setApps([]);
        setError(`Cannot list the apps of ${s.name}${container !== MAIN_CONTAINER ? ` (${container})` : ''}: ${(e as Error).message}`);
      });
  }, [s?.id, container]);

  const open = async (app: string) => {
    if (!s) return;
    // SSH is no page for a browser: say how to connect instead (the
    // CLI's ProxyCommand reaches sshd through the proxy).
    if (app === 'sshd') {
      setError(null);
      setNotice(null);
      setSshHelp(true);
      return;
    }
    const label = appLabel(app);
    setError(null);
    setNotice(null);
    // Synchronously, in the click: allowed by popup blockers.
    const tab = window.open('', '_blank');
    if (tab) holdTab(tab, label);
    const mine = epoch.current;
    setBusy(app);
    try {
      const r0 = await api.openApp(s.id, app, container);
      if (!r0 || typeof r0.url !== 'string') throw new Error('the manager answered without a URL');
      // The terminal's tab is named after the session (and container):
      // the name rides in the fragment, which no server sees
      // (terminal.ts reads it).
      const r = app === 'terminal' && !r0.url.includes('#')
        ? { ...r0, url: `${r0.url}#session=${encodeURIComponent(container !== MAIN_CONTAINER ? `${s.name} (${container})` : s.name)}` } : r0;
      if (tab && !tab.closed) {
        // The app is another origin: it gets no handle on this page.
        try { tab.opener = null; } catch { /* not writable: fine */ }
        tab.location.href = r.url;
      } else if (epoch.current === mine) {
        // No tab (blocked, or closed meanwhile): a link to click within the token's life.
        setNotice({ label, url: r.url });
      }
    } catch (e) {
      if (tab && !tab.closed) tab.close();
      if (epoch.current === mine) setError(`Cannot open ${label}: ${(e as Error).message}`);
    } finally {
      if (epoch.current === mine) setBusy(null);
    }
  };

  const openPort = (e: Event) => {
    e.preventDefault();
    const n = Number(port);
    if (!/^\d+$/.test(port.trim()) || !Number.isInteger(n) || n < 1 || n > 65535) {
      setError('A port is a whole number from 1 to 65535.');
      return;
    }
    open(String(n));
  };

  return (
    <Dialog open={s !== null} title={s ? `Apps of ${s.name}` : 'Apps'} onClose={props.onClose}>
      {s && (
        <div class="launcher">
          {containers.length > 0 && <ContainerPicker containers={containers} value={container} onChange={setContainer} />}
          {apps === null ? <p class="hint" role="status">Loading the apps…</p> : (
            <div class="app-grid" ref={grid}>
              {apps.map((a) => (
                <button key={a.name} type="button" class="app-button" onClick={() => open(a.name)}
                  disabled={busy !== null} aria-busy={busy === a.name} aria-label={appLabel(a.name)}
                  title={a.protocol === 'preopen' ? `Start ${appLabel(a.name)} yourself in the terminal, then open it here` : undefined}>
                  <AppIcon name={a.name} size={44} />
                  <span class="app-label">{appLabel(a.name)}</span>
                  {a.protocol === 'preopen' && <span class="app-sub">start it in the terminal first</span>}
                </button>
              ))}
            </div>
          )}
          <form class="open-port" onSubmit={openPort}>
            <label for={portId}>Open port</label>
            <input id={portId} type="number" min={1} max={65535} step={1} value={port} placeholder="e.g. 8888"
              onInput={(e) => setPort((e.target as HTMLInputElement).value)} />
            <Button type="submit" disabled={busy !== null}>Open</Button>
            <small class="hint">A server you started in the session, listening on that port.</small>
          </form>
          {sshHelp && s && (
            <div class="ssh-help" role="status">
              <p>Connect from your computer with your SSH key (added under Credentials, SSH keys):</p>
              <pre><code>{`tessera session ssh ${s.name}${container !== MAIN_CONTAINER ? ` --container ${container}` : ''}`}</code></pre>
              <p>For ssh, scp, sftp, rsync and VS Code's Remote-SSH, add the session's block to ~/.ssh/config:</p>
              <pre><code>{`tessera session ssh-config ${s.name}${container !== MAIN_CONTAINER ? ` --container ${container}` : ''} >> ~/.ssh/config`}</code></pre>
            </div>
          )}
          {notice && (
            <p class="notice" role="status">
              Your browser kept the new tab from opening: <a href={notice.url} target="_blank" rel="noopener">open {notice.label}</a> (this
              link works once, within a minute).
            </p>
          )}
          <ErrorText error={error} />
          <div class="actions">
            <Button onClick={props.onClose}>Close</Button>
          </div>
        </div>
      )}
    </Dialog>
  );
}

// The apps of the RUNNING sessions, asked once per session (an image's
// apps do not change while it runs); a failed ask is retried 15 s later.
// A session whose apps cannot be listed shows none; its launcher says why.
export function useSessionApps(sessions: Session[]): Map<string, App[]> {
  const [apps, setApps] = useState<Map<string, App[]>>(new Map());
  const [retry, setRetry] = useState(0);
  const asked = useRef(new Set<string>());
  const running = sessions.filter((s) => s.status === 'RUNNING').map((s) => s.id);
  const key = running.join(',');
  useEffect(() => {
    const timers: number[] = [];
    for (const id of running) {
      if (asked.current.has(id)) continue;
      asked.current.add(id);
      api.apps(id).then((a) => setApps((m) => new Map(m).set(id, a))).catch(() => {
        timers.push(window.setTimeout(() => { asked.current.delete(id); setRetry((n) => n + 1); }, 15000));
      });
    }
    return () => timers.forEach((t) => clearTimeout(t));
  }, [key, retry]);
  return apps;
}
