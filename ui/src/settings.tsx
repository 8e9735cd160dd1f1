// The admin's settings: everything `tessera config set` sets (docs/admin.md):
// the scheduler's settings and fGPU, the cluster's addresses (storage
// hosts, registry, app proxy) and agents' log caps, and the per-user and
// default policies. Every change goes to PUT /v1/config/{key}, which validates it;
// its refusal is shown in its words, naming the setting.
import { useEffect, useId, useState } from 'preact/hooks';
import { api, fmtBytes, fmtNum } from './api';
import { Button, Dialog, Email, ErrorText } from './components';

type Config = Record<string, unknown> & { policies?: Record<string, Record<string, unknown>> };

// A choice: each option's label is "value: what it does"; the select
// shows the value alone (a whole label was cut at the field's width) and
// the chosen one's meaning goes under it, with the field's hint.
function Select(props: { label: string; value: string; options: [string, string][]; onChange: (v: string) => void; hint?: string }) {
  const id = useId();
  const split = (l: string) => { const i = l.indexOf(': '); return i < 0 ? [l, ''] : [l.slice(0, i), l.slice(i + 2)]; };
  const meaning = split(props.options.find(([v]) => v === props.value)?.[1] ?? '')[1];
  return (
    <div class="field">
      <label for={id}>{props.label}</label>
      <select id={id} value={props.value} onChange={(e) => props.onChange((e.target as HTMLSelectElement).value)}
        aria-describedby={meaning || props.hint ? `${id}-hint` : undefined}>
        {props.options.map(([v, l]) => <option key={v} value={v} title={l}>{split(l)[0]}</option>)}
      </select>
      {(meaning || props.hint) && <small class="hint" id={`${id}-hint`}>{[meaning && `${meaning[0].toUpperCase()}${meaning.slice(1)}.`, props.hint].filter(Boolean).join(' ')}</small>}
    </div>
  );
}

// inForce: the value in force while the field is empty (the
// configuration file's), said in words under the field: as a greyed
// placeholder it looked like an example to follow.
function Num(props: { label: string; value: string; onInput: (v: string) => void; hint?: string; step?: string; placeholder?: string; type?: string; inForce?: string }) {
  const id = useId();
  const showForce = props.inForce !== undefined && props.value.trim() === '';
  return (
    <div class="field">
      <label for={id}>{props.label}</label>
      <input id={id} type={props.type ?? 'number'} step={props.step ?? 'any'} value={props.value} placeholder={props.placeholder}
        aria-describedby={showForce ? `${id}-force` : undefined}
        onInput={(e) => props.onInput((e.target as HTMLInputElement).value)} />
      {showForce && <small class="in-force" id={`${id}-force`} data-testid="in-force">
        In force: {props.inForce ? <code>{props.inForce}</code> : 'none'} (from the configuration file)</small>}
      {props.hint && <small class="hint">{props.hint}</small>}
    </div>
  );
}

const SCHED_KEYS = ['queue_policy', 'selector', 'fifo_skip_after', 'fgpu_per_device', 'fgpu_quantum', 'folder_trash_days',
  'fairshare_half_life_s', 'preemption', 'preemption_min_runtime_s'];
// Keys a manager older than issue 32 does not have: their fields are not shown then.
const SCHED_NEW_KEYS = new Set(['fairshare_half_life_s', 'preemption', 'preemption_min_runtime_s']);
function fromConfig(config: Config): Record<string, string> {
  const o: Record<string, string> = {};
  for (const k of SCHED_KEYS) o[k] = config[k] === undefined || config[k] === null ? '' : String(config[k]);
  return o;
}

// The scheduler's settings and fGPU. Saves the changed ones, one PUT each.
// The form is made afresh (its key) whenever the stored values change, so
// its fields start from them; a refused value stays typed.
function SchedulerSettings({ config, reload }: { config: Config | null; reload: () => void }) {
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  if (!config) return <div class="skeleton form-skeleton" aria-label="Loading the settings" />;
  return <SchedulerForm key={JSON.stringify(fromConfig(config))} config={config} reload={reload}
    error={error} setError={setError} notice={notice} setNotice={setNotice} />;
}

