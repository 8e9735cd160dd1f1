import { useEffect, useId, useState } from 'preact/hooks';
import { api, fmtAge, fmtConfig, type Node, type Quota, type QuotaUse, type Session, type SessionFull, type User } from './api';
import { Button, Email, ErrorText, Name } from './components';
import { LaunchDialog } from './launch';
import { CommitDialog } from './commit';
import { AppChips, AppLauncherDialog, useSessionApps } from './apps';
import { EndSessionDialog, endVerb, navigate, sessionHref } from './session';
import { Meter, ResourcePanel, useResources, type ProjectQuota } from './usage';
import { useProjects } from './projects';
import { ColumnPicker, FinishedSessions, PER_PAGE, readHistory, shownCols, ViewSwitch, writeHistory, type HistoryView } from './history';

const ENDED = new Set(['TERMINATED', 'CANCELLED']);

// Fields of a session this page reads beyond api.ts's Session: its type
// ("batch" ends with its command), how many of its processes the kernel
// killed for passing its memory limit, and whether it was removed.
type SessionRow = Session & { type?: string; oom_kills?: number; removed?: boolean };

// The status line under a status: why it waits, failed or is LOST (its
// node stopped answering), or, while it runs, that a process of it was
// killed for exceeding its memory limit.
function statusInfo(s: SessionRow): string | null {
  if (!s.status_info) return null;
  // PREEMPTED: by what and why; PENDING after it: "requeued after preemption N".
  if (s.status === 'PENDING' || s.status === 'ERROR' || s.status === 'LOST' || s.status === 'PREEMPTED') return s.status_info;
  if ((s.oom_kills ?? 0) > 0 && s.status === 'RUNNING') return s.status_info;
  return null;
}

// Live state: the manager's event stream (relayed by the webserver); when
// it is not available, polling every 2 s.
export function useClusterState() {
  const [sessions, setSessions] = useState<Session[]>([]);
  const [nodes, setNodes] = useState<Node[]>([]);
  const [error, setError] = useState<string | null>(null);

  const refresh = async () => {
    try {
      const [s, n] = await Promise.all([api.sessions(), api.nodes()]);
      setSessions(s.sessions);
      setNodes(n.nodes);
      setError(null);
    } catch (e) {
      setError((e as Error).message);
    }
  };

  useEffect(() => {
    let timer: number | undefined;
    let es: EventSource | null = null;
    const poll = () => {
      if (timer === undefined) timer = window.setInterval(refresh, 2000);
    };
    refresh();
    // The stream sends each round of live usage of the sessions the user
    // sees (docs/api.md, "Live events"): the list is read again every 5 s
    // only while no stream is open (connecting, or none in this browser).
    const usageTimer = window.setInterval(() => {
      if (!document.hidden && (!es || es.readyState !== EventSource.OPEN)) refresh();
    }, 5000);
    if (typeof EventSource !== 'undefined') {
      es = new EventSource('/api/v1/events');
      es.addEventListener('state', (ev) => {
        try {
          const d = JSON.parse((ev as MessageEvent).data);
          if (Array.isArray(d.sessions)) setSessions(d.sessions);
          if (Array.isArray(d.nodes)) setNodes(d.nodes);
          setError(null);
        } catch { /* ignore a malformed event */ }
      });
      es.addEventListener('relay_error', () => { es?.close(); poll(); });
      es.onerror = () => { if (es?.readyState === EventSource.CLOSED) poll(); };
    } else {
      poll();
    }
    return () => { es?.close(); clearInterval(usageTimer); if (timer !== undefined) clearInterval(timer); };
  }, []);

  return { sessions, nodes, error, refresh };
}

// The list's filters and sort, kept in the URL's query (?project=&status=
// &owner=&sort=, and history.tsx's view=finished&page=&per=&cols=) so
// that reload, back and a shared link keep them. The
// project is the switcher's choice: it filters the list, its quota shows
// beside the user's, and the launch dialog starts with it.
type SortKey = 'created' | 'name' | 'status' | 'cpu' | 'mem' | 'gpu' | 'owner';
interface View { project: string; status: string; owner: string; sort: SortKey; desc: boolean; h: HistoryView }
const SORTS: Record<SortKey, string> = { created: 'Age', name: 'Name', status: 'Status', cpu: 'CPU use', mem: 'Memory use', gpu: 'GPU use', owner: 'Owner' };

