// Projects, their quotas and members, and fair share (issue 32,
// docs/scheduling.md): the project list the Sessions page's switcher and
// the launch dialog read, and the Admin page's "Projects" and "Fair share"
// sections (GET/POST/PATCH/DELETE /v1/projects, PUT/DELETE
// /v1/projects/{name}/members/{email}, GET /v1/fairshare).
import { Fragment } from 'preact';
import { useEffect, useId, useState } from 'preact/hooks';
import {
  ApiError, api3, fmtBytes, fmtNum, fmtShare, type FairShare, type Project, type ProjectRole, type Quota,
} from './api';
import { Button, Dialog, Email, ErrorText, TextField } from './components';

// The projects the caller is in (admins: every team project; all: the
// personal ones too), read again whenever `key` changes (the Sessions
// page: a session started or ended, so a project's use changed).
// supported is false when the manager has no projects (404 on the
// route): the pages then show no switcher.
export function useProjects(all = false, key = '') {
  const [projects, setProjects] = useState<Project[]>([]);
  const [supported, setSupported] = useState(true);
  const [error, setError] = useState<string | null>(null);
  const load = () => api3.projects(all).then((r) => { setProjects(r.projects ?? []); setSupported(true); setError(null); })
    .catch((e) => {
      if (e instanceof ApiError && e.status === 404) setSupported(false);
      else setError(`Cannot read the projects: ${(e as Error).message}`);
    });
  useEffect(() => { load(); }, [all, key]);
  return { projects, supported, error, reload: load };
}

// A quota's value as the tables show it; null: no limit.
function fmtQuota(q: Quota): string {
  const parts: string[] = [];
  if (q.cpu !== null) parts.push(`${fmtNum(q.cpu)} CPU`);
  if (q.mem !== null) parts.push(fmtBytes(q.mem));
  if (q.fgpu !== null) parts.push(`${fmtNum(q.fgpu)} fGPU`);
  if (q.sessions !== null) parts.push(`${q.sessions} session${q.sessions === 1 ? '' : 's'}`);
  return parts.length ? parts.join(' · ') : 'no limit';
}
function fmtUse(p: Project): string {
  const u = p.used;
  if (!u) return '—';
  return `${fmtNum(Math.round(u.cpu * 100) / 100)} CPU · ${fmtBytes(u.mem)} · ${fmtNum(Math.round(u.fgpu * 100) / 100)} fGPU · ${u.sessions} session${u.sessions === 1 ? '' : 's'}`;
}

// A number field's text to a quota value: empty is no limit (null).
function quotaValue(label: string, raw: string, unit: 'num' | 'int' | 'size'): { v?: number | null; error?: string } {
  const t = raw.trim();
  if (!t) return { v: null };
  if (unit === 'size') {
    // "16g", "512MiB", "1.5 GiB" (powers of 1024); a bare number is GiB.
    const m = /^(\d+(?:\.\d+)?)\s*(?:([kmgt])(?:i?b)?|(b))?$/i.exec(t);
    if (!m) return { error: `${label}: enter a size such as 64g or 512MiB, or leave it empty for no limit.` };
    const pow = m[3] ? 0 : m[2] ? 'kmgt'.indexOf(m[2].toLowerCase()) + 1 : 3;
    return { v: Math.round(Number(m[1]) * 1024 ** pow) };
  }
  const n = Number(t);
  if (Number.isNaN(n) || n < 0) return { error: `${label}: enter a number from 0, or leave it empty for no limit.` };
  if (unit === 'int' && !Number.isInteger(n)) return { error: `${label}: enter a whole number.` };
  return { v: n };
}

// A project's fields as the form shows them: numbers as typed, a limit
// left empty for none (memory in GiB).
function formValues(p?: Project) {
  const n = (v: number | null | undefined) => (v === null || v === undefined ? '' : fmtNum(v));
  return {
    name: p?.name ?? '', description: p?.description ?? '', cpu: n(p?.quota.cpu), fgpu: n(p?.quota.fgpu),
    mem: p?.quota.mem != null ? fmtNum(Math.round((p.quota.mem / 2 ** 30) * 1000) / 1000) : '',
    sessions: n(p?.quota.sessions), weight: p ? fmtNum(p.weight) : '1', groups: p?.groups.join(',') ?? '',
  };
}

