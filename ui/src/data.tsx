// The Data page (docs/folders.md, "In the web UI"): the user's data
// folders (their own, those shared with them, the trash) with usage
// against quota; create, rename, share, remove (to the trash, with a
// confirmation) and restore; and a folder's file browser (files.tsx).
import { useEffect, useLayoutEffect, useState } from 'preact/hooks';
import { api, type User } from './api';
import { Button, Dialog, ErrorText, TextField } from './components';
import { FileBrowser } from './files';
import { checkFolderName, folders, fmtSize, type Folder } from './folders-api';

function UsageCell({ f }: { f: Folder }) {
  const used = fmtSize(f.usage_bytes);
  if (!f.quota_bytes) return <span class="folder-usage">{used} used <span class="hint">· no quota</span></span>;
  const pct = Math.min(100, (f.usage_bytes / f.quota_bytes) * 100);
  const label = `${used} of ${fmtSize(f.quota_bytes)} used`;
  const enforced = f.quota_enforced === 'api-only'
    ? 'The quota caps uploads only: writes inside sessions are measured, not capped, on this storage host.'
    : f.quota_enforced ? 'The quota caps uploads and writes inside sessions.' : undefined;
  return (
    <div class="folder-usage" title={enforced}>
      <span>{label}{f.quota_enforced === 'api-only' && <span class="hint"> · uploads only</span>}</span>
      <div class={`bar${pct >= 90 ? ' full' : ''}`} role="meter" aria-label={`Usage of ${f.name}: ${label}`}
        aria-valuemin={0} aria-valuemax={f.quota_bytes} aria-valuenow={f.usage_bytes}>
        <div class="fill" style={{ width: `${pct}%` }} />
      </div>
    </div>
  );
}

function permissionText(f: Folder): string {
  if (f.permission === 'owner') return 'owner';
  return `${f.permission === 'rw' ? 'read-write' : 'read-only'} (shared by ${f.owner})`;
}

function CreateDialog(props: { open: boolean; hosts: string[]; onClose: () => void; onDone: (f: Folder) => void }) {
  const [name, setName] = useState('');
  const [host, setHost] = useState('');
  const [quota, setQuota] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  useLayoutEffect(() => { if (props.open) { setName(''); setHost(''); setQuota(''); setError(null); } }, [props.open]);
  const submit = async (e: Event) => {
    e.preventDefault();
    const n = name.trim();
    const bad = checkFolderName(n);
    if (bad) { setError(bad); return; }
    const q = quota.trim();
    if (q && !/^\d+(\.\d+)?\s*([kmgt]i?b?|b)?$/i.test(q)) { setError('Quota is a size such as 10g, 500m or 1.5GiB (or empty for the default).'); return; }
    setBusy(true);
    setError(null);
    try {
      const body: { name: string; host?: string; quota?: string } = { name: n };
      if (host.trim()) body.host = host.trim();
      if (q) body.quota = q;
      props.onDone(await folders.create(body));
    } catch (err) {
      setError(`Cannot create the folder: ${(err as Error).message}`);
    } finally { setBusy(false); }
  };
  return (
    <Dialog open={props.open} title="New folder" onClose={props.onClose}>
      <form onSubmit={submit} class="folder-form">
        <TextField label="Name" value={name} onInput={setName} required
          hint="Letters, digits, . _ -. A name starting with a dot (.local) is mounted in every session of yours." />
        <TextField label="Storage host" value={host} onInput={setHost} list="tessera-hosts" placeholder="default"
          hint="Leave empty for the cluster's default storage host." />
        <datalist id="tessera-hosts">{props.hosts.map((h) => <option key={h} value={h} />)}</datalist>
        <TextField label="Quota" value={quota} onInput={setQuota} placeholder="e.g. 10g"
          hint="Optional. Empty: your policy's default." />
        <ErrorText error={error} />
        <div class="actions">
          <Button onClick={props.onClose}>Cancel</Button>
          <Button type="submit" kind="primary" disabled={busy}>Create</Button>
        </div>
      </form>
    </Dialog>
  );
}