function readView(): View {
  const q = new URLSearchParams(location.search);
  const raw = q.get('sort') ?? '-created';
  const desc = raw.startsWith('-');
  const key = (desc ? raw.slice(1) : raw) as SortKey;
  return { project: q.get('project') ?? '', status: q.get('status') ?? '', owner: q.get('owner') ?? '', sort: key in SORTS ? key : 'created', desc, h: readHistory(q) };
}
function writeView(v: View) {
  const q = new URLSearchParams();
  if (v.project) q.set('project', v.project);
  if (v.status) q.set('status', v.status);
  if (v.owner) q.set('owner', v.owner);
  if (v.sort !== 'created' || !v.desc) q.set('sort', `${v.desc ? '-' : ''}${v.sort}`);
  writeHistory(v.h, q);
  const qs = q.toString();
  history.replaceState(null, '', `/sessions${qs ? `?${qs}` : ''}`);
}

// PREEMPTED after LOST: it ran, and is on its way back to PENDING.
const STATUS_ORDER = ['RUNNING', 'LOST', 'PREEMPTED', 'PREPARING', 'SCHEDULED', 'PENDING', 'TERMINATING', 'ERROR'];
function sortValue(s: SessionFull, k: SortKey): number | string {
  switch (k) {
    case 'created': return Date.parse(s.created_at) || 0;
    case 'name': return s.name.toLowerCase();
    case 'owner': return s.owner.toLowerCase();
    case 'status': { const i = STATUS_ORDER.indexOf(s.status); return i < 0 ? 99 : i; }
    case 'cpu': return s.usage?.cpu_pct ?? -1;
    case 'mem': return s.usage?.mem_pct ?? -1;
    case 'gpu': return s.usage?.gpu_pct ?? -1;
  }
}

// Where a session runs: its node, or a multi-node cluster session's
// nodes (the session's own first, then its containers').
function nodesOf(s: Session): string {
  if ((s.cluster_size ?? 1) <= 1 || !s.containers?.length) return s.agent ?? '—';
  const nodes = [...new Set([s.agent, ...s.containers.map((c) => c.agent)].filter((a): a is string => !!a))];
  return nodes.length ? nodes.join(', ') : '—';
}

// A row's live use: CPU, memory and (with a GPU) GPU bars. The same size
// before the first sample and for sessions that do not run.
function RowUsage({ s }: { s: SessionFull }) {
  const u = s.status === 'RUNNING' ? s.usage : undefined;
  const idleLeft = s.idle?.deadline ? s.idle.deadline - Date.now() : null;
  return (
    <div class="row-usage">
      <Meter compact label="CPU" pct={u?.cpu_pct} />
      <Meter compact label="Mem" pct={u?.mem_pct} />
      {s.resources.fgpu > 0 && <Meter compact label="GPU" pct={u?.gpu_pct} />}
      {idleLeft !== null && idleLeft > 0 && <span class="idle-chip" title="idle: terminated then unless used">idle · {Math.ceil(idleLeft / 60000)} min left</span>}
    </div>
  );
}

