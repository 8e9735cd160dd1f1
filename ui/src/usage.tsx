// Live usage on the pages: small meters for a row, the resource panel of
// the Sessions page, and live charts (uPlot). Everything here keeps its
// size while data arrives (no layout shift): meters and charts reserve
// their room and show a placeholder until the first value.
import { useEffect, useId, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { api2, fmtBytes, fmtNum, type Quota, type QuotaUse, type ResourceSummary, type Session } from './api';

// A percentage meter: label, value and bar on one line, always the same
// size. pct null: no sample yet ("—"). warn/crit colour the bar.
export function Meter(props: { label: string; pct: number | null | undefined; title?: string; compact?: boolean }) {
  const id = useId();
  const v = props.pct == null || Number.isNaN(props.pct) ? null : props.pct;
  const shown = v === null ? '—' : `${Math.round(v)}%`;
  const level = v === null ? '' : v >= 90 ? ' crit' : v >= 70 ? ' warn' : '';
  return (
    <div class={`meter${props.compact ? ' compact' : ''}`} title={props.title}>
      <span class="meter-label" id={id}>{props.label}</span>
      <span class="meter-track" role="meter" aria-labelledby={id} aria-valuemin={0} aria-valuemax={100}
        aria-valuenow={v ?? undefined} aria-valuetext={v === null ? 'no sample yet' : shown}>
        <span class={`meter-fill${level}`} style={{ width: `${Math.max(0, Math.min(100, v ?? 0))}%` }} />
      </span>
      <span class="meter-value">{shown}</span>
    </div>
  );
}

// GET /v1/resources, asked again whenever `key` changes (the sessions seen
// changed) and every 10 s (other users' sessions change the cluster's free
// capacity too). null until the first answer.
export function useResources(key: string): { res: ResourceSummary | null; error: string | null } {
  const [res, setRes] = useState<ResourceSummary | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = () => api2.resources().then((r) => { setRes(r); setError(null); })
    .catch((e) => setError(`Cannot read your resources: ${(e as Error).message}`));
  useEffect(() => { load(); }, [key]);
  useEffect(() => {
    const t = window.setInterval(load, 10000);
    return () => clearInterval(t);
  }, []);
  return { res, error };
}

const GiB = 2 ** 30;

interface Tile {
  name: string; used: number; limit: number | null; free: number | null; capacity: number | null; fmt: (n: number) => string;
  // Whose limit: the user's policy, or a project's quota (named).
  of?: { project: string };
  // What PENDING sessions ask for: said beside the use, never in it (a
  // PENDING session holds nothing; the scheduler counts only what runs).
  pending?: number;
  // The cluster's use (an admin's tiles: everyone's sessions, as the list).
  everyone?: boolean;
}

function ResourceTile({ t }: { t: Tile }) {
  const id = useId();
  // The bar is against the limit when there is one, else the cluster.
  const total = t.limit ?? t.capacity ?? 0;
  const pct = total > 0 ? Math.min(100, (t.used / total) * 100) : 0;
  const left = t.limit !== null ? Math.max(0, t.limit - t.used) : null;
  const whose = t.of ? `project ${t.of.project}'s quota` : 'your policy';
  // Warn and crit colours say a limit is near; with none, the bar is the
  // cluster's share in use, drawn neutral: a full cluster is no fault.
  const level = t.limit === null ? ' nolimit' : pct >= 90 ? ' crit' : pct >= 70 ? ' warn' : '';
  // A project's tiles carry data-project-resource, not data-resource: the
  // user's own tiles stay the only ones of that name.
  const attrs = t.of ? { 'data-project-resource': t.name.toLowerCase() } : { 'data-resource': t.name.toLowerCase() };
  const of = t.limit !== null ? ` / ${t.fmt(t.limit)}` : t.everyone ? (t.capacity !== null ? ` / ${t.fmt(t.capacity)}` : '') : ' · no limit';
  return (
    <div class={`res-tile${t.of ? ' project' : ''}`} {...attrs}>
      <div class="res-head">
        <span class="res-name" id={id}>{t.name}</span>
        <span class="res-used"><strong>{t.fmt(t.used)}</strong><span class="res-of">{of}</span></span>
      </div>
      <div class="res-bar" role="meter" aria-labelledby={id} aria-valuemin={0} aria-valuemax={total || 1}
        aria-valuenow={t.used} aria-valuetext={`${t.fmt(t.used)} ${t.everyone ? 'in use by everyone' : 'used'}${t.limit !== null ? ` of ${t.of ? `${whose} of` : 'your limit of'} ${t.fmt(t.limit)}`
          : total > 0 ? ` of the cluster's ${t.fmt(total)}` : ', no limit'}`}>
        <span class={`res-fill${level}`} style={{ width: `${pct}%` }} />
      </div>
      <div class="res-foot">
        {t.everyone ? <span>everyone's sessions</span>
          : left !== null ? <span>{t.fmt(left)} left by {whose}</span> : <span>{t.of ? 'the project sets no limit' : 'your policy sets no limit'}</span>}
        {(t.pending ?? 0) > 0 && <span class="res-pending">+ {t.fmt(t.pending!)} waiting (PENDING)</span>}
        {t.free !== null && <span>cluster: {t.fmt(t.free)} free{t.capacity !== null ? ` of ${t.fmt(t.capacity)}` : ''}</span>}
      </div>
    </div>
  );
}

// A project's quota and use as the resource panel shows it (from GET
// /v1/resources' "projects", or GET /v1/projects for one the caller
// manages without being in it).
export interface ProjectQuota { name: string; personal: boolean; quota: Quota; used: QuotaUse }

// Statuses whose sessions hold their resources on a node (the manager's
// session_status_holds): PENDING holds nothing yet, ERROR nothing any more.
const HOLDS = new Set(['SCHEDULED', 'PREPARING', 'RUNNING', 'LOST', 'TERMINATING', 'PREEMPTED']);
interface Sum { cpu: number; mem: number; fgpu: number; sessions: number }
// What sessions of the list hold (or, PENDING, ask for): a cluster
// session's resources are each container's, and it counts as one session.
export function sumSessions(list: Session[], status: (s: string) => boolean): Sum {
  const o: Sum = { cpu: 0, mem: 0, fgpu: 0, sessions: 0 };
  for (const s of list) {
    if (!status(s.status)) continue;
    const n = Math.max(1, s.cluster_size ?? 1);
    o.cpu += s.resources.cpu * n; o.mem += s.resources.mem * n; o.fgpu += s.resources.fgpu * n; o.sessions++;
  }
  return o;
}

// The Sessions page's summary, from the same list as the table (GET
// /v1/sessions or the event stream): what the user's sessions hold of CPU,
// memory, fGPU and sessions, against their policy (GET /v1/resources) and
// the cluster's free capacity, with what PENDING ones ask beside it. An
// administrator's list is everyone's, and so are their tiles: the
// cluster's use against its capacity. With a project chosen, the
// project's use against its quota beside it (a session must fit both).
export function ResourcePanel({ res, error, project, sessions, user }: {
  res: ResourceSummary | null; error: string | null; project?: ProjectQuota | null;
  sessions?: Session[]; user?: { email: string; is_admin: boolean };
}) {
  const cores = (n: number) => `${fmtNum(Math.round(n * 100) / 100)} CPU`;
  const fgpu = (n: number) => `${fmtNum(Math.round(n * 100) / 100)} fGPU`;
  const mem = (n: number) => (n >= GiB || n === 0 ? `${fmtNum(Math.round((n / GiB) * 10) / 10)} GiB` : fmtBytes(n));
  const count = (n: number) => String(n);
  const everyone = !!user?.is_admin;
  const list = sessions && user ? (everyone ? sessions : sessions.filter((s) => s.owner === user.email)) : null;
  // Without the list (a caller that has none), GET /v1/resources' use,
  // which counts PENDING sessions too.
  const held: Sum | null = list ? sumSessions(list, (st) => HOLDS.has(st)) : res && res.used;
  const waiting: Sum | null = list ? sumSessions(list, (st) => st === 'PENDING') : null;
  const lim = (v: number | null) => (everyone ? null : v);
  const tiles: Tile[] | null = res && held && [
    { name: 'CPU', used: held.cpu, pending: waiting?.cpu, limit: lim(res.policy.max_cpu), free: res.cluster.free.cpu, capacity: res.cluster.capacity.cpu, fmt: cores, everyone },
    { name: 'Memory', used: held.mem, pending: waiting?.mem, limit: lim(res.policy.max_mem), free: res.cluster.free.mem, capacity: res.cluster.capacity.mem, fmt: mem, everyone },
    { name: 'GPU', used: held.fgpu, pending: waiting?.fgpu, limit: lim(res.policy.max_fgpu), free: res.cluster.free.fgpu, capacity: res.cluster.capacity.fgpu, fmt: fgpu, everyone },
    { name: 'Sessions', used: held.sessions, pending: waiting?.sessions, limit: lim(res.policy.max_sessions), free: null, capacity: null, fmt: count, everyone },
  ];
  const of = project ? { project: project.name } : undefined;
  const ptiles: Tile[] | null = project ? [
    { name: 'CPU', used: project.used.cpu, limit: project.quota.cpu, free: null, capacity: null, fmt: cores, of },
    { name: 'Memory', used: project.used.mem, limit: project.quota.mem, free: null, capacity: null, fmt: mem, of },
    { name: 'GPU', used: project.used.fgpu, limit: project.quota.fgpu, free: null, capacity: null, fmt: fgpu, of },
    { name: 'Sessions', used: project.used.sessions, limit: project.quota.sessions, free: null, capacity: null, fmt: count, of },
  ] : null;
  const title = everyone ? 'Cluster use, everyone\u2019s (as the list below)' : 'Your resources';
  const mine = (
    <section class="res-panel" aria-labelledby="res-title" aria-busy={res === null && !error} data-scope={everyone ? 'everyone' : 'mine'}>
      <h2 id="res-title" class={project || everyone ? 'res-title' : 'sr-only'}>{title}</h2>
      {tiles ? tiles.map((t) => <ResourceTile key={t.name} t={t} />)
        : ['CPU', 'Memory', 'GPU', 'Sessions'].map((n) => (
          <div key={n} class="res-tile skeleton" aria-hidden="true"><span class="res-name">{n}</span></div>
        ))}
      {error && <p class="error res-error" role="alert">{error}</p>}
    </section>
  );
  if (!ptiles || !project) return mine;
  return (
    <div class="res-panels">
      {mine}
      <section class="res-panel project" aria-labelledby="res-project-title" data-project={project.name}>
        <h2 id="res-project-title" class="res-title">Project {project.name}{project.personal ? ' (personal)' : ''}</h2>
        {ptiles.map((t) => <ResourceTile key={t.name} t={t} />)}
      </section>
    </div>
  );
}

// ---- live charts ----

export interface ChartSeries { label: string; colorVar: string; dash?: boolean }

function cssVar(name: string, fallback: string): string {
  const v = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  return v || fallback;
}

// At least the last five minutes across. uPlot's own range for a time axis
// whose samples span less (one sample: the first seconds of a session) is
// a day in milliseconds read as seconds: years.
const MIN_SPAN_S = 300;
function fitX(u: uPlot, data: uPlot.AlignedData) {
  const x = data[0] as number[];
  if (!x.length) return;
  const max = x[x.length - 1];
  if (max - x[0] < MIN_SPAN_S) u.setScale('x', { min: max - MIN_SPAN_S, max });
}

// The y axis as wide as its widest label, plus its ticks and their gap:
// a fixed width cut "250 MiB" to "50 MiB". uPlot asks at each redraw,
// once per layout cycle (cycleNum 1, 2, ...): the first cycle measures
// and later ones keep its answer, so that the layout settles.
function yAxisSize(u: uPlot, values: string[] | null, axisIdx: number, cycleNum: number): number {
  const axis = u.axes[axisIdx] as uPlot.Axis & { _size?: number; font: [string, number] | string };
  if (cycleNum > 1 && axis._size) return axis._size;
  const ticks = (axis.ticks as { size?: number } | undefined)?.size ?? 10;
  let widest = 0;
  if (values && values.length) {
    u.ctx.save();
    u.ctx.font = Array.isArray(axis.font) ? axis.font[0] : axis.font;
    for (const v of values) widest = Math.max(widest, u.ctx.measureText(String(v ?? '')).width);
    u.ctx.restore();
    widest /= devicePixelRatio || 1;   // the font is scaled to device pixels
  }
  return Math.ceil(ticks + (axis.gap ?? 5) + widest + 6);
}

// A live line chart over time (x in Unix seconds). The chart is made once;
// new points come through `data` and `version` (the caller appends to its
// arrays and bumps version): uPlot redraws its canvas, nothing else
// re-renders. Its box has a fixed height, so it takes its room before the
// first point. data-points on the box says how many points it shows.
export function LiveChart(props: {
  title: string; series: ChartSeries[]; data: uPlot.AlignedData; version: number;
  yRange?: [number, number]; yMin?: number; fmt: (v: number) => string; height?: number; empty?: string;
}) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const height = props.height ?? 180;
  const [theme, setTheme] = useState(0);

  useEffect(() => {
    const mq = matchMedia('(prefers-color-scheme: dark)');
    const on = () => setTheme((n) => n + 1);
    mq.addEventListener('change', on);
    return () => mq.removeEventListener('change', on);
  }, []);

  const n = props.data[0]?.length ?? 0;
  // Made at the first point: until then the box keeps its room and says
  // why it is empty (axes without data would show a made-up scale).
  const hasData = n > 0;
  useEffect(() => {
    const el = box.current;
    if (!el || !hasData) return;
    const grid = cssVar('--border', '#e1e4ea'), text = cssVar('--muted', '#5a6478');
    const axis = { stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
    const opts: uPlot.Options = {
      width: Math.max(200, el.clientWidth), height, legend: { show: true, live: true },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true }, y: props.yRange ? { range: props.yRange } : { range: (_u, _min, max) => [0, Math.max(props.yMin ?? 1, max * 1.1)] } },
      axes: [{ ...axis }, { ...axis, size: yAxisSize, values: (_u, vals) => vals.map((v) => props.fmt(v)) }],
      series: [{}, ...props.series.map((s) => ({
        label: s.label, stroke: cssVar(s.colorVar, '#2454c5'), width: 2, dash: s.dash ? [6, 4] : undefined,
        fill: s.dash ? undefined : `${cssVar(s.colorVar, '#2454c5')}22`,
        value: (_u: uPlot, v: number | null) => (v == null ? '—' : props.fmt(v)),
        // A line needs two samples: the first one shows as a dot.
        points: { show: (_u: uPlot, _si: number, i0: number, i1: number) => i1 - i0 < 1 },
      }))],
    };
    plot.current = new uPlot(opts, props.data, el);
    fitX(plot.current, props.data);
    const ro = new ResizeObserver(() => {
      if (plot.current && el.clientWidth > 0) plot.current.setSize({ width: el.clientWidth, height });
    });
    ro.observe(el);
    return () => { ro.disconnect(); plot.current?.destroy(); plot.current = null; };
  }, [props.series.map((s) => s.label).join('|'), theme, hasData]);

  useEffect(() => {
    if (!plot.current) return;
    plot.current.setData(props.data);
    fitX(plot.current, props.data);
  }, [props.version]);

  return (
    <figure class="chart" aria-label={`${props.title} over the last hour`}>
      <figcaption>{props.title}</figcaption>
      <div class="chart-wrap" style={{ minHeight: `${height + 44}px` }}>
        <div class="chart-box" ref={box} data-points={n} />
        {n === 0 && <p class="chart-empty">{props.empty ?? 'Waiting for the first sample…'}</p>}
      </div>
    </figure>
  );
}
