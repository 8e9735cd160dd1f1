// A folder's file browser (Data page): breadcrumbs, the entries of one
// directory, uploads (button or drag and drop, each with its progress and a
// Cancel button), downloads as plain browser downloads, new directories,
// rename/move and removal with a confirmation. A folder shared read-only
// can be browsed and downloaded from only: the write actions are disabled
// and say why.
import { useEffect, useId, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { Button, Dialog, ErrorText, TextField } from './components';
import { checkEntryName, folders, fmtSize, joinPath, uploadFile, type FileEntry, type Folder } from './folders-api';
import { sha256Blob } from './sha256';

interface Upload {
  id: number; name: string; dir: string; size: number; file: File;
  phase: 'checksum' | 'upload' | 'done' | 'failed' | 'cancelled';
  done: number;          // bytes checksummed or sent in the current phase
  error?: string; exists?: boolean;
  ctl: AbortController;
}

let nextUploadId = 1;

function UploadRow(props: { u: Upload; onCancel: () => void; onReplace: () => void; onDismiss: () => void }) {
  const u = props.u;
  const pct = u.size ? Math.floor((u.done / u.size) * 100) : (u.phase === 'done' ? 100 : 0);
  const words = u.phase === 'checksum' ? `checksumming ${pct}%` : u.phase === 'upload' ? `uploading ${pct}%`
    : u.phase === 'done' ? 'uploaded' : u.phase === 'cancelled' ? 'cancelled' : `failed: ${u.error}`;
  const active = u.phase === 'checksum' || u.phase === 'upload';
  return (
    <li class={`upload ${u.phase}`} data-upload={u.name}>
      <span class="upload-name">{joinPath(u.dir, u.name)}</span>
      <span class="upload-size">{fmtSize(u.size)}</span>
      <progress max={100} value={u.phase === 'done' ? 100 : pct} aria-label={`${u.name}: ${words}`} />
      <span class="upload-state" role={u.phase === 'failed' ? 'alert' : undefined}>{words}</span>
      {active && <Button onClick={props.onCancel} label={`Cancel upload of ${u.name}`}>Cancel</Button>}
      {u.phase === 'failed' && u.exists && <Button onClick={props.onReplace} label={`Replace ${u.name}`}>Replace</Button>}
      {!active && <Button onClick={props.onDismiss} label={`Dismiss ${u.name}`}>Dismiss</Button>}
    </li>
  );
}

export function FileBrowser(props: { folder: Folder; onBack: () => void; onChanged: () => void; dir?: string; onDir?: (dir: string) => void }) {
  const f = props.folder;
  const readOnly = f.permission === 'ro';
  // The directory starts where the URL says (data.tsx) and is told back
  // at each change, so that a reload or a shared link opens it again.
  const [dir, setDir] = useState(props.dir ?? '');
  useEffect(() => { props.onDir?.(dir); }, [dir]);
  const [entries, setEntries] = useState<FileEntry[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [uploads, setUploads] = useState<Upload[]>([]);
  const [dragging, setDragging] = useState(false);
  const [mkdirOpen, setMkdirOpen] = useState(false);
  const [moving, setMoving] = useState<FileEntry | null>(null);
  const [removing, setRemoving] = useState<FileEntry | null>(null);
  const fileInput = useRef<HTMLInputElement>(null);
  const roId = useId();
  const dirRef = useRef(dir);
  dirRef.current = dir;

  const load = async (d = dir) => {
    try {
      const r = await folders.files(f.name, d);
      if (d !== dirRef.current) return;   // the user went elsewhere meanwhile
      const sorted = [...r.entries].sort((a, b) => Number(b.type === 'dir') - Number(a.type === 'dir') || a.name.localeCompare(b.name));
      setEntries(sorted);
      setError(null);
    } catch (err) {
      setEntries([]);
      setError(`Cannot list ${d ? `${f.name}/${d}` : f.name}: ${(err as Error).message}`);
    }
  };
  useEffect(() => { setEntries(null); load(dir); }, [dir, f.name]);

  const patch = (id: number, p: Partial<Upload>) => setUploads((l) => l.map((u) => (u.id === id ? { ...u, ...p } : u)));

  const run = async (u: Upload, overwrite: boolean) => {
    try {
      patch(u.id, { phase: 'checksum', done: 0, error: undefined, exists: false });
      const hash = await sha256Blob(u.file, (done) => patch(u.id, { done }), u.ctl.signal);
      patch(u.id, { phase: 'upload', done: 0 });
      await uploadFile(f.name, joinPath(u.dir, u.name), u.file, hash, overwrite, (done) => patch(u.id, { done }), u.ctl.signal);
      patch(u.id, { phase: 'done', done: u.size });
      if (u.dir === dirRef.current) load(u.dir);
      props.onChanged();
    } catch (err) {
      const e = err as Error & { status?: number; code?: string };
      if (u.ctl.signal.aborted) patch(u.id, { phase: 'cancelled' });
      else patch(u.id, { phase: 'failed', error: e.message, exists: e.status === 409 });
    }
  };

  const start = (files: FileList | File[] | null) => {
    if (!files || readOnly) return;
    const list: Upload[] = [...files].map((file) => ({
      id: nextUploadId++, name: file.name, dir, size: file.size, file, phase: 'checksum', done: 0, ctl: new AbortController(),
    }));
    setUploads((l) => [...l, ...list]);
    for (const u of list) run(u, false);
  };
  const replace = (u: Upload) => {
    const again = { ...u, ctl: new AbortController() };
    setUploads((l) => l.map((x) => (x.id === u.id ? again : x)));
    run(again, true);
  };

  const onDrop = (e: DragEvent) => {
    e.preventDefault();
    setDragging(false);
    if (readOnly) { setError(`${f.name} is shared with you read-only: you cannot upload into it.`); return; }
    const dt = e.dataTransfer;
    if (!dt) return;
    // A dropped directory arrives as a File that cannot be read: say so
    // and take the files only.
    const dirs = new Set<string>();
    for (const item of [...dt.items]) {
      const entry = item.kind === 'file' ? item.webkitGetAsEntry?.() : null;
      if (entry?.isDirectory) dirs.add(entry.name);
    }
    const files = [...dt.files].filter((file) => !dirs.has(file.name));
    setError(dirs.size ? `Directories cannot be uploaded by dropping them (${[...dirs].join(', ')}): make the directory with "New directory" and drop the files inside it.` : null);
    if (files.length) start(files);
  };
  const onDragOver = (e: DragEvent) => {
    e.preventDefault();
    if (e.dataTransfer) e.dataTransfer.dropEffect = readOnly ? 'none' : 'copy';
    setDragging(true);
  };

  const parts = dir ? dir.split('/') : [];
  const disabledWhy = readOnly ? roId : undefined;
  return (
    <section class="file-browser" aria-labelledby="fb-title">
      <div class="toolbar">
        <Button onClick={props.onBack}>← All folders</Button>
        <h1 id="fb-title">Folder {f.name}</h1>
      </div>
      <nav aria-label="Breadcrumb" class="breadcrumb">
        <ol>
          <li><a href="#" aria-current={parts.length === 0 ? 'page' : undefined}
            onClick={(e) => { e.preventDefault(); setDir(''); }}>{f.name}</a></li>
          {parts.map((p, i) => (
            <li key={i}><a href="#" aria-current={i === parts.length - 1 ? 'page' : undefined}
              onClick={(e) => { e.preventDefault(); setDir(parts.slice(0, i + 1).join('/')); }}>{p}</a></li>
          ))}
        </ol>
      </nav>
      {readOnly && <p id={roId} class="readonly-note" role="note">{f.name} is shared with you read-only by {f.owner}:
        you can browse and download, not upload, rename or remove.</p>}
      <div class="toolbar file-tools">
        <input ref={fileInput} id="upload-input" type="file" multiple class="sr-only" tabIndex={-1} aria-hidden="true"
          disabled={readOnly} onChange={(e) => { const t = e.target as HTMLInputElement; start(t.files); t.value = ''; }} />
        <button type="button" class="btn primary" disabled={readOnly} aria-describedby={disabledWhy}
          onClick={() => fileInput.current?.click()}>Upload files</button>
        <Button onClick={() => setMkdirOpen(true)} disabled={readOnly}>New directory</Button>
        <Button onClick={() => load()}>Refresh</Button>
      </div>
      <ErrorText error={error} />
      {uploads.length > 0 && (
        <section aria-label="Uploads" class="uploads">
          <ul>
            {uploads.map((u) => (
              <UploadRow key={u.id} u={u} onCancel={() => u.ctl.abort()} onReplace={() => replace(u)}
                onDismiss={() => setUploads((l) => l.filter((x) => x.id !== u.id))} />
            ))}
          </ul>
        </section>
      )}
      <div class={`drop-zone${dragging ? ' dragging' : ''}${readOnly ? ' readonly' : ''}`} data-testid="drop-zone"
        onDragOver={onDragOver} onDragEnter={onDragOver} onDragLeave={() => setDragging(false)} onDrop={onDrop}>
        <p class="drop-hint" aria-hidden="true">{readOnly ? 'Read-only: uploads are disabled.' : `Drop files here to upload them into /${dir}`}</p>
        {entries === null ? <p>Loading…</p> : entries.length === 0 ? <p class="empty">This directory is empty.</p> : (
          <table class="files">
            <thead><tr><th scope="col">Name</th><th scope="col">Type</th><th scope="col">Size</th><th scope="col">Modified</th>
              <th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
            <tbody>
              {entries.map((e) => (
                <tr key={e.name} data-entry={e.name}>
                  <td>
                    {e.type === 'dir'
                      ? <button type="button" class="link" onClick={() => setDir(joinPath(dir, e.name))} aria-label={`Open directory ${e.name}`}>{e.name}/</button>
                      : e.type === 'link' ? <span class="symlink" title="A symbolic link: shown, never followed">{e.name} ↪</span>
                      : <span>{e.name}</span>}
                  </td>
                  <td>{e.type === 'dir' ? 'directory' : e.type === 'link' ? 'link' : e.type === 'file' ? 'file' : 'other'}</td>
                  <td>{e.type === 'file' ? fmtSize(e.size) : ''}</td>
                  <td>{new Date(e.mtime).toLocaleString()}</td>
                  <td>
                    <div class="file-actions">
                      {e.type === 'file' && <a class="btn" href={folders.downloadUrl(f.name, joinPath(dir, e.name))} download={e.name}
                        aria-label={`Download ${e.name}`}>Download</a>}
                      <Button onClick={() => setMoving(e)} disabled={readOnly} label={`Rename or move ${e.name}`}>Rename</Button>
                      <Button kind="danger" onClick={() => setRemoving(e)} disabled={readOnly} label={`Remove ${e.name}`}>Remove</Button>
                    </div>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </div>
      <MkdirDialog open={mkdirOpen} folder={f.name} dir={dir} onClose={() => setMkdirOpen(false)}
        onDone={() => { setMkdirOpen(false); load(); props.onChanged(); }} />
      <MoveDialog entry={moving} folder={f.name} dir={dir} onClose={() => setMoving(null)}
        onDone={() => { setMoving(null); load(); }} />
      <RemoveFileDialog entry={removing} folder={f.name} dir={dir} onClose={() => setRemoving(null)}
        onDone={() => { setRemoving(null); load(); props.onChanged(); }} />
    </section>
  );
}

function MkdirDialog(props: { open: boolean; folder: string; dir: string; onClose: () => void; onDone: () => void }) {
  const [name, setName] = useState('');
  const [error, setError] = useState<string | null>(null);
  useLayoutEffect(() => { if (props.open) { setName(''); setError(null); } }, [props.open]);
  const submit = async (e: Event) => {
    e.preventDefault();
    const bad = checkEntryName(name);
    if (bad) { setError(bad); return; }
    try {
      await folders.mkdir(props.folder, joinPath(props.dir, name));
      props.onDone();
    } catch (err) { setError(`Cannot make the directory: ${(err as Error).message}`); }
  };
  return (
    <Dialog open={props.open} title="New directory" onClose={props.onClose}>
      <form onSubmit={submit}>
        <TextField label="Directory name" value={name} onInput={setName} required hint={`In /${props.dir}`} />
        <ErrorText error={error} />
        <div class="actions">
          <Button onClick={props.onClose}>Cancel</Button>
          <Button type="submit" kind="primary">Create</Button>
        </div>
      </form>
    </Dialog>
  );
}

// Rename in place, or move: the new path is relative to the folder.
function MoveDialog(props: { entry: FileEntry | null; folder: string; dir: string; onClose: () => void; onDone: () => void }) {
  const [to, setTo] = useState('');
  const [error, setError] = useState<string | null>(null);
  const from = props.entry ? joinPath(props.dir, props.entry.name) : '';
  useLayoutEffect(() => { setTo(from); setError(null); }, [props.entry]);
  const submit = async (e: Event) => {
    e.preventDefault();
    const t = to.trim().replace(/^\/+/, '');
    if (!t || t.split('/').some((c) => !c || c === '.' || c === '..')) {
      setError('Enter a path inside the folder, such as results/run1.csv (no empty, . or .. parts).');
      return;
    }
    if (t === from) { props.onClose(); return; }
    try {
      await folders.move(props.folder, from, t);
      props.onDone();
    } catch (err) { setError(`Cannot move: ${(err as Error).message}`); }
  };
  return (
    <Dialog open={!!props.entry} title={`Rename or move ${props.entry?.name ?? ''}`} onClose={props.onClose}>
      <form onSubmit={submit}>
        <TextField label="New path" value={to} onInput={setTo} required hint="Relative to the folder's root; its directory must exist." />
        <ErrorText error={error} />
        <div class="actions">
          <Button onClick={props.onClose}>Cancel</Button>
          <Button type="submit" kind="primary">Move</Button>
        </div>
      </form>
    </Dialog>
  );
}

function RemoveFileDialog(props: { entry: FileEntry | null; folder: string; dir: string; onClose: () => void; onDone: () => void }) {
  const [error, setError] = useState<string | null>(null);
  useEffect(() => setError(null), [props.entry]);
  const e = props.entry;
  const isDir = e?.type === 'dir';
  const remove = async () => {
    try {
      await folders.removeFile(props.folder, joinPath(props.dir, e!.name), isDir);
      props.onDone();
    } catch (err) { setError(`Cannot remove: ${(err as Error).message}`); }
  };
  return (
    <Dialog open={!!e} title="Remove file" onClose={props.onClose}>
      {e && <p>Remove {isDir ? 'directory' : e.type === 'link' ? 'link' : 'file'} <strong>{joinPath(props.dir, e.name)}</strong>
        {isDir ? ' and everything in it' : ''}{e.type === 'link' ? ' (the link only, not what it points to)' : ''}? This cannot be undone.</p>}
      <ErrorText error={error} />
      <div class="actions">
        <Button onClick={props.onClose}>Cancel</Button>
        <Button kind="danger" onClick={remove}>Remove</Button>
      </div>
    </Dialog>
  );
}