function SchedulerForm({ config, reload, error, setError, notice, setNotice }: {
  config: Config; reload: () => void; error: string | null; setError: (e: string | null) => void;
  notice: string | null; setNotice: (n: string | null) => void;
}) {
  const [v, setV] = useState<Record<string, string>>(() => fromConfig(config));
  const set = (k: string) => (x: string) => setV((o) => ({ ...o, [k]: x }));
  const save = async (e: Event) => {
    e.preventDefault();
    setError(null);
    setNotice(null);
    const changed = SCHED_KEYS.filter((k) => v[k] !== undefined && v[k] !== String(config[k] ?? '') &&
      !(SCHED_NEW_KEYS.has(k) && config[k] === undefined));
    if (changed.length === 0) { setNotice('Nothing changed.'); return; }
    for (const k of changed) {
      const raw = v[k].trim();
      const isText = k === 'queue_policy' || k === 'selector';
      const value: unknown = k === 'preemption' ? raw === 'true' : isText ? raw : raw === '' ? NaN : Number(raw);
      if (!isText && k !== 'preemption' && (typeof value !== 'number' || Number.isNaN(value))) { setError(`${k}: enter a number.`); return; }
      try {
        await api.setConfig(k, value);
      } catch (err) {
        setError(`${k}: ${(err as Error).message}`);
        reload();
        return;
      }
    }
    setNotice(`Saved: ${changed.join(', ')}.`);
    reload();
  };
  return (
    <form class="card settings-form" onSubmit={save} aria-label="Scheduler and GPU settings">
      <div class="form-grid">
        <Select label="Queue policy" value={v.queue_policy ?? ''} onChange={set('queue_policy')}
          options={[['fifo', 'fifo: first in, first out'], ['lifo', 'lifo: last in, first out'], ['drf', 'drf: dominant resource fairness'],
            ...(config.fairshare_half_life_s !== undefined ? [['fairshare', 'fairshare: projects, then users, by decayed usage against their weights'] as [string, string]] : [])]}
          hint="The order in which waiting sessions are started." />
        <Select label="Node selector" value={v.selector ?? ''} onChange={set('selector')}
          options={[['concentrated', 'concentrated: fill nodes and GPUs first'], ['dispersed', 'dispersed: spread the load']]} />
        <Num label="FIFO skip after (passes)" value={v.fifo_skip_after ?? ''} onInput={set('fifo_skip_after')} step="1"
          hint="How many scheduling passes a blocked head waits before later sessions may pass it (0: never)." />
        <Num label="fGPU per GPU" value={v.fgpu_per_device ?? ''} onInput={set('fgpu_per_device')} step="1"
          hint="How many fGPU one physical GPU counts as (e.g. 2: a session with 1 fGPU gets half a GPU)." />
        <Num label="fGPU quantum" value={v.fgpu_quantum ?? ''} onInput={set('fgpu_quantum')}
          hint="The smallest fGPU step a request may use; divides 1 (0.01, 0.05, 0.25…)." />
        <Num label="Folder trash days" value={v.folder_trash_days ?? ''} onInput={set('folder_trash_days')} step="1"
          hint="Days a removed folder stays in the trash before it is purged." />
        {config.fairshare_half_life_s !== undefined && <Num label="Fair-share half-life (s)" value={v.fairshare_half_life_s ?? ''}
          onInput={set('fairshare_half_life_s')} step="1" hint="Past usage counts half after this long (0: it never decays)." />}
        {config.preemption !== undefined && <Select label="Preemption" value={v.preemption ?? ''} onChange={set('preemption')}
          options={[['true', 'on: higher-priority sessions may preempt preemptible ones'], ['false', 'off: no session is ever preempted']]} />}
        {config.preemption_min_runtime_s !== undefined && <Num label="Preemption minimum runtime (s)" value={v.preemption_min_runtime_s ?? ''}
          onInput={set('preemption_min_runtime_s')} step="1" hint="A session younger than this is never preempted." />}
      </div>
      <ErrorText error={error} />
      {notice && <p class="notice" role="status">{notice}</p>}
      <div class="actions"><Button type="submit" kind="primary">Save settings</Button></div>
    </form>
  );
}

