// The launch dialog's folder picker (docs/folders.md, "Mounting into
// sessions"): the user's usable folders, each to mount read-write or
// read-only (always read-only for a read-only share) at a path, by default
// /home/work/NAME. It reports the mounts as the API takes them
// (`mounts` of POST /v1/sessions: "NAME[:PATH][:ro]"), or what is wrong.
import { useEffect, useId, useLayoutEffect, useState } from 'preact/hooks';
import { folders, type Folder } from './folders-api';

export interface Mounts { specs: string[]; error: string | null }

interface Choice { on: boolean; path: string; ro: boolean }

const SYSTEM = ['/proc', '/sys', '/dev', '/etc', '/usr', '/bin', '/sbin', '/lib', '/lib64', '/boot', '/run', '/var/run', '/opt/tessera'];

// The API's rules for a mount path, said in words; null when fine.
export function checkMountPath(p: string): string | null {
  if (!p.startsWith('/')) return 'must be an absolute path (starting with /)';
  if (p.includes(':')) return 'cannot contain ":"';
  if (p.length > 1 && p.endsWith('/')) return 'cannot end with /';
  const parts = p.split('/').slice(1);
  if (parts.some((c) => c === '' || c === '.' || c === '..')) return 'cannot have empty, . or .. parts';
  if (p === '/' || p === '/home' || p === '/home/work') return `cannot be ${p}: your home stays the work user's`;
  const sys = SYSTEM.find((s) => p === s || p.startsWith(`${s}/`));
  if (sys) return `cannot be under ${sys}, a system directory`;
  if (p.length > 1024) return 'is too long';
  return null;
}

export function FolderPicker(props: { open: boolean; onChange: (m: Mounts) => void }) {
  const [list, setList] = useState<Folder[] | null>(null);
  const [loadError, setLoadError] = useState<string | null>(null);
  const [choice, setChoice] = useState<Record<string, Choice>>({});
  const id = useId();

  // A layout effect, as the other resets on opening: it runs before the
  // dialog can take input (components.tsx, Dialog).
  useLayoutEffect(() => {
    if (!props.open) return;
    setChoice({});
    folders.list().then((r) => { setList(r.folders); setLoadError(null); })
      .catch((e) => { setList([]); setLoadError(`Cannot list your folders: ${(e as Error).message}`); });
  }, [props.open]);

  // A folder is named in a mount by its name; the caller's own folder of
  // a name comes first, so a share of the same name cannot be picked.
  const usable = (list ?? []).filter((f) => f.permission === 'owner' || !(list ?? []).some((o) => o.permission === 'owner' && o.name === f.name));
  const get = (f: Folder): Choice => choice[f.id] ?? { on: false, path: `/home/work/${f.name}`, ro: f.permission === 'ro' };

  useEffect(() => {
    const specs: string[] = [];
    const paths = new Map<string, string>();
    let error: string | null = null;
    for (const f of usable) {
      const c = get(f);
      if (!c.on) continue;
      const path = c.path.trim();
      const bad = checkMountPath(path);
      if (bad && !error) error = `The mount path of ${f.name} ${bad}.`;
      if (!error && paths.has(path)) error = `${paths.get(path)} and ${f.name} cannot both be mounted at ${path}.`;
      paths.set(path, f.name);
      const ro = c.ro || f.permission === 'ro';
      specs.push(`${f.name}${path === `/home/work/${f.name}` ? '' : `:${path}`}${ro ? ':ro' : ''}`);
    }
    props.onChange({ specs, error });
  }, [choice, list]);

  const set = (f: Folder, p: Partial<Choice>) => setChoice((m) => ({ ...m, [f.id]: { ...get(f), ...p } }));
  const dots = usable.filter((f) => f.automount && f.permission === 'owner');
  return (
    <fieldset class="folder-picker" aria-describedby={`${id}-note`}>
      <legend>Data folders</legend>
      <p id={`${id}-note`} class="hint">
        {dots.length
          ? `Your folders whose names start with a dot (${dots.map((f) => f.name).join(', ')}) are mounted automatically at /home/work/NAME; pick one here only to mount it elsewhere or read-only.`
          : 'Folders whose names start with a dot (.local) are mounted automatically at /home/work/NAME.'}
      </p>
      {loadError && <p class="error" role="alert">{loadError}</p>}
      {list === null ? <p>Loading folders…</p> : usable.length === 0 ? <p class="empty">You have no folders yet (Data page).</p> : (
        <ul class="mount-list">
          {usable.map((f) => {
            const c = get(f);
            const bad = c.on ? checkMountPath(c.path.trim()) : null;
            const forcedRo = f.permission === 'ro';
            return (
              <li key={f.id} class={`mount${c.on ? ' on' : ''}`} data-mount={f.name}>
                <label class="mount-name">
                  <input type="checkbox" checked={c.on} onChange={(e) => set(f, { on: (e.target as HTMLInputElement).checked })} />
                  {' '}Mount {f.name}
                  {f.automount && f.permission === 'owner' && <span class="chip automount">automount</span>}
                  {f.permission !== 'owner' && <span class="hint"> (shared by {f.owner}, {f.permission === 'ro' ? 'read-only' : 'read-write'})</span>}
                </label>
                {c.on && (
                  <div class="mount-opts">
                    <label for={`${id}-${f.id}-path`}>Path for {f.name}</label>
                    <input id={`${id}-${f.id}-path`} type="text" value={c.path} aria-invalid={bad ? 'true' : undefined}
                      aria-describedby={bad ? `${id}-${f.id}-err` : undefined}
                      onInput={(e) => set(f, { path: (e.target as HTMLInputElement).value })} />
                    <label class="mount-ro">
                      <input type="checkbox" checked={c.ro || forcedRo} disabled={forcedRo}
                        onChange={(e) => set(f, { ro: (e.target as HTMLInputElement).checked })} />
                      {' '}Read-only{forcedRo ? ' (shared read-only)' : ''}
                    </label>
                    {bad && <small id={`${id}-${f.id}-err`} class="error">The path {bad}.</small>}
                  </div>
                )}
              </li>
            );
          })}
        </ul>
      )}
    </fieldset>
  );
}
