// Calls to the webserver: /auth/* (login) and /api/v1/* (the manager's API,
// relayed and signed server-side). Every state-changing call carries the
// login's CSRF token; errors become Error objects with the server's words.

export interface User { id: string; email: string; is_admin: boolean; disabled?: boolean; created_at?: string }
export interface Resources { cpu: number; mem: number; fgpu: number }
export interface Session {
  id: string; name: string; owner: string; image: string; status: string; status_info: string;
  agent: string | null; resources: Resources; created_at: string;
  // Issue 32 (docs/scheduling.md): the project it belongs to (its name),
  // the resource group it is placed in, its priority (0..100), whether a
  // higher-priority session may preempt it, and how often it was. Absent
  // from a manager older than projects.
  project?: string; group?: string; priority?: number; preemptible?: boolean; preemptions?: number;
  // Issue 33 (docs/api.md): a cluster session's size and placement, and its
  // containers (main1, sub1, ...); a one-container session has size 1 and
  // main1 alone. Absent from a manager older than cluster sessions.
  cluster_size?: number; cluster_mode?: ClusterMode; containers?: SessionContainer[];
}
export type ClusterMode = 'single-node' | 'multi-node';
// One container of a session: its node, status and GPU shares; usage only
// while it runs and has been measured.
export interface SessionContainer {
  name: string; role: 'main' | 'sub'; idx: number; id: string; agent: string | null; status: string;
  status_info: string; container_id: string | null; gpus?: { index: number; uuid: string; fgpu: number }[];
  usage?: { cpu_pct: number; mem_pct: number; gpu_pct: number | null };
}
// The container a session's exec, logs and apps reach when none is named.
export const MAIN_CONTAINER = 'main1';
// The query that names one container of a cluster session for its logs
// and apps: nothing for main1, so that a one-container session's calls
// stay as they were (and work on a manager older than clusters).
export function containerQuery(container: string | undefined, sep: '?' | '&'): string {
  return container && container !== MAIN_CONTAINER ? `${sep}container=${encodeURIComponent(container)}` : '';
}
export interface Gpu { index: number; uuid: string; name: string; memory: number; fgpu_capacity: number; fgpu_used: number }
export interface Node {
  id: string; status: string; capacity: Resources; used: Resources; sessions: number; gpus?: Gpu[];
  // Its resource group ("default" unless set).
  group?: string;
}

// One entry of the image catalog (GET /v1/images, docs/api.md).
export interface Framework { name: string; version: string }
export interface Image {
  ref: string; name: string; tag: string; family: string; title: string; frameworks: Framework[];
  base_distro?: string; size: number; min: Resources; nodes: string[]; aliases?: string[];
  // The CUDA version its frameworks were built for (label tessera.cuda,
  // "12.4"); absent for a CPU image.
  cuda?: string;
  owner: string | null; visibility: 'public' | 'private' | 'hidden'; status?: string; warning?: string;
}

// A commit of a session into a private image (POST /v1/sessions/{ref}/commit,
// GET /v1/commits/{id}; docs/api.md).
export interface Commit {
  id: string; ref: string; name: string; tag: string; owner: string; status: 'committing' | 'ready' | 'failed';
  error?: string; push_error?: string; in_registry?: boolean; nodes?: string[]; source_session: string; source_image: string;
  created_at: string; finished_at: string | null;
}

// A session's app (GET /v1/sessions/{ref}/apps, docs/apps.md): its name as
// the image declares it (`terminal`, `jupyter`, `mlflow-ui`...).
export interface App { name: string; protocol?: string; port?: number }

let csrf = '';
export function setCsrf(token: string) { csrf = token; }
export function csrfToken(): string { return csrf; }

export class ApiError extends Error {
  constructor(message: string, public status: number, public code: string) { super(message); }
}

