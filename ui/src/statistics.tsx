// The Statistics page (/statistics, issue 35 item 1): usage over time from
// GET /v1/usage/summary (docs/api.md, "Usage summary"): CPU-, memory-GiB-
// and fGPU-hours and sessions started per UTC day, per user or project.
// Users see their own; admins everyone's, with a user and a project
// filter. The CSV download is the same query with format=csv. The choice
// lives in the URL (?from=&to=&by=&user=&project=).
import { useEffect, useId, useState } from 'preact/hooks';
import { api, api3, api4, fmtNum, type UsageBy, type UsageQuery, type UsageRow, type UsageSummary, type User } from './api';
import { Button, ErrorText } from './components';

function readQuery(): UsageQuery {
  const q = new URLSearchParams(location.search);
  const by = q.get('by');
  return {
    from: q.get('from') ?? undefined, to: q.get('to') ?? undefined, by: by === 'project' ? 'project' : 'user',
    user: q.get('user') ?? undefined, project: q.get('project') ?? undefined,
  };
}
function writeQuery(u: UsageQuery) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(u)) if (v && !(k === 'by' && v === 'user')) q.set(k, v);
  const s = q.toString();
  history.replaceState(null, '', `/statistics${s ? `?${s}` : ''}`);
}

// Two decimals; a small figure (a session of minutes) keeps two digits.
const h2 = (v: number) => (v > 0 && v < 0.01 ? v.toPrecision(2) : fmtNum(Math.round(v * 100) / 100));

// Each day's CPU-hours as a bar (all keys together): the shape of the
// window at a glance; the table below has every figure.
function DayBars({ s }: { s: UsageSummary }) {
  const days = new Map<string, number>();
  for (const r of s.rows) days.set(r.day!, (days.get(r.day!) ?? 0) + r.cpu_hours);
  const max = Math.max(0, ...days.values());
  if (!days.size) return null;
  return (
    <figure class="day-bars" aria-label="CPU-hours per day">
      <figcaption>CPU-hours per day</figcaption>
      <ul class="plain">
        {[...days.entries()].map(([d, v]) => (
          <li key={d}><span class="mono">{d}</span>
            <span class="day-bar" style={{ width: `${max > 0 ? Math.max(1, (v / max) * 100) : 0}%` }} aria-hidden="true" />
            <span>{h2(v)}</span></li>
        ))}
      </ul>
    </figure>
  );
}