function RenameDialog(props: { folder: Folder | null; onClose: () => void; onDone: () => void }) {
  const [name, setName] = useState('');
  const [error, setError] = useState<string | null>(null);
  useLayoutEffect(() => { setName(props.folder?.name ?? ''); setError(null); }, [props.folder]);
  const submit = async (e: Event) => {
    e.preventDefault();
    const n = name.trim();
    const bad = checkFolderName(n);
    if (bad) { setError(bad); return; }
    try {
      await folders.rename(props.folder!.name, n);
      props.onDone();
    } catch (err) { setError(`Cannot rename: ${(err as Error).message}`); }
  };
  return (
    <Dialog open={!!props.folder} title="Rename folder" onClose={props.onClose}>
      <form onSubmit={submit}>
        <TextField label="New name" value={name} onInput={setName} required />
        <ErrorText error={error} />
        <div class="actions">
          <Button onClick={props.onClose}>Cancel</Button>
          <Button type="submit" kind="primary">Rename</Button>
        </div>
      </form>
    </Dialog>
  );
}

function ShareDialog(props: { folder: Folder | null; onClose: () => void; onChanged: () => void }) {
  const [f, setF] = useState<Folder | null>(null);
  const [email, setEmail] = useState('');
  const [perm, setPerm] = useState<'ro' | 'rw'>('ro');
  const [error, setError] = useState<string | null>(null);
  // A change the server refused (409) because that user's sessions mount
  // the folder: offered again with force, which ends those sessions.
  const [blocked, setBlocked] = useState<{ email: string; perm: 'ro' | null } | null>(null);
  useLayoutEffect(() => { setF(props.folder); setEmail(''); setPerm('ro'); setError(null); setBlocked(null); }, [props.folder]);
  const refused = (err: unknown, what: string, again: { email: string; perm: 'ro' | null }) => {
    const e = err as Error & { status?: number };
    setBlocked(e.status === 409 ? again : null);
    setError(`Cannot ${what}: ${e.message}`);
  };
  const share = async (e: Event | null, force = false) => {
    e?.preventDefault();
    const em = force && blocked ? blocked.email : email.trim();
    if (!/^[^\s@]+@[^\s@]+$/.test(em)) { setError('Enter the email of the user to share with.'); return; }
    const p = force ? 'ro' : perm;
    try {
      setF(await folders.share(f!.name, em, p, force));
      setEmail('');
      setError(null);
      setBlocked(null);
      props.onChanged();
    } catch (err) { refused(err, 'share', { email: em, perm: 'ro' }); }
  };
  const unshare = async (em: string, force = false) => {
    try {
      setF(await folders.unshare(f!.name, em, force));
      setError(null);
      setBlocked(null);
      props.onChanged();
    } catch (err) { refused(err, 'unshare', { email: em, perm: null }); }
  };
  const shares = f?.shared_with ?? [];
  // The form first: the dialog's focus lands on Email, never on an
  // Unshare button a stray Enter would press.
  return (
    <Dialog open={!!props.folder} title={`Share ${props.folder?.name ?? ''}`} onClose={props.onClose}>
      <form onSubmit={share}>
        <TextField label="Email" type="email" value={email} onInput={setEmail} />
        <fieldset class="perm-choice">
          <legend>Permission</legend>
          <label><input type="radio" name="perm" value="ro" checked={perm === 'ro'} onChange={() => setPerm('ro')} /> Read-only</label>
          <label><input type="radio" name="perm" value="rw" checked={perm === 'rw'} onChange={() => setPerm('rw')} /> Read-write</label>
        </fieldset>
        <ErrorText error={error} />
        {blocked && (
          <p>A share taken away does not reach a session that has the folder mounted: going on ends
            {' '}{blocked.email}’s sessions that mount it{blocked.perm ? ' writable' : ''}.</p>
        )}
        <div class="actions">
          {blocked && (blocked.perm
            ? <Button kind="danger" onClick={() => share(null, true)}>Share read-only anyway (ends them)</Button>
            : <Button kind="danger" onClick={() => unshare(blocked.email, true)}>Unshare anyway (ends them)</Button>)}
          <Button type="submit" kind="primary">Share</Button>
        </div>
      </form>
      <h3 class="share-title">Shared with</h3>
      {shares.length ? (
        <ul class="share-list" aria-label="Shared with">
          {shares.map((s) => (
            <li key={s.email}>
              <span>{s.email}</span> <span class="perm">{s.permission === 'rw' ? 'read-write' : 'read-only'}</span>
              <Button kind="danger" label={`Unshare with ${s.email}`} onClick={() => unshare(s.email)}>Unshare</Button>
            </li>
          ))}
        </ul>
      ) : <p class="empty">Not shared with anyone.</p>}
      <div class="actions">
        <Button onClick={props.onClose}>Close</Button>
      </div>
    </Dialog>
  );
}

