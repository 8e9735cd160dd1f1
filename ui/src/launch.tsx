import { useEffect, useId, useLayoutEffect, useRef, useState } from 'preact/hooks';
import {
  api, api2, ApiError, call, fmtBytes, fmtConfig, fmtNum, type ClusterMode, type Estimate, type Image, type Node, type Quota, type QuotaUse, type ResourceSummary, type SessionFull, type User,
} from './api';
import { Button, Dialog, ErrorText, SliderField, TextField } from './components';
import { FolderPicker, type Mounts } from './folderpicker';
import { presetsApi, presetsFor, presetWhat, type Preset } from './presets';

const GiB = 2 ** 30;

// How the launcher names the frameworks of tessera.frameworks (package
// names as Debian ships them); others show as they are.
const FRAMEWORK_NAMES: Record<string, string> = {
  python: 'Python', torch: 'PyTorch', tensorflow: 'TensorFlow', 'scikit-learn': 'scikit-learn',
  numpy: 'NumPy', pandas: 'pandas', matplotlib: 'Matplotlib', notebook: 'Jupyter Notebook',
  jupyterlab: 'JupyterLab', mlflow: 'MLflow', scipy: 'SciPy', cuda: 'CUDA',
};
export function frameworksLine(img: Image, max = 3): string {
  return img.frameworks.slice(0, max).map((f) => `${FRAMEWORK_NAMES[f.name] ?? f.name} ${f.version}`).join(' · ');
}

// A tile's second line: the framework the versions differ by (torch in
// a PyTorch family, python in a plain one) with the versions on offer.
function familyLine(f: Family): string {
  const key = (img: Image) => {
    const fw = img.frameworks;
    return fw.length > 1 && fw[0].name === 'python' && fw[1].name !== 'notebook' ? fw[1] : fw[0];
  };
  const first = key(f.images[0]);
  if (!first) return f.images[0].name;
  const versions = [...new Set(f.images.map(key).filter((k) => k && k.name === first.name).map((k) => k!.version))];
  return `${FRAMEWORK_NAMES[first.name] ?? first.name} ${versions.join(' · ')}`;
}

// Each environment's badge: two letters, told apart from the other
// tiles' ("Python" and "PyTorch" both began "Py"): the title's capitals
// (PyTorch: PT) or its words' initials first, then its first two letters,
// then its first letter with each later one in turn.
export function envBadges(envs: Family[]): Map<string, string> {
  const out = new Map<string, string>(), used = new Set<string>();
  for (const f of envs) {
    if (f.other) { out.set(f.family, '…'); continue; }
    const t = f.title.replace(/[^\p{L}\p{N} ]/gu, ' ').trim() || f.family;
    const words = t.split(/\s+/).filter(Boolean);
    const caps = t.slice(1).replace(/[^\p{Lu}\p{N}]/gu, '');
    const tries = [
      caps ? t[0] + caps[0] : '',
      words.length > 1 ? words[0][0] + words[1][0] : '',
      t.slice(0, 2),
      ...[...t.slice(1).replace(/\s/g, '')].map((c) => t[0] + c),
    ].filter((x) => x.length === 2).map((x) => x[0].toUpperCase() + x[1]);
    const pick = tries.find((x) => !used.has(x.toLowerCase())) ?? tries[0] ?? t.slice(0, 2);
    used.add(pick.toLowerCase());
    out.set(f.family, pick);
  }
  return out;
}

// A colour per environment, so tiles are told apart at a glance.
function familyHue(family: string): number {
  let h = 0;
  for (const c of family) h = (h * 31 + c.charCodeAt(0)) % 360;
  return h;
}

function fmtSize(bytes: number): string {
  if (!bytes) return '';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = bytes, u = 0;
  while (v >= 1024 && u < units.length - 1) { v /= 1024; u++; }
  return `${v >= 10 || u === 0 ? Math.round(v) : v.toFixed(1)} ${units[u]}`;
}

function fmtMin(min: Resources0 | undefined): string {
  const parts: string[] = [];
  if (!min) return '';
  if (min.cpu) parts.push(`${fmtNum(min.cpu)} CPU`);
  if (min.mem) parts.push(fmtSize(min.mem));
  if (min.fgpu) parts.push(`${fmtNum(min.fgpu)} fGPU`);
  return parts.length ? `needs ${parts.join(' · ')}` : '';
}
type Resources0 = { cpu: number; mem: number; fgpu: number };

interface Family { family: string; title: string; images: Image[]; other?: boolean }

// An image without Tessera's or Backend.AI's labels is its own family
// (the catalog names it after its repository): such images share one
// "Other" tile rather than one tile each.
const OTHER = '\u0000other';
const unlabelled = (i: Image) => i.frameworks.length === 0 && i.family === i.name;

// Groups the catalog into environments, each with its versions, newest
// tag first; private images (the user's own) group like any other.
function families(images: Image[]): Family[] {
  const by = new Map<string, Family>();
  for (const img of images) {
    if (img.status && img.status !== 'ready') continue;
    const key = unlabelled(img) ? OTHER : img.family;
    let f = by.get(key);
    if (!f) {
      f = key === OTHER ? { family: OTHER, title: 'Other', images: [], other: true }
        : { family: img.family, title: img.title || img.family, images: [] };
      by.set(key, f);
    }
    f.images.push(img);
  }
  const list = [...by.values()];
  for (const f of list) {
    f.images.sort((a, b) => (f.other ? a.ref.localeCompare(b.ref)
      : b.tag.localeCompare(a.tag, undefined, { numeric: true })));
  }
  return list.sort((a, b) => Number(!!a.other) - Number(!!b.other) || a.title.localeCompare(b.title));
}

// The launch dialog, in the order Backend.AI users know: Environment
// (family, with its title) then Version (the tag with its framework
// versions), or any image name typed in; then CPU, Memory, GPU (fGPU) and
// Sessions. The sliders' ranges follow the largest node (GET /v1/nodes): a
// session must fit on one node; their lower bounds follow the chosen
// image's minimum (ai.backend.resource.min.*).
// The images the launcher offers: ready ones with the catalog's labels
// (an environment), public or the user's own private ones. Unlabelled
// images (whatever else the nodes' Docker holds) and private images of
// anyone else (an admin sees those in `image ls --all`) are not offered;
// the free field still takes any name.
export function launchable(images: Image[], user: User | undefined): Image[] {
  return images.filter((i) => (!i.status || i.status === 'ready') && !unlabelled(i) && i.visibility !== 'hidden' &&
    (i.visibility !== 'private' || (user !== undefined && i.owner === user.email)));
}