export function StatisticsPage({ user }: { user: User }) {
  const [q, setQ] = useState<UsageQuery>(readQuery());
  const [data, setData] = useState<UsageSummary | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [users, setUsers] = useState<string[]>([]);
  const [projects, setProjects] = useState<string[]>([]);
  const [busy, setBusy] = useState(false);
  const fid = useId();

  useEffect(() => {
    if (!user.is_admin) return;
    api.users().then((r) => setUsers(r.users.map((u) => u.email).sort())).catch(() => setUsers([]));
    api3.projects(true).then((r) => setProjects(r.projects.map((p) => p.name).sort())).catch(() => setProjects([]));
  }, [user.is_admin]);
  useEffect(() => {
    let stop = false;
    setError(null);
    api4.usage(q).then((r) => { if (!stop) setData(r); }).catch((e) => { if (!stop) { setError((e as Error).message); setData(null); } });
    return () => { stop = true; };
  }, [q.from, q.to, q.by, q.user, q.project]);

  const change = (p: Partial<UsageQuery>) => { const n = { ...q, ...p }; setQ(n); writeQuery(n); };
  const download = async () => {
    setBusy(true);
    try {
      const text = await api4.usageCsv(q);
      const a = document.createElement('a');
      a.href = URL.createObjectURL(new Blob([text], { type: 'text/csv' }));
      a.download = `tessera-usage-${data?.from ?? 'from'}-${data?.to ?? 'to'}-by-${q.by ?? 'user'}.csv`;
      document.body.appendChild(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(a.href), 1000);
    } catch (e) {
      setError(`Cannot download the CSV: ${(e as Error).message}`);
    } finally {
      setBusy(false);
    }
  };
  const by: UsageBy = q.by ?? 'user';
  const keyOf = (r: UsageRow) => (by === 'user' ? r.user : r.project) ?? '';
  const select = (id: string, label: string, value: string | undefined, all: string, options: string[], key: keyof UsageQuery) => (
    <div class="filter">
      <label for={`${fid}-${id}`}>{label}</label>
      <select id={`${fid}-${id}`} value={value ?? ''} onChange={(e) => change({ [key]: (e.target as HTMLSelectElement).value || undefined } as Partial<UsageQuery>)}>
        <option value="">{all}</option>
        {[...new Set([...options, ...(value ? [value] : [])])].map((o) => <option key={o} value={o}>{o}</option>)}
      </select>
    </div>
  );
  return (
    <section aria-labelledby="stats-title">
      <div class="toolbar">
        <h1 id="stats-title">Statistics</h1>
        <Button onClick={download} disabled={busy || !data}>Download CSV</Button>
      </div>
      <p class="hint">{user.is_admin ? 'Everyone’s sessions' : 'Your sessions'}: what they held per day (UTC). Hours are
        allocated, not measured: a session holds what it asked for from its first start until it ends, busy or idle.</p>
      <div class="filters" role="search" aria-label="Choose the window">
        <div class="filter">
          <label for={`${fid}-from`}>From</label>
          <input id={`${fid}-from`} type="date" value={q.from ?? data?.from ?? ''} onChange={(e) => change({ from: (e.target as HTMLInputElement).value || undefined })} />
        </div>
        <div class="filter">
          <label for={`${fid}-to`}>To</label>
          <input id={`${fid}-to`} type="date" value={q.to ?? data?.to ?? ''} onChange={(e) => change({ to: (e.target as HTMLInputElement).value || undefined })} />
        </div>
        <div class="filter">
          <label for={`${fid}-by`}>Per</label>
          <select id={`${fid}-by`} value={by} onChange={(e) => change({ by: (e.target as HTMLSelectElement).value as UsageBy })}>
            <option value="user">user</option>
            <option value="project">project</option>
          </select>
        </div>
        {user.is_admin && select('user', 'User', q.user, 'Everyone', users, 'user')}
        {user.is_admin && select('project', 'Project', q.project, 'All projects', projects, 'project')}
      </div>
      <ErrorText error={error} />
      {data && (
        <>
          <div class="stat-tiles" data-testid="usage-total">
            <div class="stat-tile"><span class="hint">CPU-hours</span><strong>{h2(data.total.cpu_hours)}</strong></div>
            <div class="stat-tile"><span class="hint">Memory GiB-hours</span><strong>{h2(data.total.mem_gib_hours)}</strong></div>
            <div class="stat-tile"><span class="hint">fGPU-hours</span><strong>{h2(data.total.fgpu_hours)}</strong></div>
            <div class="stat-tile"><span class="hint">Sessions started</span><strong>{data.total.sessions_started}</strong></div>
          </div>
          <DayBars s={data} />
          {data.rows.length === 0 ? <p class="empty">No session held resources from {data.from} to {data.to}.</p> : (
            <div class="table-scroll">
              <table class="usage-table stack">
                <caption class="sr-only">Usage per day and {by}, {data.from} to {data.to}</caption>
                <thead>
                  <tr><th scope="col">Day</th><th scope="col">{by === 'user' ? 'User' : 'Project'}</th><th scope="col">CPU-hours</th>
                    <th scope="col">Memory GiB-hours</th><th scope="col">fGPU-hours</th><th scope="col">Sessions started</th></tr>
                </thead>
                <tbody>
                  {data.rows.map((r) => (
                    <tr key={`${r.day}|${keyOf(r)}`} data-key={keyOf(r)}>
                      <td data-label="Day" class="mono">{r.day}</td><td data-label={by === 'user' ? 'User' : 'Project'}>{keyOf(r)}</td>
                      <td data-label="CPU-hours">{h2(r.cpu_hours)}</td><td data-label="Memory GiB-hours">{h2(r.mem_gib_hours)}</td>
                      <td data-label="fGPU-hours">{h2(r.fgpu_hours)}</td><td data-label="Sessions started">{r.sessions_started}</td>
                    </tr>
                  ))}
                  {data.totals.map((r) => (
                    <tr key={`total|${keyOf(r)}`} class="total-row">
                      <th scope="row" data-label="Day">Total</th><td data-label={by === 'user' ? 'User' : 'Project'}>{keyOf(r)}</td>
                      <td data-label="CPU-hours">{h2(r.cpu_hours)}</td><td data-label="Memory GiB-hours">{h2(r.mem_gib_hours)}</td>
                      <td data-label="fGPU-hours">{h2(r.fgpu_hours)}</td><td data-label="Sessions started">{r.sessions_started}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
        </>
      )}
    </section>
  );
}
