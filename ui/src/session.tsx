// A session's own page (/sessions/ID): its status history, configuration,
// node and GPU shares, live usage charts (GET /v1/sessions/{ref}/stats),
// its log, its apps and its actions. Reload and back work: the URL names
// the session.
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import type uPlot from 'uplot';
import {
  api, api2, fmtBytes, fmtConfig, fmtNum, ApiError, MAIN_CONTAINER, type Session, type SessionContainer, type SessionFull,
  type SessionStats, type UsageSample, type User,
} from './api';
import { Button, Dialog, Email, ErrorText, Name } from './components';
import { AppChips, AppLauncherDialog, clusterContainers, ContainerPicker } from './apps';
import { CommitDialog } from './commit';
import { LogViewer } from './logs';
import { LiveChart, Meter } from './usage';
import { useClusterState } from './sessions';
import { useProjects } from './projects';

export const ENDED_STATUSES = new Set(['TERMINATED', 'CANCELLED', 'ERROR']);
const WAITING = new Set(['PENDING']);
const HOUR_S = 3600;

// A link to a session's page that the app's router takes (no reload).
export function sessionHref(id: string): string {
  return `/sessions/${encodeURIComponent(id)}`;
}
export function navigate(href: string) {
  history.pushState(null, '', href);
  dispatchEvent(new PopStateEvent('popstate'));
}

// What ends a session, in the words of its status: a PENDING one is
// cancelled (it never ran), any other is terminated.
export function endVerb(s: Session): 'Cancel' | 'Terminate' {
  return WAITING.has(s.status) ? 'Cancel' : 'Terminate';
}

// The confirmation before ending a session; says what happens.
export function EndSessionDialog(props: { session: Session | null; onClose: () => void; onDone: () => void }) {
  const s = props.session;
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  useLayoutEffect(() => { setError(null); setBusy(false); }, [s?.id]);
  const verb = s ? endVerb(s) : 'Terminate';
  const go = async () => {
    if (!s) return;
    setBusy(true);
    setError(null);
    try {
      await api.terminate(s.id);
      props.onDone();
    } catch (e) {
      setError(`Cannot ${verb.toLowerCase()} ${s.name}: ${(e as Error).message}`);
    } finally {
      setBusy(false);
    }
  };
  return (
    <Dialog open={s !== null} title={verb === 'Cancel' ? 'Cancel session' : 'Terminate session'} onClose={props.onClose}>
      {s && (
        <>
          {verb === 'Cancel'
            ? <p>Cancel session <strong>{s.name}</strong>? It has not started yet: it leaves the queue, nothing of it runs, and the resources it asked for are never taken.</p>
            : s.status === 'PREEMPTED'
            ? <p>Terminate session <strong>{s.name}</strong>? It was preempted and its container is being removed; terminated, it ends there rather than waiting in the queue to start again.</p>
            : <p>Terminate session <strong>{s.name}</strong>? Its container is removed; this cannot be undone.</p>}
          <ErrorText error={error} />
          <div class="actions">
            {verb === 'Cancel'
              ? <><Button onClick={props.onClose}>Keep waiting</Button>
                <Button kind="danger" onClick={go} disabled={busy}>Cancel session</Button></>
              : <><Button onClick={props.onClose}>Cancel</Button>
                <Button kind="danger" onClick={go} disabled={busy}>Terminate</Button></>}
          </div>
        </>
      )}
    </Dialog>
  );
}