// Creates a project (POST /v1/projects) or, given one, changes its
// description, quota, weight and groups (PATCH /v1/projects/{name}).
function ProjectForm({ project, onSaved, onCancel }: { project?: Project; onSaved: (msg: string) => void; onCancel?: () => void }) {
  const [v, setV] = useState(() => formValues(project));
  const set = (k: keyof ReturnType<typeof formValues>) => (x: string) => setV((o) => ({ ...o, [k]: x }));
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const editing = project !== undefined;
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(null);
    if (!editing && !v.name.trim()) { setError('Enter the project’s name.'); return; }
    const fields: [string, string, 'num' | 'int' | 'size', keyof Quota][] = [
      ['Max CPU', v.cpu, 'num', 'cpu'], ['Max memory', v.mem, 'size', 'mem'], ['Max fGPU', v.fgpu, 'num', 'fgpu'], ['Max sessions', v.sessions, 'int', 'sessions'],
    ];
    const quota: Record<string, unknown> = {};
    for (const [label, raw, unit, key] of fields) {
      const r = quotaValue(label, raw, unit);
      if (r.error) { setError(r.error); return; }
      quota[key] = r.v;
    }
    const w = Number(v.weight.trim() || '1');
    if (!(w > 0)) { setError('Weight: enter a number above 0.'); return; }
    const spec = {
      description: v.description.trim(), weight: w, quota: quota as Partial<Quota>,
      groups: v.groups.split(',').map((g) => g.trim()).filter(Boolean),
    };
    setBusy(true);
    try {
      if (editing) {
        await api3.updateProject(project.name, spec);
        onSaved(`Saved project ${project.name}.`);
      } else {
        const r = await api3.createProject({ name: v.name.trim(), ...spec });
        onSaved(`Created project ${r.project.name}.`);
        setV(formValues());
      }
    } catch (err) {
      setError(`Cannot ${editing ? 'save' : 'create'} the project: ${(err as Error).message}`);
    } finally {
      setBusy(false);
    }
  };
  const label = editing ? `Edit project ${project.name}` : 'Create a project';
  return (
    <form class={editing ? 'project-form' : 'card create-project'} onSubmit={submit} aria-label={label} noValidate>
      {!editing && <h3>Create a project</h3>}
      <div class="form-grid">
        {!editing && <TextField label="Project name" value={v.name} onInput={set('name')} required />}
        <TextField label="Description" value={v.description} onInput={set('description')} placeholder="optional" />
        <TextField label="Max CPU" value={v.cpu} onInput={set('cpu')} type="number" hint="cores in all its sessions; empty or 0: no limit" />
        <TextField label="Max memory" value={v.mem} onInput={set('mem')} hint="e.g. 64g, or GiB; empty or 0: no limit" />
        <TextField label="Max fGPU" value={v.fgpu} onInput={set('fgpu')} type="number" hint="empty or 0: no limit" />
        <TextField label="Max sessions" value={v.sessions} onInput={set('sessions')} type="number" hint="at once; empty or 0: no limit" />
        <TextField label="Weight" value={v.weight} onInput={set('weight')} type="number" hint="its fair share against the others’ (1 = equal)" />
        <TextField label="Resource groups" value={v.groups} onInput={set('groups')} placeholder="e.g. a100,h100"
          hint="the node groups its sessions may use, comma-separated; empty: all" />
      </div>
      <ErrorText error={error} />
      <div class="actions">
        {onCancel && <Button onClick={onCancel}>Cancel</Button>}
        <Button type="submit" kind="primary" disabled={busy}>{editing ? 'Save project' : 'Create project'}</Button>
      </div>
    </form>
  );
}