function RemoveDialog(props: { folder: Folder | null; trashDays: number | null; onClose: () => void; onDone: () => void }) {
  const [error, setError] = useState<string | null>(null);
  const [mounted, setMounted] = useState(false);
  const [busy, setBusy] = useState(false);
  useLayoutEffect(() => { setError(null); setMounted(false); }, [props.folder]);
  const remove = async (force: boolean) => {
    setBusy(true);
    try {
      await folders.remove(props.folder!.name, force);
      props.onDone();
    } catch (err) {
      const e = err as Error & { status?: number };
      // 409: sessions mount it; the server's words name them.
      setMounted(e.status === 409);
      setError(e.message);
    } finally { setBusy(false); }
  };
  const f = props.folder;
  return (
    <Dialog open={!!f} title="Remove folder" onClose={props.onClose}>
      {f && (
        <>
          <p>Move folder <strong>{f.name}</strong> ({fmtSize(f.usage_bytes)}) to the trash of storage host <strong>{f.host}</strong>?</p>
          <p class="hint">You can restore it from the trash on this page
            {props.trashDays !== null ? ` for ${props.trashDays} day${props.trashDays === 1 ? '' : 's'}; then it is purged for good.` : ' until the admin\'s trash time passes.'}</p>
          <ErrorText error={error} />
          {mounted && <p>Running sessions keep what they have mounted if you remove it anyway.</p>}
          <div class="actions">
            <Button onClick={props.onClose}>Cancel</Button>
            {mounted
              ? <Button kind="danger" disabled={busy} onClick={() => remove(true)}>Remove anyway (force)</Button>
              : <Button kind="danger" disabled={busy} onClick={() => remove(false)}>Move to trash</Button>}
          </div>
        </>
      )}
    </Dialog>
  );
}

// The folder and directory the address names: /data/FOLDER?path=DIR.
function folderFromUrl(): { name: string; dir: string } | null {
  const m = /^\/data\/([^/]+)\/?$/.exec(location.pathname);
  if (!m) return null;
  try {
    return { name: decodeURIComponent(m[1]), dir: new URLSearchParams(location.search).get('path') ?? '' };
  } catch { return null; }
}