function fmtTime(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

function fmtLeft(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

// The chart series' data, appended to in place (x in seconds).
interface Series { x: number[]; cpu: number[]; mem: number[]; memLimit: number[]; gpu: number[][]; gpuMem: number[][] }
function emptySeries(nGpu: number): Series {
  return { x: [], cpu: [], mem: [], memLimit: [], gpu: Array.from({ length: nGpu }, () => []), gpuMem: Array.from({ length: nGpu }, () => []) };
}

function appendSamples(s: Series, samples: UsageSample[], nGpu: number) {
  for (const p of samples) {
    const t = p.t / 1000;
    if (s.x.length && t <= s.x[s.x.length - 1]) continue;   // already shown
    s.x.push(t);
    s.cpu.push(p.cpu_pct);
    s.mem.push(p.mem_bytes / 2 ** 20);
    s.memLimit.push(p.mem_limit_bytes / 2 ** 20);
    for (let g = 0; g < nGpu; g++) {
      const d = p.gpus?.[g];
      s.gpu[g].push(d ? d.util_pct : (null as unknown as number));
      s.gpuMem[g].push(d && d.mem_limit_bytes > 0 ? (d.mem_bytes / d.mem_limit_bytes) * 100 : (null as unknown as number));
    }
  }
  // The last hour only.
  const from = (s.x[s.x.length - 1] ?? 0) - HOUR_S;
  let drop = 0;
  while (drop < s.x.length && s.x[drop] < from) drop++;
  if (drop) {
    for (const a of [s.x, s.cpu, s.mem, s.memLimit, ...s.gpu, ...s.gpuMem]) a.splice(0, drop);
  }
}

type StatsState = 'loading' | 'ok' | 'unavailable' | 'error';

// Polls the session's stats every period (5 s by default), asking only for
// samples newer than the last one seen; an ended session's once (what the
// manager still keeps of it: retention_s).
function useStats(id: string, nGpu: number, live = true) {
  const series = useRef<Series>(emptySeries(nGpu));
  const [version, setVersion] = useState(0);
  const [state, setState] = useState<StatsState>('loading');
  const [current, setCurrent] = useState<UsageSample | null>(null);
  const [message, setMessage] = useState<string | null>(null);
  const [retention, setRetention] = useState(0);
  useEffect(() => {
    series.current = emptySeries(nGpu);
    setVersion((v) => v + 1);
    let stop = false;
    let timer: number | undefined;
    let last = 0;
    let period = 5000;
    const tick = async () => {
      try {
        const r: SessionStats = await api2.stats(id, last || undefined);
        if (stop) return;
        period = Math.max(1000, r.period_ms || 5000);
        const hist = r.history ?? [];
        const samples = r.current && !hist.some((h) => h.t === r.current!.t) ? [...hist, r.current] : hist;
        appendSamples(series.current, samples.sort((a, b) => a.t - b.t), nGpu);
        if (series.current.x.length) last = Math.round(series.current.x[series.current.x.length - 1] * 1000);
        setCurrent(r.current);
        setRetention(r.retention_s ?? 0);
        setState('ok');
        setMessage(null);
        setVersion((v) => v + 1);
      } catch (e) {
        if (stop) return;
        if (e instanceof ApiError && e.status === 404) {
          // The manager has no stats route, or keeps none for this session.
          setState('unavailable');
          setMessage('This server does not collect live usage for this session.');
        } else {
          setState('error');
          setMessage(`Cannot read the live usage: ${(e as Error).message}`);
        }
      }
      if (!stop && live) timer = window.setTimeout(tick, period);
    };
    tick();
    return () => { stop = true; if (timer !== undefined) clearTimeout(timer); };
  }, [id, nGpu, live]);
  return { series: series.current, version, state, current, message, retention };
}

// A session's GPU as the session sees it: its devices are numbered from 0
// in the order given (CUDA_VISIBLE_DEVICES), as gpu-info and nvidia-smi
// inside it number them; the node's own number follows when it differs.
function gpuName(g: { index: number }, i: number): string {
  return g.index === i ? `GPU ${i}` : `GPU ${i} (the node's GPU ${g.index})`;
}

const pct = (v: number) => `${Math.round(v)}%`;
const mib = (v: number) => (v >= 1024 ? `${fmtNum(Math.round((v / 1024) * 10) / 10)} GiB` : v >= 10 ? `${Math.round(v)} MiB` : `${fmtNum(Math.round(v * 10) / 10)} MiB`);

function UsageCharts({ s }: { s: SessionFull }) {
  const nGpu = s.gpus?.length ?? 0;
  const ended = ENDED_STATUSES.has(s.status);
  const { series, version, state, current, message, retention } = useStats(s.id, nGpu, !ended);
  // An ended session's samples stay until the newest is older than the
  // manager's retention (docs/api.md, "Usage statistics").
  // One that ended within the retention and has none never had one: it
  // ended before its node's first round of samples.
  const endedAt = s.terminated_at ? Date.parse(s.terminated_at) : NaN;
  const neverSampled = ended && Number.isFinite(endedAt) && Date.now() - endedAt < retention * 1000;
  const empty = state === 'unavailable' || state === 'error' ? (message ?? '') : s.status === 'RUNNING'
    ? 'Waiting for the first sample…' : neverSampled
    ? 'No usage sample was taken while it ran: it ended before its node\'s first round of samples.' : ended
    ? `No usage samples are kept for this session any more: the manager keeps each session's samples for ${fmtLeft(retention * 1000)} after its last one.`
    : 'No samples: the session is not running.';
  const cpuData = [series.x, series.cpu] as uPlot.AlignedData;
  const memData = [series.x, series.mem, series.memLimit] as uPlot.AlignedData;
  const gpuData = [series.x, ...series.gpu, ...series.gpuMem] as uPlot.AlignedData;
  // Numbered as in the session (gpuName): GPU 0 is its first.
  const gpuSeries = [
    ...(s.gpus ?? []).map((_g, i) => ({ label: `GPU ${i} SM`, colorVar: '--chart-gpu' })),
    ...(s.gpus ?? []).map((_g, i) => ({ label: `GPU ${i} memory`, colorVar: '--chart-gpu-mem', dash: true })),
  ];
  return (
    <>
      {!ended && <div class="now-meters" aria-label="Now">
        <Meter label="CPU" pct={current?.cpu_pct ?? s.usage?.cpu_pct} title="percent of the CPU the session was given" />
        <Meter label="Memory" pct={current ? (current.mem_limit_bytes ? (current.mem_bytes / current.mem_limit_bytes) * 100 : null) : s.usage?.mem_pct} />
        {nGpu > 0 && <Meter label="GPU" pct={current?.gpus?.length ? Math.max(...current.gpus.map((g) => g.util_pct)) : s.usage?.gpu_pct} />}
        {current && <span class="hint now-detail">{fmtNum(Math.round(current.cpu_cores * 100) / 100)} cores · {fmtBytes(current.mem_bytes)} of {fmtBytes(current.mem_limit_bytes)}</span>}
      </div>}
      <div class={`charts${nGpu ? ' three' : ''}`} data-stats={state}>
        <LiveChart title="CPU (% of its allocation)" series={[{ label: 'CPU', colorVar: '--chart-cpu' }]} data={cpuData}
          version={version} fmt={pct} yMin={100} empty={empty} />
        <LiveChart title="Memory" series={[{ label: 'used', colorVar: '--chart-mem' }, { label: 'limit', colorVar: '--muted', dash: true }]}
          data={memData} version={version} fmt={mib} empty={empty} />
        {nGpu > 0 && <LiveChart title="GPU (% of the device)" series={gpuSeries} data={gpuData} version={version}
          fmt={pct} yRange={[0, 100]} empty={empty} />}
      </div>
    </>
  );
}

// A cluster session's containers: each one's node, status (and why),
// GPU shares and live use, from the event stream's list entry when there
// is one (it brings each round of usage), else from the page's read.
function ContainersTable({ containers }: { containers: SessionContainer[] }) {
  return (
    <div class="table-scroll">
      <table class="containers stack" data-testid="containers">
        <caption class="sr-only">The session's containers</caption>
        <thead>
          <tr><th scope="col">Container</th><th scope="col">Node</th><th scope="col">Status</th>
            <th scope="col">GPUs</th><th scope="col">Usage</th></tr>
        </thead>
        <tbody>
          {containers.map((c) => {
            const u = c.status === 'RUNNING' ? c.usage : undefined;
            return (
              <tr key={c.name} data-container={c.name}>
                <td data-label="Container"><span class="mono">{c.name}</span></td>
                <td data-label="Node">{c.agent ?? '—'}</td>
                <td data-label="Status">
                  <span class={`status st-${c.status.toLowerCase()}`}>{c.status}</span>
                  {c.status_info && <div class={`info${c.status === 'ERROR' ? ' error' : ''}`}>{c.status_info}</div>}
                </td>
                <td data-label="GPUs">{(c.gpus ?? []).length === 0 ? 'none'
                  : c.gpus!.map((g, i) => `${gpuName(g, i)}: ${fmtNum(g.fgpu)} fGPU`).join(', ')}</td>
                <td data-label="Usage"><div class="row-usage">
                  <Meter compact label="CPU" pct={u?.cpu_pct} />
                  <Meter compact label="Mem" pct={u?.mem_pct} />
                  {(c.gpus ?? []).length > 0 && <Meter compact label="GPU" pct={u?.gpu_pct} />}
                </div></td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

// Milliseconds as seconds with two decimals: "0.54 s".
function fmtSecs(ms: number): string {
  return `${(ms / 1000).toFixed(2)} s`;
}

export function SessionPage({ id, user }: { id: string; user: User }) {
  const { sessions } = useClusterState();
  const [s, setS] = useState<SessionFull | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [ending, setEnding] = useState<Session | null>(null);
  const [converting, setConverting] = useState<Session | null>(null);
  const [launcher, setLauncher] = useState<Session | null>(null);
  const [apps, setApps] = useState<{ name: string; protocol?: string }[] | undefined>(undefined);
  const [now, setNow] = useState(Date.now());
  // The container whose log is shown (a cluster session's; main1 first).
  const [logContainer, setLogContainer] = useState(MAIN_CONTAINER);
  const { projects } = useProjects();

  // The list entry from the event stream: when it changes, the page
  // reads the session again (for its history).
  const listed = sessions.find((x) => x.id === id) as SessionFull | undefined;
  // A container's change of node or status reads it again too.
  const stamp = listed ? `${listed.status}|${listed.status_info}|${listed.agent}|${listed.usage?.t ?? ''}|${
    (listed.containers ?? []).map((c) => `${c.name}:${c.status}:${c.agent ?? ''}`).join(',')}` : '';
  const load = () => api2.session(id).then((r) => { setS(r); setError(null); })
    .catch((e) => setError((e as Error).message));
  useEffect(() => { load(); }, [id, stamp]);
  useEffect(() => { setLogContainer(MAIN_CONTAINER); }, [id]);
  useEffect(() => {
    const t = window.setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, []);
  useEffect(() => {
    if (s?.status !== 'RUNNING') { setApps(undefined); return; }
    api.apps(s.id).then(setApps).catch(() => setApps([]));
  }, [s?.id, s?.status]);

  if (!s) {
    return (
      <section class="detail" aria-busy={!error}>
        <p class="crumbs"><a href="/sessions" onClick={(e) => { e.preventDefault(); navigate('/sessions'); }}>Sessions</a></p>
        {error ? <ErrorText error={`Cannot show session ${id}: ${error}`} /> : <div class="skeleton detail-skeleton" aria-label="Loading the session" />}
      </section>
    );
  }
  const mine = user.is_admin || s.owner === user.email;
  // A project's manager may end its members' sessions too.
  const manages = projects.some((p) => p.name === s.project && p.my_role === 'manager');
  const ended = ENDED_STATUSES.has(s.status) || s.status === 'TERMINATING';
  const hasContainer = !!(s as { container_id?: string | null }).container_id || ['RUNNING', 'LOST', 'PREEMPTED', 'TERMINATING', 'TERMINATED', 'ERROR'].includes(s.status);
  const envNames = Object.keys(s.env ?? {});
  // The stream's entry is the fresher (its usage); the page's read has
  // them before the stream's first event.
  const containers = clusterContainers(listed?.containers?.length ? listed : s);
  const logOf = containers.find((c) => c.name === logContainer);
  const logHasContainer = logOf ? !!logOf.container_id || ['RUNNING', 'LOST', 'TERMINATING', 'TERMINATED', 'ERROR'].includes(logOf.status) : hasContainer;
  const history = s.status_history ?? [];
  // A finished session's way back is to the Finished list it is in.
  const listHref = ENDED_STATUSES.has(s.status) ? '/sessions?view=finished' : '/sessions';
  // Its container is removed when it ended on request (an interactive
  // TERMINATED one); the last of its log is kept then, and the logs route
  // answers that. ERROR and ended batch sessions keep their container,
  // and its whole log, until removed (docs/api.md, DELETE). A CANCELLED
  // one never ran.
  const logKept = ENDED_STATUSES.has(s.status) && !(s as { container_id?: string | null }).container_id;
  const logGone = s.status === 'CANCELLED' && logKept;
  return (
    <section class="detail" aria-labelledby="detail-title">
      <p class="crumbs"><a href={listHref} onClick={(e) => { e.preventDefault(); navigate(listHref); }}>{ENDED_STATUSES.has(s.status) ? 'Finished sessions' : 'Sessions'}</a> <span aria-hidden="true">/</span> {s.name}</p>
      <div class="detail-head">
        <h1 id="detail-title">{s.name}</h1>
        <span class={`status st-${s.status.toLowerCase()}`} data-testid="detail-status">{s.status}</span>
        <div class="detail-actions">
          {s.status === 'RUNNING' && mine && <Button kind="primary" onClick={() => setLauncher(s)}>Apps</Button>}
          {/* A cluster session cannot be committed (docs/api.md): not offered. */}
          {s.status === 'RUNNING' && mine && (s.cluster_size ?? 1) <= 1 && <Button onClick={() => setConverting(s)}>Convert to image</Button>}
          {!ended && (mine || manages) && <Button kind="danger" onClick={() => setEnding(s)}>{endVerb(s)}</Button>}
        </div>
      </div>
      {s.status_info && <p class={`status-info${s.status === 'ERROR' ? ' error' : ''}`}>{s.status_info}</p>}
      {s.idle && s.status === 'RUNNING' && (
        <p class={`idle-note${s.idle.deadline ? ' warn' : ''}`} role="status">
          {s.idle.deadline
            ? `Idle: it will be terminated in ${fmtLeft(s.idle.deadline - now)} unless it is used.`
            : `Terminated after ${fmtLeft(s.idle.timeout_s * 1000)} of inactivity (your policy's idle timeout).`}
        </p>
      )}
      <ErrorText error={error} />

      {containers.length > 0 && (
        <section class="card" aria-labelledby="containers-title">
          <h2 id="containers-title">Containers</h2>
          <ContainersTable containers={containers} />
        </section>
      )}

      <section class="card" aria-labelledby="usage-title">
        <h2 id="usage-title">{ENDED_STATUSES.has(s.status) ? 'Usage' : 'Live usage'} <span class="hint">({ENDED_STATUSES.has(s.status) ? 'its last hour, while kept' : 'last hour'}{containers.length ? `, ${MAIN_CONTAINER}: the Containers table has each one's now` : ''})</span></h2>
        <UsageCharts s={s} />
      </section>

      <div class="detail-grid">
        <section class="card" aria-labelledby="config-title">
          <h2 id="config-title">Configuration</h2>
          <dl class="props">
            <dt>Image</dt><dd class="mono"><Name text={s.image} /></dd>
            <dt>Resources</dt><dd>{fmtConfig(s.resources)}</dd>
            {(s.cluster_size ?? 1) > 1 && <><dt>Cluster</dt><dd data-testid="detail-cluster">{s.cluster_size} containers, {s.cluster_mode ?? 'single-node'}; the resources are each one's</dd></>}
            <dt>Type</dt><dd>{s.type ?? 'interactive'}{s.root ? ' · runs as root' : ''}</dd>
            <dt>Owner</dt><dd><Email email={s.owner} /></dd>
            {s.project !== undefined && <><dt>Project</dt><dd data-testid="detail-project">{s.project}</dd></>}
            {s.group !== undefined && <><dt>Resource group</dt><dd>{s.group}</dd></>}
            {s.priority !== undefined && <><dt>Priority</dt><dd data-testid="detail-priority">{s.priority}</dd></>}
            {s.preemptible !== undefined && <><dt>Preemptible</dt><dd data-testid="detail-preemptible">{s.preemptible
              ? 'yes: a higher-priority session may stop it to take its room' : 'no'}</dd></>}
            {(s.preemptions ?? 0) > 0 && <><dt>Preemptions</dt><dd data-testid="detail-preemptions" class="preempt-count">
              preempted {s.preemptions} time{s.preemptions === 1 ? '' : 's'}</dd></>}
            <dt>Node</dt><dd>{containers.length
              ? ([...new Set(containers.map((c) => c.agent).filter(Boolean))].join(', ') || '— (not placed)')
              : s.agent ?? '— (not placed)'}</dd>
            <dt>GPUs</dt><dd>{(s.gpus ?? []).length === 0 ? 'none' : (
              <ul class="plain">{s.gpus!.map((g, i) => <li key={g.uuid} data-gpu={i}>{gpuName(g, i)}: {fmtNum(g.fgpu)} fGPU <span class="hint mono">{g.uuid}</span></li>)}</ul>
            )}</dd>
            <dt>Folders</dt><dd>{(s.mounts ?? []).length === 0 ? 'none' : (
              <ul class="plain">{s.mounts!.map((m) => <li key={m.path}>{m.folder} at <span class="mono">{m.path}</span>{m.ro ? ' (read-only)' : ''}{m.automount ? ' · automount' : ''}</li>)}</ul>
            )}</dd>
            <dt>Environment</dt><dd>{envNames.length === 0 ? 'none' : <span class="mono wrap">{envNames.join(', ')}</span>}</dd>
            {s.startup_command && <><dt>Startup command</dt><dd class="mono wrap">{s.startup_command}</dd></>}
            <dt>Created</dt><dd>{fmtTime(s.created_at)}</dd>
            <dt>Started</dt><dd>{fmtTime(s.started_at)}</dd>
            {s.start_breakdown && <><dt>Start took</dt><dd data-testid="start-breakdown"
              title="queue: waiting for a node; dispatch: placed, until the node is asked; image: pulled from the registry; container: the node creating and starting it">
              {fmtSecs(s.start_breakdown.total_ms)}: {s.start_breakdown.phases.map((p) => `${p.phase} ${fmtSecs(p.ms)}`).join(' · ')}
            </dd></>}
            {s.terminated_at && <><dt>Ended</dt><dd>{fmtTime(s.terminated_at)}</dd></>}
            {s.exit_code != null && <><dt>Exit code</dt><dd data-testid="detail-exit">{s.exit_code}</dd></>}
            {s.exit_code == null && ENDED_STATUSES.has(s.status) && <><dt>Exit code</dt><dd data-testid="detail-exit">none: {s.status === 'CANCELLED'
              ? 'it never ran' : 'its command did not end by itself (it was ended from outside)'}</dd></>}
          </dl>
        </section>
        <section class="card" aria-labelledby="history-title">
          <h2 id="history-title">Status history</h2>
          {history.length === 0 ? <p class="empty">No changes recorded yet.</p> : (
            <ol class="timeline">
              {history.map((h, i) => (
                <li key={i}>
                  <span class={`status st-${h.status.toLowerCase()}`}>{h.status}</span>
                  <time dateTime={h.at}>{fmtTime(h.at)}</time>
                  {h.info && <span class="info">{h.info}</span>}
                </li>
              ))}
            </ol>
          )}
        </section>
      </div>

      {s.status === 'RUNNING' && mine && (
        <section class="card" aria-labelledby="apps-title">
          <h2 id="apps-title">Apps</h2>
          {apps === undefined ? <p class="hint">Loading the apps…</p>
            : apps.length === 0 ? <p class="empty">No apps listed for this session.</p>
              : <AppChips apps={apps} />}
          <p><Button onClick={() => setLauncher(s)}>Open an app…</Button></p>
        </section>
      )}

      <section class="card" aria-labelledby="logs-title">
        <h2 id="logs-title">Logs</h2>
        {logGone ? <p class="empty" data-testid="log-gone">This session never ran: it has no log.</p> : <>
        {containers.length > 0 && <ContainerPicker containers={containers} value={logContainer} onChange={setLogContainer} />}
        <LogViewer key={`${s.id}-${logContainer}-${logHasContainer}-${logKept}`} sessionId={s.id} live={!ENDED_STATUSES.has(s.status)}
          hasContainer={logHasContainer || logKept} kept={logKept} container={containers.length ? logContainer : undefined} /></>}
      </section>

      <EndSessionDialog session={ending} onClose={() => setEnding(null)} onDone={() => { setEnding(null); load(); }} />
      <AppLauncherDialog session={launcher} onClose={() => setLauncher(null)} />
      <CommitDialog session={converting} onClose={() => setConverting(null)} />
    </section>
  );
}