// The cluster's addresses and agents' log caps: strings, null while unset
// (then manager.conf's or agent.conf's value is in force, which the field
// shows as its placeholder). An emptied field sends null: back to the
// configuration file's value.
const CLUSTER_FIELDS: { key: string; label: string; hint: string; empty?: string }[] = [
  { key: 'storage_hosts', label: 'Storage hosts', hint: 'NAME:PATH[,NAME:PATH...]; the first is the default. A host holding folders cannot be dropped.' },
  { key: 'registry_url', label: 'Registry', hint: 'http://HOST[:PORT]; used from the next commit and pull on.' },
  { key: 'wsproxy_url', label: 'App proxy address', hint: 'http://HOST or https://HOST, as browsers reach the app proxy.' },
  { key: 'wsproxy_port_range', label: 'App proxy ports', hint: 'FIRST-LAST, within what the app proxy serves; for apps opened from now on.' },
  { key: 'wsproxy_domain', label: 'App proxy domain', hint: 'host mode: apps on APP.ID.apps.DOMAIN; empty in the configuration: port mode.' },
  { key: 'log_max_size', label: 'Session log cap', hint: 'every agent\'s cap of a new session\'s log, e.g. 100MiB (0: none).' },
  { key: 'log_max_files', label: 'Session log files', hint: 'how many rotated files each session keeps (2 to 100).' },
];

function clusterValues(config: Config): Record<string, string> {
  const o: Record<string, string> = {};
  for (const f of CLUSTER_FIELDS) o[f.key] = config[f.key] === undefined || config[f.key] === null ? '' : String(config[f.key]);
  return o;
}

function ClusterSettings({ config, reload }: { config: Config | null; reload: () => void }) {
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  if (!config) return <div class="skeleton form-skeleton" aria-label="Loading the settings" />;
  return <ClusterForm key={JSON.stringify(clusterValues(config))} config={config} reload={reload}
    error={error} setError={setError} notice={notice} setNotice={setNotice} />;
}

function ClusterForm({ config, reload, error, setError, notice, setNotice }: {
  config: Config; reload: () => void; error: string | null; setError: (e: string | null) => void;
  notice: string | null; setNotice: (n: string | null) => void;
}) {
  const start = clusterValues(config);
  const [v, setV] = useState<Record<string, string>>(() => start);
  const inForce = (config.in_force ?? {}) as Record<string, unknown>;
  const set = (k: string) => (x: string) => setV((o) => ({ ...o, [k]: x }));
  const save = async (e: Event) => {
    e.preventDefault();
    setError(null);
    setNotice(null);
    const changed = CLUSTER_FIELDS.map((f) => f.key).filter((k) => v[k].trim() !== start[k]);
    if (changed.length === 0) { setNotice('Nothing changed.'); return; }
    for (const k of changed) {
      const raw = v[k].trim();
      let value: unknown = raw === '' ? null : raw;
      if (k === 'log_max_files' && raw !== '') {
        value = Number(raw);
        if (!Number.isInteger(value)) { setError(`${k}: enter a whole number.`); return; }
      }
      try {
        await api.setConfig(k, value);
      } catch (err) {
        setError(`${k}: ${(err as Error).message}`);
        reload();
        return;
      }
    }
    setNotice(`Saved: ${changed.join(', ')}.`);
    reload();
  };
  return (
    <form class="card settings-form" onSubmit={save} aria-label="Cluster settings">
      <p class="hint">Empty: the configuration file's value is in force (said under the field). Every manager and agent applies a change without a restart.</p>
      <div class="form-grid">
        {CLUSTER_FIELDS.map((f) => {
          const cur = inForce[f.key];
          return <Num key={f.key} type="text" label={f.label} value={v[f.key]} onInput={set(f.key)} hint={f.hint}
            inForce={cur === undefined || cur === null ? '' : String(cur)} />;
        })}
      </div>
      <ErrorText error={error} />
      {notice && <p class="notice" role="status">{notice}</p>}
      <div class="actions"><Button type="submit" kind="primary">Save cluster settings</Button></div>
    </form>
  );
}