export function DataPage(_props: { user: User }) {
  const [list, setList] = useState<Folder[] | null>(null);
  const [trash, setTrash] = useState<Folder[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [creating, setCreating] = useState(false);
  const [renaming, setRenaming] = useState<Folder | null>(null);
  const [sharing, setSharing] = useState<Folder | null>(null);
  const [removing, setRemoving] = useState<Folder | null>(null);
  const [open, setOpenState] = useState<Folder | null>(null);
  const [trashDays, setTrashDays] = useState<number | null>(null);
  // The open folder and directory live in the URL (/data/FOLDER?path=DIR):
  // a reload, Back and a shared link keep them.
  const [want, setWant] = useState(folderFromUrl());
  const setOpen = (f: Folder | null) => {
    setOpenState(f);
    const href = f ? `/data/${encodeURIComponent(f.name)}` : '/data';
    if (location.pathname !== href) history.pushState(null, '', href);
    setWant(f ? { name: f.name, dir: '' } : null);
  };
  useEffect(() => {
    const onPop = () => { const w = folderFromUrl(); setWant(w); if (!w) setOpenState(null); };
    addEventListener('popstate', onPop);
    return () => removeEventListener('popstate', onPop);
  }, []);
  // The folder the URL names, once the list is in (or again after Back).
  useEffect(() => {
    if (!want || !list || open?.name === want.name) return;
    const f = list.find((x) => x.name === want.name);
    if (f) setOpenState(f);
    else { setError(`No folder named ${want.name} (the address names it): it may have been renamed or removed.`); history.replaceState(null, '', '/data'); setWant(null); }
  }, [want, list]);

  const load = async () => {
    try {
      const [l, t] = await Promise.all([folders.list(), folders.trash()]);
      setList(l.folders);
      setTrash(t.folders);
      setError(null);
      // The open folder follows a rename or a removal.
      setOpenState((o) => {
        const f = o ? l.folders.find((x) => x.id === o.id) ?? null : null;
        if (o && f?.name !== o.name) history.replaceState(null, '', f ? `/data/${encodeURIComponent(f.name)}` : '/data');
        if (o && !f) setWant(null);
        return f;
      });
    } catch (err) {
      setError(`Cannot list your folders: ${(err as Error).message}`);
      if (list === null) setList([]);
    }
  };
  useEffect(() => {
    load();
    api.config().then((c) => { const d = Number(c.folder_trash_days); if (Number.isFinite(d)) setTrashDays(d); }).catch(() => {});
  }, []);

  const restore = async (f: Folder) => {
    try {
      await folders.restore(f.name);
      setNotice(`Folder ${f.name} is back from the trash.`);
      await load();
    } catch (err) { setError(`Cannot restore ${f.name}: ${(err as Error).message}`); }
  };

  if (open) {
    return <FileBrowser key={open.id} folder={open} onBack={() => { setOpen(null); load(); }} onChanged={load}
      dir={want?.name === open.name ? want.dir : ''}
      onDir={(d) => history.replaceState(null, '', `/data/${encodeURIComponent(open.name)}${d ? `?path=${encodeURIComponent(d)}` : ''}`)} />;
  }
  const hosts = [...new Set((list ?? []).map((f) => f.host))];
  return (
    <section class="data-page" aria-labelledby="data-title">
      <div class="toolbar">
        <h1 id="data-title">Data</h1>
        <Button kind="primary" onClick={() => setCreating(true)}>New folder</Button>
        <Button onClick={load}>Refresh</Button>
      </div>
      <p class="hint">Folders outlive sessions: mount them when you start a session. Folders whose names start
        with a dot (.local, .cache) are mounted at /home/work/NAME in every session of yours.</p>
      <ErrorText error={error} />
      {notice && <p class="notice" role="status">{notice}</p>}
      <h2>Folders</h2>
      {list === null ? <p>Loading…</p> : list.length === 0 ? <p class="empty">No folders yet. Make one with “New folder”.</p> : (
        <div class="table-scroll">
          <table class="folders">
            <thead><tr><th scope="col">Name</th><th scope="col">Host</th><th scope="col">Permission</th>
              <th scope="col">Usage</th><th scope="col">Shared with</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
            <tbody>
              {list.map((f) => (
                <tr key={f.id} data-folder={f.name}>
                  <td>
                    <button type="button" class="link" onClick={() => setOpen(f)} aria-label={`Open folder ${f.name}`}>{f.name}</button>
                    {f.automount && <span class="chip automount" title="Mounted at /home/work/NAME in every session of its owner">automount</span>}
                  </td>
                  <td>{f.host}</td>
                  <td>{permissionText(f)}</td>
                  <td><UsageCell f={f} /></td>
                  <td class="info">{(f.shared_with ?? []).map((s) => `${s.email} (${s.permission})`).join(', ') || (f.permission === 'owner' ? '—' : '')}</td>
                  <td>
                    <div class="row-actions folder-actions">
                      <Button onClick={() => setOpen(f)} label={`Browse ${f.name}`}>Browse</Button>
                      {f.permission === 'owner' && <>
                        <Button onClick={() => setRenaming(f)} label={`Rename ${f.name}`}>Rename</Button>
                        <Button onClick={() => setSharing(f)} label={`Share ${f.name}`}>Share</Button>
                        <Button kind="danger" onClick={() => setRemoving(f)} label={`Remove ${f.name}`}>Remove</Button>
                      </>}
                    </div>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <h2>Trash</h2>
      {trash.length === 0 ? <p class="empty">The trash is empty.</p> : (
        <table class="folders trash">
          <thead><tr><th scope="col">Name</th><th scope="col">Host</th><th scope="col">Size</th><th scope="col">Removed</th>
            <th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
          <tbody>
            {trash.map((f) => (
              <tr key={f.id} data-trashed={f.name}>
                <td>{f.name}</td><td>{f.host}</td><td>{fmtSize(f.usage_bytes)}</td>
                <td>{f.trashed_at ? new Date(f.trashed_at).toLocaleString() : ''}</td>
                <td><Button onClick={() => restore(f)} label={`Restore ${f.name}`}>Restore</Button></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <CreateDialog open={creating} hosts={hosts} onClose={() => setCreating(false)}
        onDone={(f) => { setCreating(false); setNotice(`Folder ${f.name} created.`); load(); }} />
      <RenameDialog folder={renaming} onClose={() => setRenaming(null)}
        onDone={() => { setRenaming(null); setNotice('Folder renamed.'); load(); }} />
      <ShareDialog folder={sharing} onClose={() => setSharing(null)} onChanged={load} />
      <RemoveDialog folder={removing} trashDays={trashDays} onClose={() => setRemoving(null)}
        onDone={() => { const n = removing?.name; setRemoving(null); setNotice(`Folder ${n} moved to the trash.`); load(); }} />
    </section>
  );
}