export function SessionsPage({ user }: { user: User }) {
  const { sessions, nodes, error, refresh } = useClusterState();
  const [launching, setLaunching] = useState(false);
  const [ending, setEnding] = useState<Session | null>(null);
  const [converting, setConverting] = useState<Session | null>(null);
  const [launcher, setLauncher] = useState<Session | null>(null);
  const apps = useSessionApps(sessions);
  const [now, setNow] = useState(Date.now());
  const [view, setView] = useState<View>(readView());
  const [loaded, setLoaded] = useState(false);
  const fid = useId();

  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), 1000);
    const onPop = () => setView(readView());
    addEventListener('popstate', onPop);
    return () => { clearInterval(t); removeEventListener('popstate', onPop); };
  }, []);
  useEffect(() => { if (sessions.length || error) setLoaded(true); const t = setTimeout(() => setLoaded(true), 1500); return () => clearTimeout(t); }, [sessions, error]);
  const change = (p: Partial<View>) => {
    const v = { ...view, ...p };
    if (p.project !== undefined || p.owner !== undefined) v.h = { ...v.h, page: 1 };
    setView(v);
    writeView(v);
  };
  const changeH = (h: Partial<HistoryView>) => change({ h: { ...view.h, ...h } });
  const cols = shownCols(view.h);
  const finished = view.h.show === 'finished';

  // The resources are read again whenever a session appears, changes
  // status or ends.
  const resKey = sessions.map((s) => `${s.id}:${s.status}`).join(',');
  const { res, error: resError } = useResources(resKey);
  const { projects, supported: hasProjects } = useProjects(false, resKey);

  // The switcher's projects: those the user is in (an admin: every team
  // project) and their personal one (from GET /v1/resources), and the one
  // the URL names even if neither lists it.
  const known = new Map<string, { name: string; personal: boolean; quota?: Quota; used?: QuotaUse }>();
  for (const p of res?.projects ?? []) known.set(p.name, p);
  for (const p of projects) known.set(p.name, p);
  if (view.project && !known.has(view.project)) known.set(view.project, { name: view.project, personal: false });
  const switchable = [...known.values()].sort((a, b) => Number(a.personal) - Number(b.personal) || a.name.localeCompare(b.name));
  const showSwitch = hasProjects && (switchable.length > 1 || view.project !== '');
  // The chosen project's quota: GET /v1/resources has those the user is
  // in; a project an admin is no member of comes from GET /v1/projects.
  const chosen: ProjectQuota | null = !view.project ? null
    : res?.projects?.find((p) => p.name === view.project) ?? projects.find((p) => p.name === view.project) ?? null;

  const active = (sessions as SessionFull[]).filter((s) => !ENDED.has(s.status) && !s.removed);
  const inProject = active.filter((s) => !view.project || s.project === view.project);
  const owners = [...new Set(inProject.map((s) => s.owner))].sort();
  // A project's manager sees its members' sessions: the owner shows then too.
  const showOwners = user.is_admin || owners.some((o) => o !== user.email);
  const statuses = [...new Set(inProject.map((s) => s.status))].sort((a, b) => STATUS_ORDER.indexOf(a) - STATUS_ORDER.indexOf(b));
  const shown = inProject
    .filter((s) => (!view.status || s.status === view.status) && (!view.owner || s.owner === view.owner))
    .sort((a, b) => {
      const x = sortValue(a, view.sort), y = sortValue(b, view.sort);
      const c = x < y ? -1 : x > y ? 1 : 0;
      return view.desc ? -c : c;
    });
  const th = (k: SortKey, label?: string) => (
    <th scope="col" aria-sort={view.sort === k ? (view.desc ? 'descending' : 'ascending') : undefined}>
      <button type="button" class="th-sort" onClick={() => change({ sort: k, desc: view.sort === k ? !view.desc : k === 'created' || k === 'cpu' || k === 'mem' || k === 'gpu' })}>
        {label ?? SORTS[k]}<span class="sort-mark" aria-hidden="true">{view.sort === k ? (view.desc ? ' ▾' : ' ▴') : ''}</span>
      </button>
    </th>
  );
  const open = (s: Session) => navigate(sessionHref(s.id));
  return (
    <section aria-labelledby="sessions-title">
      <div class="toolbar">
        <h1 id="sessions-title">Sessions</h1>
        {showSwitch && (
          <div class="project-switch">
            <label for={`${fid}-project`}>Project</label>
            <select id={`${fid}-project`} value={view.project} onChange={(e) => change({ project: (e.target as HTMLSelectElement).value })}>
              <option value="">All projects</option>
              {switchable.map((p) => <option key={p.name} value={p.name}>{p.name}{p.personal ? ' (personal)' : ''}</option>)}
            </select>
          </div>
        )}
        <ViewSwitch show={view.h.show} onChange={(show) => changeH({ show, page: 1 })} />
        <Button kind="primary" onClick={() => setLaunching(true)}>Start</Button>
      </div>
      <ResourcePanel res={res} error={resError} project={chosen} sessions={active} user={user} />
      <ErrorText error={error} />
      <div class="filters" role="search" aria-label="Filter sessions">
        {!finished && <div class="filter">
          <label for={`${fid}-status`}>Status</label>
          <select id={`${fid}-status`} value={view.status} onChange={(e) => change({ status: (e.target as HTMLSelectElement).value })}>
            <option value="">All</option>
            {[...new Set([...statuses, ...(view.status ? [view.status] : [])])].map((st) => <option key={st} value={st}>{st}</option>)}
          </select>
        </div>}
        {showOwners && (
          <div class="filter">
            <label for={`${fid}-owner`}>Owner</label>
            <select id={`${fid}-owner`} value={view.owner} onChange={(e) => change({ owner: (e.target as HTMLSelectElement).value })}>
              <option value="">Everyone</option>
              {[...new Set([...owners, ...(view.owner ? [view.owner] : [])])].map((o) => <option key={o} value={o}>{o}</option>)}
            </select>
          </div>
        )}
        {!finished && <div class="filter">
          <label for={`${fid}-sort`}>Sort by</label>
          <select id={`${fid}-sort`} value={`${view.desc ? '-' : ''}${view.sort}`} onChange={(e) => {
            const raw = (e.target as HTMLSelectElement).value;
            change({ sort: raw.replace(/^-/, '') as SortKey, desc: raw.startsWith('-') });
          }}>
            {(Object.keys(SORTS) as SortKey[]).filter((k) => k !== 'owner' || showOwners).flatMap((k) => [
              <option key={`-${k}`} value={`-${k}`}>{SORTS[k]}{k === 'created' ? ' (newest first)' : k === 'name' || k === 'owner' ? ' (Z–A)' : ' (highest first)'}</option>,
              <option key={k} value={k}>{SORTS[k]}{k === 'created' ? ' (oldest first)' : k === 'name' || k === 'owner' ? ' (A–Z)' : ' (lowest first)'}</option>,
            ])}
          </select>
        </div>}
        {finished && <div class="filter">
          <label for={`${fid}-per`}>Per page</label>
          <select id={`${fid}-per`} value={view.h.per} onChange={(e) => changeH({ per: Number((e.target as HTMLSelectElement).value), page: 1 })}>
            {PER_PAGE.map((n) => <option key={n} value={n}>{n}</option>)}
          </select>
        </div>}
        {!finished && <span class="hint filter-count" role="status">{shown.length} of {inProject.length} shown{view.project ? ` in ${view.project}` : ''}</span>}
      </div>
      <ColumnPicker v={view.h} onChange={(c) => changeH({ cols: c })} />
      {finished ? (
        <FinishedSessions user={user} v={view.h} project={view.project} owner={view.owner} showOwners={showOwners}
          onPage={(page) => changeH({ page })} />
      ) : !loaded ? (
        <div class="skeleton table-skeleton" aria-label="Loading the sessions" />
      ) : shown.length === 0 ? (
        <p class="empty">{inProject.length === 0 ? (view.project ? `No sessions in project ${view.project}. Press Start to launch one.` : 'No sessions. Press Start to launch one.') : 'No session matches these filters.'}</p>
      ) : (
        <div class="table-scroll">
        <table class="sessions stack">
          <caption class="sr-only">Your sessions{user.is_admin ? ' (administrators see everyone’s)' : ''}</caption>
          <thead>
            <tr>
              {th('name')}{cols.has('image') && <th scope="col">Image</th>}{cols.has('status') && th('status')}
              {cols.has('config') && <th scope="col">Configuration</th>}{cols.has('usage') && th('cpu', 'Usage')}
              {cols.has('node') && <th scope="col">Node</th>}{cols.has('age') && th('created')}
              <th scope="col"><span class="sr-only">Actions</span></th>
            </tr>
          </thead>
          <tbody>
            {shown.map((s) => (
              <tr key={s.id} data-session={s.name} class="clickable"
                onClick={(e) => { if (!(e.target as HTMLElement).closest('button, a, input, select')) open(s); }}>
                <td data-label="Name">
                  <a class="session-link" href={sessionHref(s.id)} onClick={(e) => { e.preventDefault(); open(s); }}>{s.name}</a>
                  {(s.cluster_size ?? 1) > 1 && (
                    <span class="info badge cluster-badge" data-testid="cluster-badge"
                      title={`a cluster session of ${s.cluster_size} containers (${s.cluster_mode ?? 'single-node'})`}
                      aria-label={`${s.cluster_size} containers`}>×{s.cluster_size}</span>
                  )}
                  {s.type === 'batch' && <span class="info badge" title="ends when its command ends"> batch</span>}
                  {(showOwners || (!view.project && switchable.length > 1 && s.project)) && (
                    <div class="owner-line">
                      {!view.project && switchable.length > 1 && s.project && (
                        // A personal project is named after its owner, shown beside it.
                        <span class="project-chip" title={`project ${s.project}`}>{s.project === s.owner ? 'personal' : s.project}</span>
                      )}
                      {showOwners && <Email email={s.owner} />}
                    </div>
                  )}
                  {s.status === 'RUNNING' && <AppChips apps={apps.get(s.id)} />}
                </td>
                {cols.has('image') && <td data-label="Image"><Name text={s.image} /></td>}
                {cols.has('status') && <td data-label="Status">
                  <span class={`status st-${s.status.toLowerCase()}`}>{s.status}</span>
                  {statusInfo(s) && (
                    <div class={(s.oom_kills ?? 0) > 0 && s.status === 'RUNNING' ? 'info oom' : 'info'}>
                      {statusInfo(s)}
                    </div>
                  )}
                  {s.status === 'PENDING' && (s.preemptions ?? 0) > 0 && !s.status_info.includes('after preemption') && (
                    // The scheduler's next pass replaces "requeued after
                    // preemption N" by what it waits for: the row keeps why
                    // it is back in the queue.
                    <div class="info preempt-note">requeued after preemption {s.preemptions}</div>
                  )}
                </td>}
                {cols.has('config') && <td data-label="Configuration">{fmtConfig(s.resources)}</td>}
                {cols.has('usage') && <td data-label="Usage"><RowUsage s={s} /></td>}
                {cols.has('node') && <td data-label="Node"><Name text={nodesOf(s)} host /></td>}
                {cols.has('age') && <td data-label="Age">{fmtAge(s.created_at, now)}</td>}
                <td data-label="Actions"><div class="row-actions">
                  {s.status === 'RUNNING' && (user.is_admin || s.owner === user.email) && (
                    <Button kind="primary" onClick={() => setLauncher(s)} label={`Apps of ${s.name}`}>Apps</Button>
                  )}
                  {s.status === 'RUNNING' && (user.is_admin || s.owner === user.email) && (s.cluster_size ?? 1) <= 1 && (
                    // A cluster session cannot be committed (docs/api.md): not offered.
                    // "Convert" on the row (its name says the rest): three
                    // buttons fit one line of a laptop's table.
                    <Button onClick={() => setConverting(s)} label={`Convert ${s.name} to image`} title="Convert to image">
                      Convert
                    </Button>
                  )}
                  <Button kind="danger" onClick={() => setEnding(s)}
                    disabled={s.status === 'TERMINATING'}>{endVerb(s)}</Button>
                </div></td>
              </tr>
            ))}
          </tbody>
        </table>
        </div>
      )}
      <EndSessionDialog session={ending} onClose={() => setEnding(null)} onDone={() => { setEnding(null); refresh(); }} />
      <AppLauncherDialog session={launcher} onClose={() => setLauncher(null)} />
      <CommitDialog session={converting} onClose={() => setConverting(null)} />
      <LaunchDialog open={launching} nodes={nodes} resources={res} user={user} onClose={() => setLaunching(false)}
        projects={hasProjects ? switchable : undefined} project={view.project || undefined}
        onLaunched={() => { setLaunching(false); refresh(); }} />
    </section>
  );
}