// The policy's keys as the form shows them (docs/admin.md, "Policies").
const POLICY_FIELDS: { key: string; label: string; kind: 'int' | 'num' | 'size' | 'bool' | 'choice'; hint: string }[] = [
  { key: 'max_sessions', label: 'Max sessions', kind: 'int', hint: 'at once' },
  { key: 'max_cpu', label: 'Max CPU', kind: 'num', hint: 'cores, in total' },
  { key: 'max_mem', label: 'Max memory', kind: 'size', hint: 'in total, e.g. 16g' },
  { key: 'max_fgpu', label: 'Max fGPU', kind: 'num', hint: 'in total' },
  { key: 'idle_timeout_s', label: 'Idle timeout (s)', kind: 'int', hint: 'an idle session ends after it; 0: never' },
  { key: 'idle_cpu_pct', label: 'Idle CPU %', kind: 'num', hint: 'below this it counts as idle (default 5)' },
  { key: 'max_concurrent_execs', label: 'Max concurrent execs', kind: 'int', hint: 'default 4' },
  { key: 'max_private_images', label: 'Max private images', kind: 'int', hint: 'default 10' },
  { key: 'max_folders', label: 'Max folders', kind: 'int', hint: 'default 20' },
  { key: 'max_folder_bytes', label: 'Max folder size', kind: 'size', hint: 'e.g. 50g' },
  { key: 'allow_root', label: 'Allow sessions as root', kind: 'bool', hint: '' },
  { key: 'max_priority', label: 'Max priority', kind: 'int', hint: 'highest session priority, 0 to 100' },
  { key: 'preemptible_batch', label: 'Batch sessions preemptible by default', kind: 'bool', hint: '' },
  { key: 'preemptible_interactive', label: 'Interactive sessions preemptible by default', kind: 'bool', hint: '' },
  { key: 'on_preempt', label: 'After preemption', kind: 'choice', hint: 'requeue: back to PENDING; end: TERMINATED' },
];

function describe(p: Record<string, unknown>): string {
  const parts: string[] = [];
  for (const f of POLICY_FIELDS) {
    const v = p[f.key];
    if (v === undefined || v === null) continue;
    if (f.key === 'allow_root') { if (v) parts.push('root allowed'); continue; }
    if (f.kind === 'bool') { parts.push(`${f.label.toLowerCase()}: ${v ? 'yes' : 'no'}`); continue; }
    if (f.kind === 'choice') { parts.push(`after preemption: ${String(v)}`); continue; }
    const shown = f.kind === 'size' && typeof v === 'number' ? fmtBytes(v) : typeof v === 'number' ? fmtNum(v) : String(v);
    parts.push(`${f.label.toLowerCase()} ${shown}`);
  }
  return parts.length ? parts.join(' · ') : 'no limits';
}

// Edits one policy: empty fields are left out (no limit, or the default).
function PolicyDialog(props: { who: string | null; isNew: boolean; policy: Record<string, unknown>; onClose: () => void; onSaved: (msg: string) => void }) {
  const open = props.who !== null || props.isNew;
  return (
    <Dialog open={open} title={props.isNew ? 'New policy' : `Policy: ${props.who}`} onClose={props.onClose}>
      {open && <PolicyForm key={`${props.who}|${props.isNew}`} {...props} />}
    </Dialog>
  );
}