export async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET') headers['X-CSRF-Token'] = csrf;
  let resp: Response;
  try {
    resp = await fetch(path, {
      method, headers, credentials: 'same-origin',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    throw new ApiError('Cannot reach the Tessera webserver. Check your connection and try again.', 0, 'network');
  }
  const text = await resp.text();
  let data: any = null;
  try { data = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
  if (!resp.ok) {
    const msg = data?.error?.message ?? `The server answered HTTP ${resp.status}.`;
    throw new ApiError(msg, resp.status, data?.error?.code ?? 'http');
  }
  return data as T;
}

export const api = {
  me: () => call<{ user: User; csrf_token: string }>('GET', '/auth/me'),
  login: (email: string, password: string) =>
    call<{ user: User; csrf_token: string }>('POST', '/auth/login', { email, password }),
  logout: () => call<unknown>('POST', '/auth/logout'),
  // project: only that project's sessions (404 for one the caller is not in).
  sessions: (project?: string) =>
    call<{ sessions: Session[] }>('GET', `/api/v1/sessions${project ? `?project=${encodeURIComponent(project)}` : ''}`),
  nodes: () => call<{ nodes: Node[] }>('GET', '/api/v1/nodes'),
  images: () => call<{ images: Image[] }>('GET', '/api/v1/images'),
  config: () => call<Record<string, unknown>>('GET', '/api/v1/config'),
  setConfig: (key: string, value: unknown) =>
    call<unknown>('PUT', `/api/v1/config/${encodeURIComponent(key)}`, { value }),
  launch: (req: unknown) => call<{ sessions: Session[] }>('POST', '/api/v1/sessions', req),
  terminate: (id: string) => call<Session>('DELETE', `/api/v1/sessions/${encodeURIComponent(id)}`),
  commit: (sessionId: string, body: { name?: string; tag?: string }) =>
    call<{ commit: Commit }>('POST', `/api/v1/sessions/${encodeURIComponent(sessionId)}/commit`, body),
  // Long poll: answers once the commit is no longer `committing`, or after
  // timeout_s with it still `committing`.
  commitWait: (id: string, timeoutS: number) =>
    call<{ commit: Commit }>('GET', `/api/v1/commits/${encodeURIComponent(id)}?wait=1&timeout_s=${timeoutS}`),
  // container: one of a cluster session's (main1 when not given).
  apps: async (sessionId: string, container?: string): Promise<App[]> => {
    const r = await call<{ apps: (App | string)[] }>('GET',
      `/api/v1/sessions/${encodeURIComponent(sessionId)}/apps${containerQuery(container, '?')}`);
    // Entries are objects with a name; a bare name is taken too.
    return (r?.apps ?? []).map((a) => (typeof a === 'string' ? { name: a } : a)).filter((a) => a && typeof a.name === 'string');
  },
  openApp: (sessionId: string, app: string, container?: string) =>
    call<{ app: string; url: string; expires_in?: number }>('POST',
      `/api/v1/sessions/${encodeURIComponent(sessionId)}/apps/${encodeURIComponent(app)}${containerQuery(container, '?')}`),
  users: () => call<{ users: User[] }>('GET', '/api/v1/users'),
  createUser: (u: { email: string; password?: string; is_admin: boolean }) =>
    call<{ user: User; password?: string }>('POST', '/api/v1/users', u),
  updateUser: (id: string, patch: { disabled?: boolean; password?: string }) =>
    call<{ user: User }>('PATCH', `/api/v1/users/${encodeURIComponent(id)}`, patch),
  removeUser: (id: string) =>
    call<{ removed: User; revoked_keys: number; ended_sessions_kept: number }>('DELETE', `/api/v1/users/${encodeURIComponent(id)}`),
};

// Formatting shared by the pages.
export function fmtNum(n: number): string {
  return Number.isInteger(n) ? String(n) : String(Math.round(n * 1000) / 1000);
}
export function fmtBytes(b: number): string {
  const gib = b / 2 ** 30;
  if (gib >= 1) return `${fmtNum(Math.round(gib * 100) / 100)} GiB`;
  return `${fmtNum(Math.round(b / 2 ** 20))} MiB`;
}
export function fmtConfig(r: Resources): string {
  const parts = [`${fmtNum(r.cpu)} CPU`, fmtBytes(r.mem)];
  if (r.fgpu > 0) parts.push(`${fmtNum(r.fgpu)} fGPU`);
  return parts.join(', ');
}
export function fmtAge(iso: string, now: number): string {
  const s = Math.max(0, Math.floor((now - Date.parse(iso)) / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d`;
}

// ---- Live usage, resources and drain (docs/api.md): session stats and
// the "usage"/"idle" fields, GET /v1/resources, the launch estimate, PATCH
// /v1/nodes. Times of samples are Unix milliseconds. ----

export interface GpuSample { index: number; uuid: string; share: number; util_pct: number; mem_bytes: number; mem_limit_bytes: number }
export interface UsageSample {
  t: number; cpu_cores: number; cpu_pct: number; mem_bytes: number; mem_limit_bytes: number;
  gpus?: GpuSample[]; net_rx_bytes?: number; net_tx_bytes?: number; blk_read_bytes?: number; blk_write_bytes?: number;
}
export interface SessionStats {
  session: string; id: string; period_ms: number; retention_s: number;
  current: UsageSample | null; history: UsageSample[];
}
// On a RUNNING session of GET /v1/sessions: its last sample, in percent.
export interface RowUsage { cpu_pct: number; mem_pct: number; gpu_pct: number | null; t: number }
export interface IdleInfo { timeout_s: number; deadline: number | null }
export interface HistoryEntry { status: string; at: string; info: string }
// Where a start's time went (GET /v1/sessions/{ref}, docs/api.md): queue,
// dispatch, image (a pull from the registry), container; null before it ran.
export interface StartBreakdown { total_ms: number; phases: { phase: string; ms: number }[] }
export interface SessionFull extends Session {
  type?: string; oom_kills?: number; removed?: boolean; env?: Record<string, string>;
  startup_command?: string | null; exit_code?: number | null; started_at?: string | null; terminated_at?: string | null;
  gpus?: { index: number; uuid: string; fgpu: number }[];
  mounts?: { folder: string; path: string; ro: boolean; automount: boolean }[];
  status_history?: HistoryEntry[]; usage?: RowUsage; idle?: IdleInfo; root?: boolean;
  start_breakdown?: StartBreakdown | null;
}
export interface NodeUsage { cpu_cores: number; mem_bytes: number; t: number }
export type NodeFull = Omit<Node, 'gpus'> & {
  schedulable?: boolean; usage?: NodeUsage; last_heartbeat?: string; mock_gpus?: boolean;
  gpus?: (Gpu & { util_pct?: number; mem_used_bytes?: number })[];
};
export interface ResourceSummary {
  // allow_root: absent from a manager older than the launch dialog's root option.
  policy: { max_sessions: number | null; max_cpu: number | null; max_mem: number | null; max_fgpu: number | null; allow_root?: boolean };
  used: { sessions: number; cpu: number; mem: number; fgpu: number };
  cluster: {
    capacity: Resources; free: Resources; largest_fgpu_free_on_one_device: number;
    largest_free_on_one_node?: { cpu: number; mem: number };
  };
  // The caller's projects with their quotas and use (issue 32); absent
  // from a manager older than projects.
  projects?: { name: string; personal: boolean; quota: Quota; used: QuotaUse }[];
}
export interface Estimate { fits_now: boolean; reason: string | null }

const enc = encodeURIComponent;
export const api2 = {
  session: (ref: string) => call<SessionFull>('GET', `/api/v1/sessions/${enc(ref)}`),
  stats: (ref: string, since?: number) =>
    call<SessionStats>('GET', `/api/v1/sessions/${enc(ref)}/stats${since ? `?since=${since}` : ''}`),
  resources: () => call<ResourceSummary>('GET', '/api/v1/resources'),
  estimate: (req: unknown) => call<Estimate>('POST', '/api/v1/sessions?dry_run=1', req),
  setSchedulable: (id: string, schedulable: boolean) =>
    call<{ node: NodeFull }>('PATCH', `/api/v1/nodes/${enc(id)}`, { schedulable }),
};

// ---- Projects, resource groups and fair share (issue 32,
// docs/scheduling.md). A quota's null is "no limit"; mem in bytes. ----

export interface Quota { cpu: number | null; mem: number | null; fgpu: number | null; sessions: number | null }
export interface QuotaUse { cpu: number; mem: number; fgpu: number; sessions: number }
export type ProjectRole = 'member' | 'manager';
export interface Member { email: string; role: ProjectRole; weight: number }
export interface Project {
  id: string; name: string; description: string; personal: boolean; weight: number;
  quota: Quota; groups: string[];   // [] = every group
  members: Member[]; used: QuotaUse; my_role: ProjectRole | 'admin' | 'none'; created_at: string;
}
// What POST and PATCH /v1/projects take; quota fields null: no limit.
export interface ProjectSpec { name?: string; description?: string; weight?: number; quota?: Partial<Quota>; groups?: string[] }

export interface ShareUsage { cpu_s: number; mem_gib_s: number; fgpu_s: number }
// One line of GET /v1/fairshare; shares are 0..1, rank 1 is served first.
export interface ShareLine { weight: number; target: number; usage: ShareUsage; usage_share: number; current_share: number; rank: number }
export interface FairShareProject extends ShareLine { name: string; users: (ShareLine & { email: string })[] }
export interface FairShare { queue_policy: string; half_life_s: number; projects: FairShareProject[] }

export const api3 = {
  // all: admins get personal projects too.
  projects: (all = false) => call<{ projects: Project[] }>('GET', `/api/v1/projects${all ? '?all=1' : ''}`),
  project: (name: string) => call<{ project: Project }>('GET', `/api/v1/projects/${enc(name)}`),
  createProject: (spec: ProjectSpec) => call<{ project: Project }>('POST', '/api/v1/projects', spec),
  updateProject: (name: string, spec: ProjectSpec) => call<{ project: Project }>('PATCH', `/api/v1/projects/${enc(name)}`, spec),
  removeProject: (name: string) => call<{ removed: string }>('DELETE', `/api/v1/projects/${enc(name)}`),
  setMember: (name: string, email: string, m: { role: ProjectRole; weight?: number }) =>
    call<{ project: Project }>('PUT', `/api/v1/projects/${enc(name)}/members/${enc(email)}`, m),
  removeMember: (name: string, email: string) =>
    call<{ project: Project }>('DELETE', `/api/v1/projects/${enc(name)}/members/${enc(email)}`),
  fairshare: () => call<FairShare>('GET', '/api/v1/fairshare'),
  setNodeGroup: (id: string, group: string) =>
    call<{ node: NodeFull }>('PATCH', `/api/v1/nodes/${enc(id)}`, { group }),
};

// A share (0..1) as a percentage with one decimal: "33.3%".
export function fmtShare(x: number): string {
  return `${(Math.round(x * 1000) / 10).toFixed(1)}%`;
}

// ---- Environments and the queue (issue 35, items 2 and 5; docs/api.md
// "Images" and "The queue"). ----

// A catalog image with what its commit knows (private images).
export type CatalogImage = Image & {
  service_ports?: { name: string; protocol: string; ports: number[] }[]; error?: string;
  source_session?: string; source_image?: string; committed_at?: string | null; created_at?: string; in_registry?: boolean;
};
export interface QueueEntry {
  id: string; name: string; owner: string; status: string; position: number | null; priority: number;
  reason: string | null; resources: Resources; project: string | null; group: string; created_at: string;
  passes: number; containers: number;
}
export interface QueueHistory { reason: string; first: string; last: string; passes: number }
export const envqApi = {
  // all: an admin's catalog with the hidden images too.
  images: (all: boolean) => call<{ images: CatalogImage[] }>('GET', `/api/v1/images${all ? '?all=1' : ''}`),
  rescan: () => call<{ nodes: number; nodes_alive: number; images: number }>('POST', '/api/v1/images/rescan'),
  setAlias: (alias: string, image: string) =>
    call<{ alias: string; image: string }>('PUT', `/api/v1/images/aliases/${enc(alias)}`, { image }),
  removeAlias: (alias: string) => call<{ alias: string }>('DELETE', `/api/v1/images/aliases/${enc(alias)}`),
  removeImage: (ref: string) => call<{ ref: string; nodes: string[] }>('DELETE', `/api/v1/images/${enc(ref)}`),
  queue: () => call<{ queue_policy: string; pending: number; sessions: QueueEntry[] }>('GET', '/api/v1/queue'),
  scheduling: (id: string) =>
    call<QueueEntry & { history: QueueHistory[]; history_max: number }>('GET', `/api/v1/sessions/${enc(id)}/scheduling`),
  move: (id: string, body: { priority: number } | { top: true }) =>
    call<QueueEntry & { previous_priority: number }>('POST', `/api/v1/queue/${enc(id)}/move`, body),
};

// Copies text to the clipboard: the Clipboard API where the page may use
// it, else a selected hidden field and the copy command. False when
// neither worked (the caller then shows the text to copy by hand).
export async function copyText(text: string): Promise<boolean> {
  try {
    if (navigator.clipboard) { await navigator.clipboard.writeText(text); return true; }
  } catch { /* refused: try the old way */ }
  const t = document.createElement('textarea');
  t.value = text;
  t.setAttribute('readonly', '');
  t.style.position = 'fixed';
  t.style.opacity = '0';
  document.body.appendChild(t);
  t.select();
  let ok = false;
  try { ok = document.execCommand('copy'); } catch { ok = false; }
  t.remove();
  return ok;
}
// ---- History and statistics (issue 35 item 1, docs/api.md "List
// sessions" and "Usage summary") ----

// One page of GET /v1/sessions: `continue` when more sessions follow.
export interface SessionPageAnswer { sessions: SessionFull[]; continue?: string }
export type UsageBy = 'user' | 'project';
// A row of GET /v1/usage/summary: allocated hours of one UTC day and one
// user (or project); totals have no day.
export interface UsageRow {
  day?: string; user?: string; project?: string;
  cpu_hours: number; mem_gib_hours: number; fgpu_hours: number; sessions_started: number;
}
export interface UsageSummary { from: string; to: string; by: UsageBy; rows: UsageRow[]; totals: UsageRow[]; total: UsageRow }
export interface UsageQuery { from?: string; to?: string; by?: UsageBy; user?: string; project?: string }
function usageQs(q: UsageQuery, format: 'json' | 'csv'): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) if (v) p.set(k, v);
  if (format === 'csv') p.set('format', 'csv');
  const s = p.toString();
  return s ? `?${s}` : '';
}
export const api4 = {
  // The query's values are the list's (status, all, order, owner,
  // project, limit, continue), encoded here.
  sessionPage: (q: Record<string, string>) =>
    call<SessionPageAnswer>('GET', `/api/v1/sessions?${new URLSearchParams(q).toString()}`),
  usage: (q: UsageQuery) => call<UsageSummary>('GET', `/api/v1/usage/summary${usageQs(q, 'json')}`),
  // The same rows as CSV text, for a download.
  usageCsv: async (q: UsageQuery): Promise<string> => {
    const resp = await fetch(`/api/v1/usage/summary${usageQs(q, 'csv')}`, { credentials: 'same-origin', headers: { Accept: 'text/csv' } });
    const text = await resp.text();
    if (!resp.ok) {
      let msg = `The server answered HTTP ${resp.status}.`;
      try { msg = JSON.parse(text)?.error?.message ?? msg; } catch { /* not JSON */ }
      throw new ApiError(msg, resp.status, 'http');
    }
    return text;
  },
};