// The last choices, kept in this browser (localStorage) for the next
// launch: the environment, version, CPU and memory. Not the GPU (it starts
// at the chosen image's minimum) nor the number of sessions (it starts at
// 1: a count kept from the last launch made several sessions unasked).
const LAST_KEY = 'tessera.launch.last';
interface LastChoice { family?: string; ref?: string; cpu?: number; memGiB?: number }
function readLast(): LastChoice {
  try { const v = JSON.parse(localStorage.getItem(LAST_KEY) ?? '{}'); return v && typeof v === 'object' ? v : {}; } catch { return {}; }
}
function writeLast(v: LastChoice) {
  try { localStorage.setItem(LAST_KEY, JSON.stringify(v)); } catch { /* storage off: nothing kept */ }
}

// A session of the user's recent history, as GET /v1/sessions?all=1
// lists it, with the full launcher's fields (absent from an older manager).
type Recent = SessionFull & { batch_timeout?: number | null; preopen_ports?: number[]; starts_at?: string | null };
const RECENT_MAX = 4;
// What makes two sessions the same launch: one button for both.
const recentKey = (s: Recent) => JSON.stringify([s.image, s.resources, s.type, s.startup_command ?? '', s.env ?? {},
  s.root ?? false, s.group ?? '', s.project ?? '', s.cluster_size ?? 1, s.preopen_ports ?? [], s.batch_timeout ?? null]);
function recentLaunches(all: Recent[], email: string | undefined): Recent[] {
  const seen = new Set<string>(), out: Recent[] = [];
  const mine = all.filter((s) => s.owner === email).sort((a, b) => b.created_at.localeCompare(a.created_at));
  for (const s of mine) {
    const k = recentKey(s);
    if (seen.has(k)) continue;
    seen.add(k);
    out.push(s);
    if (out.length === RECENT_MAX) break;
  }
  return out;
}

// The environment variables field: one NAME=value a line, checked as the
// API checks them (docs/api.md) so the error is said while typing.
function parseEnv(text: string): { env: Record<string, string>; error?: string } {
  const env: Record<string, string> = {};
  for (const [i, raw] of text.split('\n').entries()) {
    const line = raw.replace(/\r$/, '');
    if (!line.trim()) continue;
    const eq = line.indexOf('=');
    const key = eq < 0 ? line.trim() : line.slice(0, eq).trim();
    if (eq < 0) return { env, error: `Line ${i + 1}: write NAME=value.` };
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) return { env, error: `Line ${i + 1}: the name '${key}' may hold only letters, digits and '_', not starting with a digit.` };
    if (key.startsWith('TESSERA_')) return { env, error: `Line ${i + 1}: TESSERA_ names are set by the platform.` };
    if (key in env) return { env, error: `Line ${i + 1}: ${key} is given twice.` };
    env[key] = line.slice(eq + 1);
  }
  if (Object.keys(env).length > 128) return { env, error: 'At most 128 variables.' };
  return { env };
}
function envText(env: Record<string, string> | undefined): string {
  return Object.entries(env ?? {}).map(([k, v]) => `${k}=${v}`).join('\n');
}
// "8080, 6006" into ports, checked as the API checks them.
function parsePorts(text: string): { ports: number[]; error?: string } {
  const ports: number[] = [];
  for (const w of text.split(/[\s,]+/).filter(Boolean)) {
    const n = Number(w);
    if (!/^\d+$/.test(w) || n < 1 || n > 65535) return { ports, error: `'${w}' is not a port (1 to 65535).` };
    if (n === 7611) return { ports, error: 'Port 7611 is the session runner\u2019s own.' };
    if (ports.includes(n)) return { ports, error: `Port ${n} is given twice.` };
    ports.push(n);
  }
  if (ports.length > 8) return { ports, error: 'At most 8 ports.' };
  return { ports };
}
// A datetime-local value (the browser's local time) as an instant.
function localTime(v: string): Date | null {
  const d = v ? new Date(v) : null;
  return d && !Number.isNaN(d.getTime()) ? d : null;
}
// A Date as a datetime-local value.
function toLocalInput(d: Date): string {
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
}

const MiB = 2 ** 20;
const ROOT_FORBIDDEN = 'Your policy does not allow sessions that run as root: they run as the image\u2019s work user (uid 1000). An administrator can allow it (policy: "Allow sessions as root").';