function PolicyForm(props: { who: string | null; isNew: boolean; policy: Record<string, unknown>; onClose: () => void; onSaved: (msg: string) => void }) {
  const [email, setEmail] = useState('');
  const [v, setV] = useState<Record<string, string>>(() => {
    const o: Record<string, string> = {};
    for (const f of POLICY_FIELDS) {
      const x = props.policy[f.key];
      o[f.key] = x === undefined || x === null || f.key === 'allow_root' ? '' : String(x);
    }
    return o;
  });
  const [root, setRoot] = useState(props.policy.allow_root === true);
  const [error, setError] = useState<string | null>(null);
  const emailId = useId();
  const save = async (e: Event) => {
    e.preventDefault();
    setError(null);
    const who = props.isNew ? email.trim() : props.who!;
    if (!who) { setError('Enter the user’s email.'); return; }
    const value: Record<string, unknown> = {};
    for (const f of POLICY_FIELDS) {
      if (f.key === 'allow_root') continue;
      const raw = (v[f.key] ?? '').trim();
      if (!raw) continue;
      // The preemption defaults and on_preempt: unset (the default) or chosen.
      if (f.kind === 'bool') { value[f.key] = raw === 'true'; continue; }
      if (f.kind === 'choice') { value[f.key] = raw; continue; }
      if (f.kind === 'size') { value[f.key] = /^\d+$/.test(raw) ? Number(raw) : raw; continue; }
      const n = Number(raw);
      if (Number.isNaN(n)) { setError(`${f.label}: enter a number.`); return; }
      value[f.key] = n;
    }
    if (root) value.allow_root = true;
    try {
      await api.setConfig(`policy.${who}`, value);
      props.onSaved(`Saved the policy of ${who}.`);
    } catch (err) {
      setError((err as Error).message);
    }
  };
  return (
    <form class="policy-form" onSubmit={save}>
      {props.isNew && (
        <div class="field">
          <label for={emailId}>User email</label>
          <input id={emailId} type="email" value={email} required onInput={(e) => setEmail((e.target as HTMLInputElement).value)} />
        </div>
      )}
      <p class="hint">Leave a field empty for no limit{props.who === 'default' ? '' : '. A user’s own policy replaces the default for sessions, CPU, memory and fGPU; the other limits left empty come from the default'}.</p>
      <div class="form-grid">
        {POLICY_FIELDS.filter((f) => f.kind !== 'bool' && f.kind !== 'choice').map((f) => (
          <Num key={f.key} label={f.label} value={v[f.key] ?? ''} type={f.kind === 'size' ? 'text' : 'number'}
            step={f.kind === 'int' ? '1' : 'any'} hint={f.hint} onInput={(x) => setV((o) => ({ ...o, [f.key]: x }))} />
        ))}
      </div>
      <div class="form-grid">
        {POLICY_FIELDS.filter((f) => f.key !== 'allow_root' && (f.kind === 'bool' || f.kind === 'choice')).map((f) => (
          <Select key={f.key} label={f.label} value={v[f.key] ?? ''} hint={f.hint || undefined}
            onChange={(x) => setV((o) => ({ ...o, [f.key]: x }))}
            options={f.kind === 'bool' ? [['', 'the default'], ['true', 'yes'], ['false', 'no']]
              : [['', 'the default (requeue)'], ['requeue', 'requeue: back to PENDING'], ['end', 'end: TERMINATED']]} />
        ))}
      </div>
      <label class="check-inline"><input type="checkbox" checked={root} onChange={(e) => setRoot((e.target as HTMLInputElement).checked)} /> Allow sessions that run as root</label>
      <ErrorText error={error} />
      <div class="actions">
        <Button onClick={props.onClose}>Cancel</Button>
        <Button type="submit" kind="primary">Save policy</Button>
      </div>
    </form>
  );
}

