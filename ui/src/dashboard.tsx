// The admin dashboard (/dashboard; docs/user-guide.md, "The admin
// dashboard"): free and allocated capacity per GPU model and per node,
// sessions by status, the users who hold the most now, and the sessions
// that failed recently with why, from GET /v1/dashboard (docs/api.md,
// "Dashboard"; `tessera dashboard` prints the same), read again every
// 5 s (not from the event stream: a Sessions tab holds one already, and a
// browser keeps few connections per site; tray.tsx); and the
// announcement banner's text, posted here.
import { useEffect, useId, useState } from 'preact/hooks';
import { api, call, fmtBytes, fmtNum, type Resources } from './api';
import { Button, Email, ErrorText, Name } from './components';
import { navigate, sessionHref } from './session';
import { useAnnouncement } from './tray';

interface GpuModel { model: string; memory: number; devices: number; nodes: number; fgpu_capacity: number; fgpu_used: number; fgpu_free: number }
interface DashNode {
  id: string; status: string; schedulable: boolean; group: string; capacity: Resources; used: Resources; free: Resources;
  sessions: number; gpus: { model: string; count: number; fgpu_capacity: number; fgpu_used: number }[];
}
interface Failure { id: string; name: string; owner: string; status: string; status_info: string; at: string | null }
export interface Dashboard {
  generated_at: string; window_s: number;
  totals: { capacity: Resources; used: Resources; free: Resources; nodes: number; nodes_alive: number };
  gpu_models: GpuModel[]; nodes: DashNode[]; sessions: { by_status: Record<string, number> };
  top_users: { email: string; sessions: number; held: Resources }[]; failures: Failure[];
}

const cpu = (n: number) => `${fmtNum(Math.round(n * 100) / 100)} CPU`;
const fgpu = (n: number) => `${fmtNum(Math.round(n * 100) / 100)} fGPU`;

// Allocated against capacity, as a bar with its words beside it. name:
// what a screen reader calls it where the row says the rest (the node).
function Bar(props: { label: string; name?: string; used: number; total: number; fmt: (n: number) => string }) {
  const id = useId();
  const pct = props.total > 0 ? Math.min(100, (props.used / props.total) * 100) : 0;
  return (
    <div class="dash-bar">
      <span id={id} class="dash-bar-label">{props.label} <span class="hint">{props.fmt(props.used)} / {props.fmt(props.total)}</span></span>
      <span class="bar-track" role="meter" aria-label={props.name ?? props.label} aria-valuemin={0} aria-valuemax={props.total}
        aria-valuenow={props.used} aria-valuetext={`${props.fmt(props.used)} of ${props.fmt(props.total)} allocated`}>
        <span class={`bar-fill alloc${pct >= 90 ? ' crit' : ''}`} style={{ width: `${pct}%` }} />
      </span>
    </div>
  );
}

// The order a reader scans statuses in: what runs, what waits, what ended.
const STATUSES = ['RUNNING', 'PENDING', 'SCHEDULED', 'PREPARING', 'LOST', 'PREEMPTED', 'TERMINATING', 'ERROR', 'TERMINATED', 'CANCELLED'];

function AnnouncementEditor() {
  const [current, reload] = useAnnouncement();
  const [text, setText] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const id = useId();
  const post = async (value: string | null) => {
    setBusy(true); setError(null); setNotice(null);
    try {
      await api.setConfig('announcement', value);
      setNotice(value ? 'Posted: every logged-in user sees it at the top of every page.' : 'The announcement was taken down.');
      setText('');
      reload();
      dispatchEvent(new Event('tessera:announcement'));
    } catch (err) {
      setError(`Cannot post the announcement: ${(err as Error).message}`);
    } finally { setBusy(false); }
  };
  return (
    <section class="card dash-card" aria-labelledby={`${id}-h`}>
      <h2 id={`${id}-h`}>Post an announcement</h2>
      <p class="hint">{current ? <>Shown now: <q class="current-announcement">{current}</q></> : 'None is shown.'} One line for
        every logged-in user, on every page, until they dismiss it (<code>tessera config set announcement "..."</code>).</p>
      <ErrorText error={error} />
      {notice && <p class="notice" role="status">{notice}</p>}
      <form class="inline" onSubmit={(e) => { e.preventDefault(); post(text.trim()); }}>
        <div class="field">
          <label for={id}>New announcement</label>
          <input id={id} type="text" maxLength={500} value={text} placeholder="e.g. Maintenance on Friday 18:00-20:00"
            onInput={(e) => setText((e.target as HTMLInputElement).value)} />
        </div>
        <Button type="submit" kind="primary" disabled={busy || !text.trim()}>Post</Button>
        {current && <Button disabled={busy} onClick={() => post(null)}>Take down</Button>}
      </form>
    </section>
  );
}