// A project's members: add (or change the role of) one, remove one.
function MembersDialog({ project, onClose, onChanged }: { project: Project | null; onClose: () => void; onChanged: (p: Project) => void }) {
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<ProjectRole>('member');
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const roleId = useId();
  useEffect(() => { setEmail(''); setRole('member'); setError(null); setNotice(null); }, [project?.name]);
  const run = async (what: () => Promise<{ project: Project }>, done: string) => {
    setBusy(true);
    setError(null);
    setNotice(null);
    try {
      const r = await what();
      setNotice(done);
      onChanged(r.project);
      return true;
    } catch (e) {
      setError((e as Error).message);
      return false;
    } finally {
      setBusy(false);
    }
  };
  const p = project;
  return (
    <Dialog open={p !== null} title={`Members of ${p?.name ?? ''}`} onClose={onClose}>
      {p && (
        <>
          {p.members.length === 0 ? <p class="empty">No members yet.</p> : (
            <table class="members">
              <thead><tr><th scope="col">Email</th><th scope="col">Role</th><th scope="col">Weight</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
              <tbody>
                {p.members.map((m) => (
                  <tr key={m.email} data-member={m.email}>
                    <td><Email email={m.email} /></td>
                    <td>{m.role}</td>
                    <td>{fmtNum(m.weight)}</td>
                    <td><Button kind="danger" disabled={busy} label={`Remove ${m.email} from ${p.name}`}
                      onClick={() => run(() => api3.removeMember(p.name, m.email), `Removed ${m.email} from ${p.name}.`)}>Remove</Button></td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
          <form class="add-member" aria-label={`Add a member to ${p.name}`} onSubmit={async (e) => {
            e.preventDefault();
            if (!email.trim()) { setError('Enter the user’s email.'); return; }
            const who = email.trim();
            if (await run(() => api3.setMember(p.name, who, { role }), `${who} is a ${role} of ${p.name}.`)) setEmail('');
          }}>
            <TextField label="Member email" type="email" value={email} onInput={setEmail} required />
            <div class="field">
              <label for={roleId}>Role</label>
              <select id={roleId} value={role} onChange={(e) => setRole((e.target as HTMLSelectElement).value as ProjectRole)}>
                <option value="member">member: sees and ends their own sessions</option>
                <option value="manager">manager: sees and ends every session of the project</option>
              </select>
            </div>
            <Button type="submit" kind="primary" disabled={busy}>Add member</Button>
          </form>
          <ErrorText error={error} />
          {notice && <p class="notice" role="status">{notice}</p>}
          <div class="actions"><Button onClick={onClose}>Close</Button></div>
        </>
      )}
    </Dialog>
  );
}

export function ProjectsSection({ onChanged }: { onChanged?: () => void }) {
  const [all, setAll] = useState(false);
  const { projects, supported, error, reload } = useProjects(all);
  const [notice, setNotice] = useState<string | null>(null);
  const [actionError, setActionError] = useState<string | null>(null);
  const [managing, setManaging] = useState<string | null>(null);
  const [removing, setRemoving] = useState<Project | null>(null);
  const [editing, setEditing] = useState<string | null>(null);
  const edited = projects.find((p) => p.name === editing);
  const changed = () => { reload(); onChanged?.(); };
  const managed = projects.find((p) => p.name === managing) ?? null;
  if (!supported) return null;
  const remove = async (p: Project) => {
    setActionError(null);
    setNotice(null);
    try {
      await api3.removeProject(p.name);
      setNotice(`Removed project ${p.name}.`);
      setRemoving(null);
      changed();
    } catch (e) {
      setActionError(`Cannot remove ${p.name}: ${(e as Error).message}`);
      setRemoving(null);
    }
  };
  return (
    <section aria-labelledby="projects-title">
      <h2 id="projects-title">Projects</h2>
      <p class="hint">Each session belongs to a project; a project’s quota holds beside each member’s own policy, and its weight sets its fair share. Every user also has a personal project named after them.</p>
      <label class="check-inline"><input type="checkbox" checked={all} onChange={(e) => setAll((e.target as HTMLInputElement).checked)} /> Show personal projects</label>
      <ErrorText error={error} />
      <ErrorText error={actionError} />
      {notice && <p class="notice" role="status">{notice}</p>}
      <div class="table-scroll">
        <table class="stack projects">
          <thead><tr>
            <th scope="col">Project</th><th scope="col">Quota</th><th scope="col">In use</th><th scope="col">Weight</th>
            <th scope="col">Groups</th><th scope="col">Members</th><th scope="col"><span class="sr-only">Actions</span></th>
          </tr></thead>
          <tbody>
            {projects.length === 0 && <tr><td colSpan={7} class="empty">No projects yet.</td></tr>}
            {projects.map((p) => (
              <tr key={p.id ?? p.name} data-project={p.name}>
                <td data-label="Project"><strong>{p.name}</strong>{p.personal && <span class="badge"> personal</span>}
                  {p.description && <div class="info">{p.description}</div>}</td>
                <td data-label="Quota">{fmtQuota(p.quota)}</td>
                <td data-label="In use">{fmtUse(p)}</td>
                <td data-label="Weight">{fmtNum(p.weight)}</td>
                <td data-label="Groups">{p.groups.length ? p.groups.join(', ') : 'all'}</td>
                <td data-label="Members">{p.members.length}</td>
                <td data-label="Actions"><div class="row-actions horizontal">
                  <Button onClick={() => setEditing(p.name)} label={`Edit project ${p.name}`}>Edit</Button>
                  {!p.personal && <Button onClick={() => setManaging(p.name)} label={`Members of ${p.name}`}>Members</Button>}
                  {!p.personal && <Button kind="danger" onClick={() => setRemoving(p)} label={`Remove project ${p.name}`}>Remove</Button>}
                </div></td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <ProjectForm onSaved={(m) => { setNotice(m); setActionError(null); changed(); }} />
      <Dialog open={edited !== undefined} title={`Edit project ${edited?.name ?? ''}`} onClose={() => setEditing(null)}>
        {edited && <ProjectForm key={edited.name} project={edited} onCancel={() => setEditing(null)}
          onSaved={(m) => { setEditing(null); setNotice(m); setActionError(null); changed(); }} />}
      </Dialog>
      <MembersDialog project={managed} onClose={() => setManaging(null)} onChanged={() => changed()} />
      <Dialog open={removing !== null} title="Remove project" onClose={() => setRemoving(null)}>
        {removing && (
          <>
            <p>Remove project <strong>{removing.name}</strong>? It is refused while the project has sessions or folders.</p>
            <div class="actions">
              <Button onClick={() => setRemoving(null)}>Cancel</Button>
              <Button kind="danger" onClick={() => remove(removing)}>Remove project</Button>
            </div>
          </>
        )}
      </Dialog>
    </section>
  );
}

function fmtHalfLife(s: number): string {
  if (s <= 0) return 'usage never decays';
  if (s % 86400 === 0) return `half-life ${s / 86400} day${s === 86400 ? '' : 's'}`;
  if (s % 3600 === 0) return `half-life ${s / 3600} h`;
  return `half-life ${s} s`;
}
// Resource-seconds in the unit that reads best: "40 s", "12.5 min", "3.2 h".
function fmtResTime(x: number, what: string): string {
  const r = (n: number) => fmtNum(Math.round(n * 10) / 10);
  if (x < 60) return `${r(x)} ${what}·s`;
  if (x < 3600) return `${r(x / 60)} ${what}·min`;
  return `${r(x / 3600)} ${what}·h`;
}
function fmtUsage(u: { cpu_s: number; mem_gib_s: number; fgpu_s: number } | undefined): string {
  if (!u) return '—';
  return [fmtResTime(u.fgpu_s, 'fGPU'), fmtResTime(u.cpu_s, 'CPU'), fmtResTime(u.mem_gib_s, 'GiB')].join(' · ');
}

// Like Slurm's sshare: each project's weight, its target share (its
// weight's part of all), the part of the decayed usage it had, its
// current share and its rank in the queue (1 first); a project's users
// the same within it, shown on demand.
export function FairShareSection() {
  const [fs, setFs] = useState<FairShare | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [supported, setSupported] = useState(true);
  const [open, setOpen] = useState<Set<string>>(new Set());
  const load = () => api3.fairshare().then((r) => { setFs(r); setError(null); })
    .catch((e) => {
      if (e instanceof ApiError && e.status === 404) setSupported(false);
      else setError(`Cannot read the fair share: ${(e as Error).message}`);
    });
  useEffect(() => {
    load();
    const t = window.setInterval(load, 10000);
    return () => clearInterval(t);
  }, []);
  if (!supported) return null;
  const toggle = (name: string) => setOpen((o) => { const n = new Set(o); if (n.has(name)) n.delete(name); else n.add(name); return n; });
  const projects = [...(fs?.projects ?? [])].sort((a, b) => a.rank - b.rank || a.name.localeCompare(b.name));
  return (
    <section aria-labelledby="fairshare-title">
      <h2 id="fairshare-title">Fair share</h2>
      {fs && <p class="hint">Queue policy {fs.queue_policy}{fs.queue_policy !== 'fairshare' ? ' (these figures order the queue only under the fairshare policy)' : ''}; {fmtHalfLife(fs.half_life_s)}. Target: the weight’s part of all; usage: the part of the decayed usage (dominant resource); rank 1 is served first.</p>}
      <ErrorText error={error} />
      {!fs && !error ? <div class="skeleton form-skeleton" aria-label="Loading the fair share" /> : fs && (
        <div class="table-scroll">
          <table class="fairshare">
            <thead><tr>
              <th scope="col">Project / user</th><th scope="col" class="num">Weight</th><th scope="col" class="num">Target</th>
              <th scope="col" class="num">Usage share</th><th scope="col" class="num">Current share</th><th scope="col" class="num">Rank</th>
              <th scope="col">Decayed usage</th>
            </tr></thead>
            <tbody>
              {projects.length === 0 && <tr><td colSpan={7} class="empty">No project has members yet.</td></tr>}
              {projects.map((p) => {
                const expanded = open.has(p.name);
                const users = [...(p.users ?? [])].sort((a, b) => a.rank - b.rank || a.email.localeCompare(b.email));
                return (
                  <Fragment key={p.name}>
                    <tr class="fs-project" data-fairshare={p.name}>
                      <th scope="row">
                        {users.length > 0 ? (
                          <button type="button" class="fs-toggle" aria-expanded={expanded} onClick={() => toggle(p.name)}
                            aria-label={`${expanded ? 'Hide' : 'Show'} the users of ${p.name}`}>
                            <span aria-hidden="true">{expanded ? '▾' : '▸'}</span>
                          </button>
                        ) : <span class="fs-toggle-space" />}
                        {p.name}
                      </th>
                      <td class="num">{fmtNum(p.weight)}</td>
                      <td class="num">{fmtShare(p.target)}</td>
                      <td class="num">{fmtShare(p.usage_share)}</td>
                      <td class="num">{fmtShare(p.current_share)}</td>
                      <td class="num">{p.rank}</td>
                      <td>{fmtUsage(p.usage)}</td>
                    </tr>
                    {expanded && users.map((u) => (
                      <tr key={`${p.name}/${u.email}`} class="fs-user" data-fairshare-user={u.email}>
                        <th scope="row" class="fs-user-name"><Email email={u.email} /></th>
                        <td class="num">{fmtNum(u.weight)}</td>
                        <td class="num">{fmtShare(u.target)}</td>
                        <td class="num">{fmtShare(u.usage_share)}</td>
                        <td class="num">{fmtShare(u.current_share)}</td>
                        <td class="num">{u.rank}</td>
                        <td>{fmtUsage(u.usage)}</td>
                      </tr>
                    ))}
                  </Fragment>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
      <div class="actions"><Button onClick={load}>Refresh</Button></div>
    </section>
  );
}