export function LaunchDialog(props: {
  open: boolean; nodes: Node[]; onClose: () => void; onLaunched: () => void;
  resources?: ResourceSummary | null; user?: User;
  // The projects the user may launch in (a select when more than one), and
  // the one to start with (the Sessions page's switcher); without it, the
  // one the server would choose: the user's one team project, else their
  // personal one.
  projects?: { name: string; personal: boolean; quota?: Quota; used?: QuotaUse }[]; project?: string;
  // An image to start from, put in the Image field (My environments'
  // Launch, a conversion's "Launch from it").
  image?: string;
}) {
  const [catalog, setCatalog] = useState<Image[]>([]);
  // Whether the catalog was read (or failed): the empty state waits for it.
  const [catalogRead, setCatalogRead] = useState(false);
  const [family, setFamily] = useState('');
  const [ref, setRef] = useState('');
  const [typed, setTyped] = useState('');
  const [name, setName] = useState('');
  const [cpu, setCpu] = useState(1);
  const [memGiB, setMemGiB] = useState(1);
  const [fgpu, setFgpu] = useState(0);
  const [count, setCount] = useState(1);
  // A cluster session's containers (a number field's text, checked like
  // Priority) and where they may go; the resources above are each one's.
  const [clusterSize, setClusterSize] = useState('1');
  const [clusterMode, setClusterMode] = useState<ClusterMode>('single-node');
  const [batch, setBatch] = useState(false);
  const [command, setCommand] = useState('');
  // The full launcher: a batch session's start time (datetime-local) and
  // timeout (minutes), environment variables, preopen ports; the presets
  // (GET /v1/presets), the recent launches, and whether the review step
  // is shown.
  const [startsAt, setStartsAt] = useState('');
  const [timeoutMin, setTimeoutMin] = useState('');
  const [envLines, setEnvLines] = useState('');
  const [portsText, setPortsText] = useState('');
  const [presets, setPresets] = useState<Preset[]>([]);
  const [recent, setRecent] = useState<Recent[]>([]);
  const [reviewing, setReviewing] = useState(false);
  // The fGPU of a re-launch, kept for the image change it also makes
  // (which sets the GPU to the image's minimum).
  const refillGpu = useRef<number | null>(null);
  const [root, setRoot] = useState(false);
  const [project, setProject] = useState('');
  const [group, setGroup] = useState('');
  const [priority, setPriority] = useState('0');
  // Preemptible follows the type (batch: yes, interactive: no) until the
  // user sets it.
  const [preemptible, setPreemptible] = useState<boolean | null>(null);
  // Whether the user's policy allows root: undefined while unknown (the
  // option is offered and the server decides, with a 403 shown as is).
  const [rootAllowed, setRootAllowed] = useState<boolean | undefined>(undefined);
  const [step, setStep] = useState(0.1);
  const [estimate, setEstimate] = useState<Estimate | null>(null);
  const [estimateError, setEstimateError] = useState<string | null>(null);
  const estimateSeq = useRef(0);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [mounts, setMounts] = useState<Mounts>({ specs: [], error: null });
  const uid = useId();

  const alive = props.nodes.filter((n) => n.status === 'ALIVE');
  const pool = alive.length ? alive : props.nodes;
  const nodeCpu = Math.max(1, ...pool.map((n) => n.capacity.cpu));
  const nodeMem = Math.max(1, ...pool.map((n) => Math.floor((n.capacity.mem / GiB) * 4) / 4));
  const nodeGpu = Math.max(0, ...pool.map((n) => n.capacity.fgpu ?? 0));
  // What may be asked: one session runs on one node, and never beyond the
  // user's policy (a request over it would wait for ever). Each slider
  // stops at the smaller and says which it is.
  const pol = props.resources?.policy;
  const used = props.resources?.used;
  const quarter = (v: number) => Math.floor(v * 4) / 4;
  const capBy = (node: number, policy: number | null | undefined) =>
    policy != null && policy < node ? { max: policy, by: 'policy' as const } : { max: node, by: 'node' as const };
  const cpuCap = capBy(nodeCpu, pol?.max_cpu != null ? quarter(pol.max_cpu) : null);
  const memCap = capBy(nodeMem, pol?.max_mem != null ? quarter(pol.max_mem / GiB) : null);
  const gpuCap = capBy(nodeGpu, pol?.max_fgpu);
  const maxCpu = Math.max(0.25, cpuCap.max);
  const maxMem = Math.max(0.25, memCap.max);
  const maxGpu = Math.max(0, gpuCap.max);
  const maxCount = Math.max(1, Math.min(20, pol?.max_sessions ?? 20));
  const capHint = (what: string, cap: { max: number; by: 'policy' | 'node' }, usedNow: number | undefined, fmt: (n: number) => string) =>
    (perContainer ? `Per container: ${perContainer} containers get this each. ` : '') + (cap.by === 'policy'
      ? `Your policy allows at most ${fmt(cap.max)} ${what} in total${usedNow ? ` (${fmt(usedNow)} in use now)` : ''}.`
      : `Up to ${fmt(cap.max)}: the most ${what} one node has (${perContainer ? 'each container' : 'a session'} runs on one node).`);

  const envs = families(launchable(catalog, props.user));
  const badges = envBadges(envs);
  const env = envs.find((f) => f.family === family);
  const typedImage = typed.trim() ? catalog.find((i) => i.ref === typed.trim() || i.aliases?.includes(typed.trim())) : undefined;
  const chosen = typed.trim() ? typedImage : env?.images.find((i) => i.ref === ref);
  const min = chosen?.min ?? { cpu: 0, mem: 0, fgpu: 0 };
  const minCpu = Math.min(maxCpu, Math.max(0.25, Math.ceil(min.cpu * 4) / 4));
  const minMem = Math.min(maxMem, Math.max(0.25, Math.ceil((min.mem / GiB) * 4) / 4));
  const minGpu = Math.min(maxGpu, min.fgpu);
  const rootOn = root && rootAllowed !== false;

  // A cluster session of N containers, each with the resources above:
  // what keeps it from ever starting, said under the Containers field.
  // Checked against the nodes' capacity (not what is free now: the
  // estimate says whether it waits), in the chosen resource group when one
  // is chosen: single-node needs one node with room for all N; multi-node
  // places each container on some node, so the nodes' room adds up. The
  // user's policy caps the whole session, every container together.
  const clusterProblem = (): string | undefined => {
    const n = cluster;
    const nodes = group ? pool.filter((x) => (x.group ?? 'default') === group) : pool;
    const fitsOn = (x: Node) => Math.min(
      Math.floor(x.capacity.cpu / cpu + 1e-9),
      Math.floor(x.capacity.mem / memBytes + 1e-9),
      fgpu > 0 ? Math.floor((x.capacity.fgpu ?? 0) / fgpu + 1e-9) : Infinity);
    const each = fmtConfig({ cpu, mem: memBytes, fgpu });
    if (nodes.length) {
      if (clusterMode === 'single-node') {
        const best = Math.max(...nodes.map(fitsOn));
        if (best < n) return `Single-node: all ${n} containers must fit one node's capacity, and no node's capacity holds more than ${best} container${best === 1 ? '' : 's'} of ${each}. Ask for less per container, fewer containers, or multi-node.`;
      } else {
        const all = nodes.reduce((a, x) => a + fitsOn(x), 0);
        if (all < n) return `Multi-node: the nodes${group ? ` of group ${group}` : ''} have room for ${all} container${all === 1 ? '' : 's'} of ${each} in all (each runs on one node); ${n} are asked.`;
      }
    }
    const over = (per: number, max: number | null | undefined, f: (v: number) => string) =>
      max != null && per * n > max + 1e-9 ? `${n} containers of ${f(per)} are ${f(per * n)}, over your policy's ${f(max)} in total.` : undefined;
    return over(cpu, pol?.max_cpu, (v) => `${fmtNum(v)} CPU`) ?? over(memBytes, pol?.max_mem, fmtBytes)
      ?? over(fgpu, pol?.max_fgpu, (v) => `${fmtNum(v)} fGPU`);
  };

  // What is wrong with the request as it stands, said next to its field
  // while the user types; Launch stays off until it is right. The image's
  // minimum is the catalog's (the server refuses below it with 400).
  const memBytes = Math.round(memGiB * 1024) * MiB;
  const problems: { cpu?: string; mem?: string; fgpu?: string; count?: string; cluster?: string; command?: string; priority?: string;
    env?: string; ports?: string; startsAt?: string; timeout?: string } = {};
  if (!(cpu > 0)) problems.cpu = 'CPU must be more than 0.';
  else if (cpu < min.cpu - 1e-9) problems.cpu = `This image needs at least ${fmtNum(min.cpu)} CPU; ${fmtNum(cpu)} is below it.`;
  if (memBytes < 6 * MiB) problems.mem = 'Memory must be at least 6 MiB.';
  else if (memBytes < min.mem) problems.mem = `This image needs at least ${fmtSize(min.mem)}; ${fmtSize(memBytes)} is below it.`;
  if (!(fgpu >= 0)) problems.fgpu = 'GPU cannot be negative.';
  else if (fgpu < min.fgpu - 1e-9) problems.fgpu = `This image needs at least ${fmtNum(min.fgpu)} fGPU; ${fmtNum(fgpu)} is below it.`;
  if (!Number.isInteger(count) || count < 1 || count > 100) problems.count = 'Sessions must be a whole number from 1 to 100.';
  if (batch && !command.trim()) problems.command = 'A batch session needs a startup command: it runs it and ends with it.';
  const envParsed = parseEnv(envLines);
  const portsParsed = parsePorts(portsText);
  if (envParsed.error) problems.env = envParsed.error;
  if (portsParsed.error) problems.ports = portsParsed.error;
  const startDate = batch ? localTime(startsAt) : null;
  if (batch && startsAt && !startDate) problems.startsAt = 'Give a date and a time, or leave it empty to start as soon as it fits.';
  else if (startDate && startDate.getTime() - Date.now() > 366 * 86400e3) problems.startsAt = 'At most a year ahead.';
  const timeoutS = batch && timeoutMin.trim() ? Math.round(Number(timeoutMin.trim()) * 60) : 0;
  if (batch && timeoutMin.trim() && (!Number.isFinite(timeoutS) || timeoutS < 1 || timeoutS > 30 * 86400))
    problems.timeout = 'Timeout must be minutes from 0.02 to 43200 (30 days), or empty for none.';
  const prio = Number(priority.trim());
  if (priority.trim() === '' || !Number.isInteger(prio) || prio < 0 || prio > 100) problems.priority = 'Priority must be a whole number from 0 to 100.';
  const nContainers = Number(clusterSize.trim());
  const cluster = clusterSize.trim() !== '' && Number.isInteger(nContainers) && nContainers >= 1 && nContainers <= 16 ? nContainers : 0;
  const perContainer = cluster > 1 ? cluster : 0;
  if (!cluster) problems.cluster = 'Containers must be a whole number from 1 to 16.';
  else if (cluster * count > 100) problems.cluster = `Sessions × Containers is at most 100; ${count} × ${cluster} is ${count * cluster}.`;
  else if (cluster > 1 && !problems.cpu && !problems.mem && !problems.fgpu) problems.cluster = clusterProblem();
  // A cluster session is never preemptible (the API refuses it: its
  // containers start and end together), whatever the type's default.
  const preemptOn = perContainer ? false : preemptible ?? batch;
  const blocked = problems.cpu ?? problems.mem ?? problems.fgpu ?? problems.count ?? problems.cluster ?? problems.command ?? problems.priority ??
    problems.startsAt ?? problems.timeout ?? problems.env ?? problems.ports ??
    (!(typed.trim() || ref) ? (envs.length ? 'Choose an environment and a version, or type an image name.' : 'Type an image name.') : null);

  // Picking from the lists is a choice over a name typed before.
  const pickFamily = (f: Family) => {
    setFamily(f.family);
    setRef(f.images[0]?.ref ?? '');
    setTyped('');
  };
  const pickVersion = (r: string) => {
    setRef(r);
    setTyped('');
  };

  // Before the first paint of the open dialog (a layout effect), so that
  // nothing typed into it is overwritten by the remembered choices.
  useLayoutEffect(() => {
    if (!props.open) return;
    setError(null);
    // Each launch starts from the lists: a name typed for the last one
    // (and its session name) would be reused unseen. So would a count of
    // sessions, a batch command or root: each launch starts without them.
    setTyped(props.image ?? '');
    setName('');
    setCount(1);
    setClusterSize('1');
    setClusterMode('single-node');
    setBatch(false);
    setCommand('');
    setStartsAt('');
    setTimeoutMin('');
    setEnvLines('');
    setPortsText('');
    setReviewing(false);
    refillGpu.current = null;
    setRoot(false);
    setFgpu(0);
    setPriority('0');
    setPreemptible(null);
    setGroup('');
    // The switcher's project, else the one the server would pick: the
    // user's one team project, else their personal one ('' when unknown:
    // the server picks).
    const mineP = props.resources?.projects ?? [];
    const team = mineP.filter((p) => !p.personal);
    setProject(props.project ?? (team.length === 1 ? team[0].name : mineP.find((p) => p.personal)?.name ?? ''));
    const last = readLast();
    setEstimate(null);
    setEstimateError(null);
    setRootAllowed(props.resources?.policy.allow_root);
    api2.resources().then((r) => setRootAllowed(typeof r.policy.allow_root === 'boolean' ? r.policy.allow_root : undefined))
      .catch(() => { /* unknown: the server decides */ });
    // The admins' presets, and the user's recent launches to re-launch
    // (neither is needed to launch: without them the dialog still works).
    presetsApi.list().then((r) => setPresets(r.presets)).catch(() => setPresets([]));
    // Only the user's own (an admin's list is everyone's), newest first,
    // one page: enough for the few distinct launches shown.
    call<{ sessions: Recent[] }>('GET', `/api/v1/sessions?all=1&order=newest&limit=50${props.user ? `&owner=${encodeURIComponent(props.user.email)}` : ''}`)
      .then((r) => setRecent(recentLaunches(r.sessions ?? [], props.user?.email))).catch(() => setRecent([]));
    setCatalogRead(false);
    api.images().then((r) => {
      setCatalog(r.images);
      setCatalogRead(true);
      const envs0 = families(launchable(r.images, props.user));
      // The last environment and version chosen, when still offered;
      // else the first. A choice is made for the user, never typed for
      // them: the free field stays theirs.
      const prev = envs0.find((f) => f.family === last.family);
      const first = prev ?? envs0[0];
      if (first) {
        setFamily(first.family);
        setRef(prev && prev.images.some((i) => i.ref === last.ref) ? last.ref! : first.images[0].ref);
      } else {
        // Nothing to offer: no choice of an earlier opening stays behind
        // (it would be launched, unseen, from an empty dialog).
        setFamily('');
        setRef('');
      }
    }).catch(() => { setCatalog([]); setCatalogRead(true); });   // no catalog: the free field takes any name
    api.config().then((c) => {
      const q = Number(c.fgpu_quantum);
      if (q > 0) setStep(q >= 0.1 || Math.abs(Math.round(0.1 / q) - 0.1 / q) > 1e-9 ? q : 0.1);
    }).catch(() => { /* keep the default step */ });
    const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
    setCpu((v) => Math.min(num(last.cpu) ?? v, maxCpu));
    setMemGiB((v) => Math.min(num(last.memGiB) ?? v, maxMem));
  }, [props.open]);

  // The GPU starts at the chosen image's minimum (0 for an image that
  // needs none), at each opening and at each other image chosen; a name
  // typed that is no image of the catalog leaves it as it is.
  useEffect(() => {
    if (!props.open || !chosen) return;
    // A re-launch's own fGPU rather than the minimum, once.
    setFgpu(refillGpu.current !== null ? Math.max(minGpu, Math.min(refillGpu.current, maxGpu)) : minGpu);
    refillGpu.current = null;
  }, [props.open, chosen?.ref, minGpu]);

  // The chosen image's minimum lifts the values below it.
  useEffect(() => {
    setCpu((v) => Math.max(v, minCpu));
    setMemGiB((v) => Math.max(v, minMem));
  }, [minCpu, minMem]);

  // The request as it stands, for the estimate and the launch; null
  // while something is wrong with it (said next to the field).
  const request = (): Record<string, unknown> | null => {
    const image = typed.trim() || ref;
    if (!image || blocked) return null;
    const req: Record<string, unknown> = {
      image, count,
      resources: { cpu: fmtNum(cpu), mem: `${Math.round(memGiB * 1024)}MiB`, fgpu: fmtNum(fgpu) },
    };
    // Only for a cluster: a one-container request stays as it was, which
    // a manager older than cluster sessions takes too.
    if (cluster > 1) { req.cluster_size = cluster; req.cluster_mode = clusterMode; }
    if (name.trim()) req.name = name.trim();
    if (batch) req.type = 'batch';
    if (command.trim()) req.startup_command = command;
    if (rootOn) req.root = true;
    if (project) req.project = project;
    if (group) req.group = group;
    if (prio) req.priority = prio;
    req.preemptible = preemptOn;
    if (Object.keys(envParsed.env).length) req.env = envParsed.env;
    if (portsParsed.ports.length) req.preopen_ports = portsParsed.ports;
    if (startDate) req.starts_at = startDate.toISOString();
    if (timeoutS) req.batch_timeout = timeoutS;
    return req;
  };

  // Will it start now or wait? POST /v1/sessions?dry_run=1, 400 ms after
  // the last change (not on every step of a slider); an older answer
  // that arrives late is dropped.
  useEffect(() => {
    if (!props.open) return;
    const req = request();
    const mine = ++estimateSeq.current;
    // The answer for the request before this change no longer holds: the
    // estimate says "Checking" until the new one comes.
    setEstimate(null);
    setEstimateError(null);
    if (!req) return;
    const t = window.setTimeout(() => {
      api2.estimate(req).then((r) => {
        if (estimateSeq.current !== mine) return;
        setEstimate(r);
        setEstimateError(null);
      }).catch((err) => {
        if (estimateSeq.current !== mine) return;
        setEstimate(null);
        setEstimateError((err as Error).message);
      });
    }, 400);
    return () => clearTimeout(t);
  }, [props.open, typed, ref, cpu, memGiB, fgpu, count, cluster, clusterMode, name, batch, command, rootOn, project, group, prio, preemptOn,
    envLines, portsText, startsAt, timeoutMin]);

  // A preset's amounts, each still capped by what may be asked.
  const presetValues = (p: Preset) => ({
    cpu: Math.max(minCpu, Math.min(p.resources.cpu, maxCpu)),
    memGiB: Math.max(minMem, Math.min(Math.round((p.resources.mem / GiB) * 4) / 4, maxMem)),
    fgpu: Math.max(minGpu, Math.min(p.resources.fgpu, maxGpu)),
  });
  const applyPreset = (p: Preset) => {
    const v = presetValues(p);
    setCpu(v.cpu);
    setMemGiB(v.memGiB);
    setFgpu(v.fgpu);
  };

  // Re-launch: one of the recent sessions' configuration into the form
  // (not its name, which an active session may still hold, nor its start
  // time, which has passed, nor its folders, which the folder list keeps).
  const relaunch = (s: Recent) => {
    const fam = envs.find((f) => f.images.some((i) => i.ref === s.image));
    const same = (fam ? fam.images.find((i) => i.ref === s.image)?.ref : undefined) === chosen?.ref && !typed.trim();
    if (fam) { setFamily(fam.family); setRef(s.image); setTyped(''); } else setTyped(s.image);
    setCpu(Math.min(s.resources.cpu, maxCpu));
    setMemGiB(Math.min(Math.round((s.resources.mem / GiB) * 4) / 4, maxMem));
    setFgpu(Math.min(s.resources.fgpu, maxGpu));
    refillGpu.current = same ? null : s.resources.fgpu;
    setName('');
    setCount(1);
    setBatch(s.type === 'batch');
    setCommand(s.startup_command ?? '');
    setStartsAt('');
    setTimeoutMin(s.batch_timeout ? String(Math.round((s.batch_timeout / 60) * 100) / 100) : '');
    setEnvLines(envText(s.env));
    setPortsText((s.preopen_ports ?? []).join(', '));
    setRoot(!!s.root && rootAllowed !== false);
    setClusterSize(String(s.cluster_size ?? 1));
    setClusterMode(s.cluster_mode ?? 'single-node');
    if (s.project && projectList.some((p) => p.name === s.project)) setProject(s.project);
    setGroup(s.group && s.group !== 'default' ? s.group : '');
    setPriority(String(s.priority ?? 0));
    setPreemptible(typeof s.preemptible === 'boolean' ? s.preemptible : null);
    setReviewing(false);
    setError(null);
  };

  const launch = async (e: Event) => {
    e.preventDefault();
    setError(null);
    const req = request();
    if (!req) { setError(blocked ?? 'Choose an environment and a version, or type an image name.'); return; }
    if (mounts.error) { setError(mounts.error); return; }
    // The form's button shows the review; the review's launches.
    if (!reviewing) {
      setReviewing(true);
      // To the summary's heading, which a screen reader then reads: the
      // button under the focus is Launch now, and a second Enter at once
      // would launch unread.
      requestAnimationFrame(() => document.getElementById(`${uid}-review`)?.focus());
      return;
    }
    if (mounts.specs.length) req.mounts = mounts.specs;
    setBusy(true);
    try {
      await api.launch(req);
      writeLast({ family: typed.trim() ? undefined : family, ref: typed.trim() ? undefined : ref, cpu, memGiB });
      props.onLaunched();
    } catch (err) {
      // The server's words, as they are. A 403 for root means the policy
      // changed since the dialog read it: read it again, so that the
      // option says why it is off.
      setError(`Cannot launch: ${(err as Error).message}`);
      if (err instanceof ApiError && err.status === 403 && req.root) {
        // Back to the form, where the option shows why it is off.
        setReviewing(false);
        api2.resources().then((r) => {
          if (r.policy.allow_root === false) { setRootAllowed(false); setRoot(false); }
        }).catch(() => { /* the error above says it */ });
      }
    } finally {
      setBusy(false);
    }
  };

  // A name for the Image field's placeholder: never one that does not
  // exist. With environments offered, a neutral hint; else an image of the
  // catalog the user may launch, if any.
  const nameable = catalog.filter((i) => (!i.status || i.status === 'ready') && i.visibility !== 'hidden' &&
    (i.visibility !== 'private' || i.owner === props.user?.email));
  const placeholder = envs.length ? 'or type an image name or alias'
    : nameable.length ? `e.g. ${nameable[0].ref}` : 'an image name, NAME:TAG';

  const overridden = typed.trim() !== '';
  // The projects offered, and the resource groups the nodes are in (a
  // select only when there are several).
  const projectList = props.projects ?? [];
  const groups = [...new Set(props.nodes.map((n) => n.group).filter((g): g is string => !!g))].sort();
  // The chosen project's quota in words: what a session there must fit beside the user's policy.
  const pq = projectList.find((p) => p.name === project);
  const quotaWords = (() => {
    if (!pq?.quota) return 'Its quota holds beside your own policy.';
    const q = pq.quota, u = pq.used;
    const parts: string[] = [];
    const part = (lim: number | null, used: number | undefined, f: (n: number) => string) => {
      if (lim !== null && lim > 0) parts.push(`${f(lim)}${used !== undefined ? ` (${f(Math.round(used * 100) / 100)} in use)` : ''}`);
    };
    part(q.cpu, u?.cpu, (n) => `${fmtNum(n)} CPU`);
    part(q.mem, u?.mem, fmtBytes);
    part(q.fgpu, u?.fgpu, (n) => `${fmtNum(n)} fGPU`);
    part(q.sessions, u?.sessions, (n) => `${n} session${n === 1 ? '' : 's'}`);
    return parts.length ? `Its quota, beside your own policy: ${parts.join(', ')}.` : 'Its quota sets no limit; your own policy holds.';
  })();
  // The review step: everything chosen, as it will be asked, before
  // Launch. Called as a function (not a component of its own, which
  // would be a new one at each render and lose the focus): it reads the
  // form's state as it stands.
  const reviewView = () => {
    const rows: [string, string][] = [
      ['Image', typed.trim() || ref],
      ['Name', name.trim() || '(generated)'],
      ...(projectList.length > 1 || project ? [['Project', project || 'default'] as [string, string]] : []),
      ['Resource group', group || 'default'],
      [perContainer ? 'Resources (each container)' : 'Resources', fmtConfig({ cpu, mem: memBytes, fgpu })],
      ['Sessions', String(count)],
      ...(perContainer ? [['Containers', `${perContainer}, ${clusterMode}`] as [string, string]] : []),
      ['Type', batch ? 'batch: ends with its command' : 'interactive'],
      ['Startup command', command.trim() || 'none'],
      ...(batch ? [['Start at', startDate ? startDate.toLocaleString() : 'as soon as it fits'] as [string, string],
        ['Timeout', timeoutS ? `${fmtNum(Math.round((timeoutS / 60) * 100) / 100)} min` : 'none'] as [string, string]] : []),
      ['Environment variables', Object.keys(envParsed.env).length ? Object.entries(envParsed.env).map(([k, v]) => `${k}=${v}`).join('\n') : 'none'],
      ['Preopen ports', portsParsed.ports.length ? portsParsed.ports.join(', ') : 'none'],
      ['Folders', mounts.specs.length ? mounts.specs.join(', ') : 'none'],
      ['Runs as', rootOn ? 'root' : 'the image\u2019s work user (uid 1000)'],
      ['Priority', `${prio}${preemptOn ? ', preemptible' : ''}`],
    ];
    return (
      <section class="launch-review" aria-labelledby={`${uid}-review`} data-testid="review">
        <h3 id={`${uid}-review`} tabIndex={-1}>Review</h3>
        <p class="hint">The session{count > 1 ? 's' : ''} as {count > 1 ? 'they' : 'it'} will be asked for. Back changes it; Launch starts {count > 1 ? 'them' : 'it'}.</p>
        <dl>
          {rows.map(([k, v]) => <div key={k}><dt>{k}</dt><dd>{v}</dd></div>)}
        </dl>
      </section>
    );
  };
  return (
    <Dialog open={props.open} title="Start a session" onClose={props.onClose}>
      <form onSubmit={launch} class="launch" noValidate>
        <div class="launch-body">
        {reviewing && reviewView()}
        <div class="launch-cols" hidden={reviewing}>
        <div class="launch-image">
        {envs.length > 0 && (
          <fieldset class={`picker envs${overridden ? ' dimmed' : ''}`}>
            <legend>Environment</legend>
            <div class="env-grid">
              {envs.map((f) => {
                const selected = f.family === family;
                return (
                  <label key={f.family} class={`env${selected ? ' selected' : ''}`}>
                    <input type="radio" name="environment" value={f.family} checked={selected}
                      onChange={() => pickFamily(f)} />
                    <span class={`env-badge${f.other ? ' other' : ''}`} aria-hidden="true"
                      style={f.other ? undefined : { background: `linear-gradient(135deg, hsl(${familyHue(f.family)} 62% 42%), hsl(${(familyHue(f.family) + 40) % 360} 58% 38%))` }}>{badges.get(f.family)}</span>
                    <span class="env-text">
                      <span class="env-title">{f.title}</span>
                      <span class="env-sub">
                        {f.other ? `${f.images.length} without labels` : familyLine(f)}
                      </span>
                    </span>
                  </label>
                );
              })}
            </div>
          </fieldset>
        )}
        {envs.length === 0 && catalogRead && (
          // No environment to offer: say why and what to do, rather than
          // show an Image field alone.
          <div class="env-empty" role="note" data-testid="env-empty">
            <strong>No environments yet.</strong> No node has an image with Tessera's labels
            {nameable.length ? ` (the nodes have ${nameable.length} other image${nameable.length === 1 ? '' : 's'}: type a name below)` : ''}.
            An administrator adds environments by building one of Tessera's image recipes
            (<code>tessera image build images/python/3.11.recipe</code>, docs/images.md) or
            pulling a labelled image; meanwhile any image on the nodes can be typed below.
          </div>
        )}
        {env && (
          <fieldset class={`picker versions${overridden ? ' dimmed' : ''}`}>
            <legend>Version</legend>
            <small class="hint version-note" data-testid="version-note">Versions as the image's labels give them: its packages' versions, which a framework may report otherwise (Debian's PyTorch 1.13.1 calls itself 1.13.0a0).</small>
            <div class="version-list">
              {env.images.map((img) => (
                <label key={img.ref} class={`version${img.ref === ref ? ' selected' : ''}`}>
                  <input type="radio" name="version" value={img.ref} checked={img.ref === ref}
                    onChange={() => pickVersion(img.ref)} />
                  <span class="version-tag">{env.other ? img.name : img.tag || 'latest'}</span>
                  <span class="version-fw" title={env.other ? undefined : 'from the image\u2019s labels (its packages\u2019 versions)'}>{env.other ? img.tag : frameworksLine(img, 4) || img.ref}</span>
                  <span class="version-meta">
                    {img.cuda && <span class="tag-cuda"
                      title={`Built for CUDA ${img.cuda}: it uses a GPU when the session has one`}>CUDA {img.cuda}</span>}
                    {img.visibility === 'private' && <span class="tag-private">private</span>}
                    {fmtMin(img.min)}{img.size ? `${fmtMin(img.min) ? ' · ' : ''}${fmtSize(img.size)}` : ''}
                  </span>
                </label>
              ))}
            </div>
          </fieldset>
        )}
        <TextField label="Image" value={typed} onInput={setTyped} list="tessera-images"
          placeholder={placeholder}
          hint={overridden ? 'This name is launched instead of the environment above.'
            : 'Your private images, an alias, or any image on the nodes.'} />
        <datalist id="tessera-images">
          {launchable(catalog, props.user).map((i) => <option key={i.ref} value={i.ref} />)}
        </datalist>
        </div>
        <div class="launch-resources">
        {recent.length > 0 && (
          <fieldset class="presets recent" data-testid="recent">
            <legend>Re-launch a recent session</legend>
            {recent.map((r) => (
              <button key={r.id} type="button" class="preset" onClick={() => relaunch(r)}
                aria-label={`Re-launch ${r.name}: ${r.image}, ${fmtConfig(r.resources)}${r.type === 'batch' ? ', batch' : ''}`}>
                <span class="preset-name">{r.name}</span>
                <span class="preset-what">{r.image} · {fmtConfig(r.resources)}{r.type === 'batch' ? ' · batch' : ''}</span>
              </button>
            ))}
          </fieldset>
        )}
        <TextField label="Name" value={name} onInput={setName} placeholder="optional" />
        {projectList.length > 1 && (
          <div class="field">
            <label for={`${uid}-project`}>Project</label>
            <select id={`${uid}-project`} value={project} onChange={(e) => setProject((e.target as HTMLSelectElement).value)}
              aria-describedby={`${uid}-project-hint`}>
              {!project && <option value="">Default</option>}
              {projectList.map((p) => <option key={p.name} value={p.name}>{p.name}{p.personal ? ' (personal)' : ''}</option>)}
            </select>
            <small class="hint" id={`${uid}-project-hint`}>{quotaWords}</small>
          </div>
        )}
        {groups.length > 1 && (
          <div class="field">
            <label for={`${uid}-group`}>Resource group</label>
            <select id={`${uid}-group`} value={group} onChange={(e) => setGroup((e.target as HTMLSelectElement).value)}>
              <option value="">Default</option>
              {groups.map((g) => <option key={g} value={g}>{g}</option>)}
            </select>
            <small class="hint">The nodes it may run on; a project may allow only some groups.</small>
          </div>
        )}
        {presetsFor(presets, group).length > 0 && (
          <fieldset class="presets">
            <legend>Presets</legend>
            {presetsFor(presets, group).map((p) => {
              const v = presetValues(p);
              const on = Math.abs(cpu - v.cpu) < 1e-9 && Math.abs(memGiB - v.memGiB) < 1e-9 && Math.abs(fgpu - v.fgpu) < 1e-9;
              return (
                <button key={p.name} type="button" class={`preset${on ? ' selected' : ''}`} aria-pressed={on}
                  disabled={p.resources.fgpu > 0 && maxGpu === 0} onClick={() => applyPreset(p)}>
                  <span class="preset-name">{p.name}</span><span class="preset-what">{presetWhat(p)}</span>
                </button>
              );
            })}
          </fieldset>
        )}
        <SliderField label="CPU" value={cpu} min={minCpu} max={maxCpu} step={0.25} unit="cores" onChange={setCpu}
          error={problems.cpu}
          hint={[min.cpu ? `This image needs at least ${fmtNum(min.cpu)} CPU.` : '',
            capHint('CPU', cpuCap, used?.cpu, (n) => `${fmtNum(n)}`)].filter(Boolean).join(' ')} />
        <SliderField label="Memory" value={memGiB} min={minMem} max={maxMem} step={0.25} unit="GiB" onChange={setMemGiB}
          error={problems.mem}
          hint={[min.mem ? `This image needs at least ${fmtSize(min.mem)}.` : '',
            capHint('memory', memCap, used ? used.mem / GiB : undefined, (n) => `${fmtNum(Math.round(n * 100) / 100)} GiB`)].filter(Boolean).join(' ')} />
        <SliderField label="GPU" value={fgpu} min={minGpu} max={maxGpu} step={step} unit="fGPU" onChange={setFgpu}
          error={problems.fgpu}
          disabled={maxGpu === 0} hint={[min.fgpu ? `This image needs at least ${fmtNum(min.fgpu)} fGPU.` : '',
            maxGpu === 0 ? (gpuCap.by === 'policy' && nodeGpu > 0 ? 'Your policy allows no GPU.' : 'No node offers a GPU.')
              : capHint('fGPU', gpuCap, used?.fgpu, (n) => `${fmtNum(n)}`)].filter(Boolean).join(' ')} />
        <SliderField label="Sessions" value={count} min={1} max={maxCount} step={1} onChange={(v) => setCount(Math.round(v))}
          error={problems.count}
          hint={pol?.max_sessions != null ? `Your policy allows ${pol.max_sessions} session${pol.max_sessions === 1 ? '' : 's'} at once${used?.sessions ? ` (${used.sessions} now)` : ''}.` : undefined} />
        <div class="launch-cluster">
          <TextField label="Containers" type="number" value={clusterSize} onInput={setClusterSize} error={problems.cluster}
            hint={perContainer ? `One session of ${perContainer} containers (main1, sub1, ...), started together or not at all, each with the CPU, memory and GPU above; they reach each other by name, for distributed training.`
              : '1 to 16. More than 1 makes a cluster session for distributed training: its containers start together, each with the resources above.'} />
          {perContainer > 0 && (
            <fieldset class="session-kind placement">
              <legend>Placement</legend>
              <label class="check-inline"><input type="radio" name="cluster-mode" value="single-node" checked={clusterMode === 'single-node'}
                onChange={() => setClusterMode('single-node')} /> Single node</label>
              <label class="check-inline"><input type="radio" name="cluster-mode" value="multi-node" checked={clusterMode === 'multi-node'}
                onChange={() => setClusterMode('multi-node')} /> Multi-node</label>
              <small class="hint">{clusterMode === 'single-node' ? 'All containers on one node: it needs room for all of them.'
                : 'The containers may be spread over several nodes, over a network Docker provides between the hosts.'}</small>
            </fieldset>
          )}
        </div>
        <fieldset class="session-kind">
          <legend>Type</legend>
          <label class="check-inline"><input type="radio" name="session-type" value="interactive" checked={!batch}
            onChange={() => setBatch(false)} /> Interactive</label>
          <label class="check-inline"><input type="radio" name="session-type" value="batch" checked={batch}
            onChange={() => setBatch(true)} /> Batch</label>
          <small class="hint">{batch ? 'Runs its startup command and ends with it: TERMINATED when it exits 0, else ERROR.'
            : 'Runs until you end it.'}</small>
        </fieldset>
        <TextField label="Startup command" value={command} onInput={setCommand} mono
          placeholder={batch ? 'e.g. python3 train.py' : 'optional'} error={problems.command}
          hint={batch ? 'Run with /bin/sh -c in the session.' : 'Optional: run with /bin/sh -c after the session starts.'} />
        {batch && (
          <div class="launch-batch">
            <div class={`field${problems.startsAt ? ' invalid' : ''}`}>
              <label for={`${uid}-starts`}>Start at</label>
              <input id={`${uid}-starts`} type="datetime-local" value={startsAt} min={toLocalInput(new Date())}
                aria-invalid={problems.startsAt ? true : undefined} aria-describedby={`${uid}-starts-hint`}
                onInput={(e) => setStartsAt((e.target as HTMLInputElement).value)} />
              {problems.startsAt && <small class="error field-error">{problems.startsAt}</small>}
              <small class="hint" id={`${uid}-starts-hint`}>{startDate && startDate.getTime() < Date.now()
                ? 'This time has passed: it starts as soon as it fits.'
                : 'Optional, your local time: it waits, PENDING, until then.'}</small>
            </div>
            <TextField label="Timeout (minutes)" type="number" value={timeoutMin} onInput={setTimeoutMin} error={problems.timeout}
              placeholder="none" hint="Optional: once it has run this long it is ended, as ERROR." />
          </div>
        )}
        <div class={`field${problems.env ? ' invalid' : ''}`}>
          <label for={`${uid}-env`}>Environment variables</label>
          <textarea id={`${uid}-env`} class="mono" rows={2} value={envLines} placeholder="NAME=value, one a line"
            aria-invalid={problems.env ? true : undefined} aria-describedby={`${uid}-env-hint`}
            onInput={(e) => setEnvLines((e.target as HTMLTextAreaElement).value)} />
          {problems.env && <small class="error field-error">{problems.env}</small>}
          <small class="hint" id={`${uid}-env-hint`}>Set in the session, for its command and terminals.</small>
        </div>
        <TextField label="Preopen ports" value={portsText} onInput={setPortsText} error={problems.ports} placeholder="e.g. 8080, 6006"
          hint="Ports listed as the session's apps from the start (TensorBoard, a web server of yours), opened from its Apps like any other." />
        <div class="launch-priority">
          <TextField label="Priority" type="number" value={priority} onInput={setPriority} error={problems.priority}
            hint="0 to 100; higher starts first and may preempt lower preemptible sessions (your policy's max_priority caps it)." />
          <div class="field check">
            <label class="check-inline">
              <input type="checkbox" checked={preemptOn} aria-describedby={`${uid}-preempt`} disabled={perContainer > 0}
                onChange={(e) => setPreemptible((e.target as HTMLInputElement).checked)} />
              Preemptible
            </label>
            <small class="hint" id={`${uid}-preempt`}>{perContainer ? 'A cluster session is never preempted: its containers start and end together.' : preemptOn
              ? 'A higher-priority session may stop it to take its room; it is then queued again (PREEMPTED, then PENDING).'
              : 'Never stopped for another session.'}{preemptible === null && !perContainer ? ` Default for ${batch ? 'batch' : 'interactive'} sessions.` : ''}</small>
          </div>
        </div>
        <div class="field check root-option">
          <label class="check-inline">
            <input type="checkbox" checked={rootOn} disabled={rootAllowed === false}
              aria-describedby={`${uid}-root`} onChange={(e) => setRoot((e.target as HTMLInputElement).checked)} />
            Run as root
          </label>
          <small class="hint" id={`${uid}-root`}>{rootAllowed === false ? ROOT_FORBIDDEN
            : 'The session\u2019s processes run as root rather than the image\u2019s work user (uid 1000).'}</small>
        </div>
        <FolderPicker open={props.open} onChange={(m) => { setMounts(m); setError(null); }} />
        </div>
        </div>
        </div>
        <div class="launch-foot">
          <div class={`estimate${estimate ? (estimate.fits_now ? ' fits' : ' waits') : blocked || estimateError ? '' : ' checking'}`} role="status" aria-live="polite">
            {blocked ? <span class="hint">Correct the request to see whether it fits.</span>
              : estimateError ? <span class="error">{estimateError}</span>
              : !estimate ? <span class="hint">Checking whether it fits now…</span>
                : estimate.fits_now ? <span><strong>Fits now:</strong> it starts at once.</span>
                  : <span><strong>Will wait:</strong> {estimate.reason ?? 'it waits in the queue'}. It starts by itself when resources free up{prio > 0
                    ? `, or sooner if the scheduler preempts lower-priority preemptible sessions for it (priority ${prio})` : ''}.</span>}
          </div>
          {!blocked && (perContainer > 0 || count > 1) && (
            // What the whole launch asks for: the resources above are per
            // container, and Sessions launches that many of it.
            <p class="hint launch-total" data-testid="launch-total">
              <strong>In all:</strong> {count > 1 ? `${count} sessions × ` : ''}{perContainer ? `${perContainer} containers × ` : ''}
              ({fmtConfig({ cpu, mem: memBytes, fgpu })}) = {fmtConfig({ cpu: cpu * count * Math.max(1, perContainer), mem: memBytes * count * Math.max(1, perContainer), fgpu: fgpu * count * Math.max(1, perContainer) })}
            </p>
          )}
          <ErrorText error={error} />
          <div class="actions">
            {blocked && <span class="launch-why" id={`${uid}-why`}>{blocked}</span>}
            {reviewing ? <Button onClick={() => { setReviewing(false); setError(null); }}>Back</Button>
              : <Button onClick={props.onClose}>Cancel</Button>}
            <Button type="submit" kind="primary" disabled={busy || !!blocked} describedBy={blocked ? `${uid}-why` : undefined}>
              {reviewing ? 'Launch' : 'Review'}</Button>
          </div>
        </div>
      </form>
    </Dialog>
  );
}