export function DashboardPage() {
  const [d, setD] = useState<Dashboard | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = () => call<Dashboard>('GET', '/api/v1/dashboard').then((r) => { setD(r); setError(null); })
    .catch((e) => setError(`Cannot read the dashboard: ${(e as Error).message}`));
  useEffect(() => {
    load();
    const t = window.setInterval(() => { if (!document.hidden) load(); }, 5000);
    return () => clearInterval(t);
  }, []);

  return (
    <section class="dashboard-page" aria-labelledby="dash-title">
      <div class="toolbar">
        <h1 id="dash-title">Dashboard</h1>
        <span class="spacer" />
        {d && <span class="hint" aria-live="off">updated {new Date(d.generated_at).toLocaleTimeString()}</span>}
      </div>
      <ErrorText error={error} />
      {d === null ? (!error && <p>Loading…</p>) : (
        <>
          <section class="card dash-card" aria-labelledby="dash-cap">
            <h2 id="dash-cap">Capacity</h2>
            <p class="hint">{d.totals.nodes_alive} of {d.totals.nodes} node{d.totals.nodes === 1 ? '' : 's'} alive. Free
              for new sessions (alive nodes not drained): <strong data-testid="free-total">{cpu(d.totals.free.cpu)}, {fmtBytes(d.totals.free.mem)},
              {' '}{fgpu(d.totals.free.fgpu)}</strong>.</p>
            <div class="dash-bars">
              <Bar label="CPU" used={d.totals.used.cpu} total={d.totals.capacity.cpu} fmt={cpu} />
              <Bar label="Memory" used={d.totals.used.mem} total={d.totals.capacity.mem} fmt={fmtBytes} />
              <Bar label="fGPU" used={d.totals.used.fgpu} total={d.totals.capacity.fgpu} fmt={fgpu} />
            </div>
            <h3>Per GPU model</h3>
            {d.gpu_models.length === 0 ? <p class="hint">No GPU on an alive node.</p> : (
              <div class="table-scroll">
                <table class="dash-models">
                  <thead><tr><th scope="col">Model</th><th scope="col">Devices</th><th scope="col">Nodes</th>
                    <th scope="col">fGPU allocated</th><th scope="col">Free</th></tr></thead>
                  <tbody>
                    {d.gpu_models.map((g) => (
                      <tr key={`${g.model}/${g.memory}`} data-model={g.model}>
                        <td><Name text={g.model} />{!g.model.includes(fmtBytes(g.memory)) && <span class="hint"> ({fmtBytes(g.memory)})</span>}</td>
                        <td>{g.devices}</td><td>{g.nodes}</td>
                        <td><Bar label="allocated" name={`${g.model} fGPU`} used={g.fgpu_used} total={g.fgpu_capacity} fmt={fgpu} /></td>
                        <td>{fgpu(g.fgpu_free)}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            )}
            <h3>Per node</h3>
            {d.nodes.length === 0 ? <p class="hint">No node has registered.</p> : (
              <div class="table-scroll">
                <table class="dash-nodes">
                  <thead><tr><th scope="col">Node</th><th scope="col">Status</th><th scope="col">Allocated</th>
                    <th scope="col">Free</th><th scope="col">Sessions</th></tr></thead>
                  <tbody>
                    {d.nodes.map((n) => (
                      <tr key={n.id} data-node={n.id}>
                        <th scope="row"><Name text={n.id} host />{n.group !== 'default' && <span class="hint"> · group {n.group}</span>}
                          {n.gpus.map((g) => <div class="hint" key={g.model}>{g.count} × {g.model}</div>)}</th>
                        <td><span class={`status st-${n.status.toLowerCase()}`}>{n.status}</span>
                          {!n.schedulable && <span class="badge drained-badge">drained</span>}</td>
                        <td class="dash-node-bars">
                          <Bar label="CPU" name={`${n.id} CPU`} used={n.used.cpu} total={n.capacity.cpu} fmt={cpu} />
                          <Bar label="Memory" name={`${n.id} memory`} used={n.used.mem} total={n.capacity.mem} fmt={fmtBytes} />
                          {n.capacity.fgpu > 0 && <Bar label="fGPU" name={`${n.id} fGPU`} used={n.used.fgpu} total={n.capacity.fgpu} fmt={fgpu} />}
                        </td>
                        <td class="dash-free">{cpu(n.free.cpu)}<br />{fmtBytes(n.free.mem)}{n.capacity.fgpu > 0 && <><br />{fgpu(n.free.fgpu)}</>}</td>
                        <td>{n.sessions}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            )}
          </section>

          <div class="dash-grid">
            <section class="card dash-card" aria-labelledby="dash-status">
              <h2 id="dash-status">Sessions by status</h2>
              <ul class="dash-statuses">
                {STATUSES.filter((s) => s in d.sessions.by_status).map((s) => (
                  <li key={s} data-status={s} class={d.sessions.by_status[s] ? '' : 'zero'}>
                    <span class={`status st-${s.toLowerCase()}`}>{s}</span> <strong>{d.sessions.by_status[s]}</strong>
                  </li>
                ))}
              </ul>
              <p class="hint">Ended ones (TERMINATED, CANCELLED, ERROR): those of the last {Math.round(d.window_s / 3600)} hours.</p>
            </section>

            <section class="card dash-card" aria-labelledby="dash-users">
              <h2 id="dash-users">Busiest users</h2>
              {d.top_users.length === 0 ? <p class="hint">No one holds anything now.</p> : (
                <div class="table-scroll">
                  <table class="dash-users">
                    <thead><tr><th scope="col">User</th><th scope="col">Sessions</th><th scope="col">Allocated now</th></tr></thead>
                    <tbody>
                      {d.top_users.map((u) => (
                        <tr key={u.email} data-user={u.email}>
                          <td><Email email={u.email} /></td><td>{u.sessions}</td>
                          <td>{cpu(u.held.cpu)}, {fmtBytes(u.held.mem)}{u.held.fgpu > 0 && `, ${fgpu(u.held.fgpu)}`}</td>
                        </tr>
                      ))}
                    </tbody>
                  </table>
                </div>
              )}
            </section>
          </div>

          <section class="card dash-card" aria-labelledby="dash-fail">
            <h2 id="dash-fail">Recent failures</h2>
            {d.failures.length === 0 ? <p class="hint">No session failed in the last {Math.round(d.window_s / 3600)} hours, and none is LOST.</p> : (
              <div class="table-scroll">
                <table class="dash-failures">
                  <thead><tr><th scope="col">Session</th><th scope="col">Owner</th><th scope="col">Status</th>
                    <th scope="col">When</th><th scope="col">Why</th></tr></thead>
                  <tbody>
                    {d.failures.map((f) => (
                      <tr key={f.id} data-failure={f.id}>
                        <td><a href={sessionHref(f.id)} onClick={(e) => { e.preventDefault(); navigate(sessionHref(f.id)); }}>
                          <Name text={f.name} /></a></td>
                        <td><Email email={f.owner} /></td>
                        <td><span class={`status st-${f.status.toLowerCase()}`}>{f.status}</span></td>
                        <td>{f.at ? new Date(f.at).toLocaleString() : 'now'}</td>
                        <td class="dash-why">{f.status_info || '—'}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            )}
          </section>
        </>
      )}
      <AnnouncementEditor />
    </section>
  );
}