function Policies({ config, reload }: { config: Config | null; reload: () => void }) {
  const [editing, setEditing] = useState<string | null>(null);
  const [adding, setAdding] = useState(false);
  const [notice, setNotice] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const pols = config?.policies ?? {};
  const names = ['default', ...Object.keys(pols).filter((k) => k !== 'default').sort()];
  const [removing, setRemoving] = useState<string | null>(null);
  const remove = async (who: string) => {
    setRemoving(null);
    setError(null);
    setNotice(null);
    try {
      await api.setConfig(`policy.${who}`, null);
      setNotice(`Removed the policy of ${who}${who === 'default' ? '' : '; the default applies to them now'}.`);
      reload();
    } catch (e) {
      setError((e as Error).message);
    }
  };
  if (!config) return <div class="skeleton form-skeleton" aria-label="Loading the policies" />;
  return (
    <div class="card">
      <div class="table-scroll">
        <table class="policies stack">
          <thead><tr><th scope="col">Applies to</th><th scope="col">Limits</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
          <tbody>
            {names.map((who) => (
              <tr key={who} data-policy={who}>
                <td data-label="Applies to">{who === 'default' ? <strong>Everyone without their own (default)</strong> : <Email email={who} />}</td>
                <td data-label="Limits">{pols[who] ? describe(pols[who]) : 'no limits'}</td>
                <td data-label="Actions"><div class="row-actions horizontal">
                  <Button onClick={() => setEditing(who)} label={`Edit the policy of ${who}`}>Edit</Button>
                  {pols[who] && <Button kind="danger" onClick={() => setRemoving(who)} label={`Remove the policy of ${who}`}>Remove</Button>}
                </div></td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <ErrorText error={error} />
      {notice && <p class="notice" role="status">{notice}</p>}
      <div class="actions"><Button onClick={() => setAdding(true)}>Add a user’s policy</Button></div>
      {/* Removing a policy changes someone's limits at once: asked first. */}
      <Dialog open={removing !== null} title="Remove policy" onClose={() => setRemoving(null)}>
        {removing && <p>Remove the policy of <strong>{removing === 'default' ? 'everyone without their own (default)' : removing}</strong> ({describe(pols[removing] ?? {})})?
          {removing === 'default' ? ' Users without their own policy then have no limits.' : ' The default policy applies to them then.'} Their running sessions keep running.</p>}
        <div class="actions">
          <Button onClick={() => setRemoving(null)}>Cancel</Button>
          <Button kind="danger" onClick={() => removing && remove(removing)}>Remove policy</Button>
        </div>
      </Dialog>
      <PolicyDialog who={editing} isNew={adding} policy={editing ? pols[editing] ?? {} : {}}
        onClose={() => { setEditing(null); setAdding(false); }}
        onSaved={(m) => { setEditing(null); setAdding(false); setNotice(m); reload(); }} />
    </div>
  );
}

export function SettingsSections() {
  const [config, setConfig] = useState<Config | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = () => api.config().then((c) => { setConfig(c as Config); setError(null); })
    .catch((e) => setError(`Cannot read the settings: ${(e as Error).message}`));
  useEffect(() => { load(); }, []);
  return (
    <>
      <section aria-labelledby="settings-title">
        <h2 id="settings-title">Scheduler and GPU settings</h2>
        <ErrorText error={error} />
        <SchedulerSettings config={config} reload={load} />
      </section>
      <section aria-labelledby="cluster-title">
        <h2 id="cluster-title">Cluster settings</h2>
        <ClusterSettings config={config} reload={load} />
      </section>
      <section aria-labelledby="policies-title">
        <h2 id="policies-title">Policies</h2>
        <p class="hint">Per-user limits; a user without their own policy gets the default.</p>
        <Policies config={config} reload={load} />
      </section>
    </>
  );
}
