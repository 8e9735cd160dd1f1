// The Environments page (/environments): an admin's image catalog (GET
// /v1/images?all=1) with the nodes that hold each image and its size,
// rescan (POST /v1/images/rescan), aliases (PUT/DELETE
// /v1/images/aliases/{alias}) and removal (DELETE /v1/images/{ref}); and
// every user's own private images, the sessions they converted
// (/environments?tab=mine), with copy-name, launch and delete. The same
// calls as `tessera image ls|rescan|alias|unalias|rm`.
import { useEffect, useState } from 'preact/hooks';
import { envqApi, fmtBytes, fmtConfig, type CatalogImage, type User } from './api';
import { Button, Dialog, ErrorText, Name, TextField } from './components';
import { frameworksLine } from './launch';
import { CopyName, launchFrom } from './imagename';

type Tab = 'catalog' | 'mine';
function tabFromUrl(admin: boolean): Tab {
  return !admin || new URLSearchParams(location.search).get('tab') === 'mine' ? 'mine' : 'catalog';
}

function apps(img: CatalogImage): string {
  return (img.service_ports ?? []).map((p) => p.name).join(', ');
}

// One confirmation dialog for the destructive actions: what goes, where,
// and the button that does it.
interface Confirm { title: string; body: string; action: string; run: () => Promise<unknown>; done: string }

function Catalog({ onNotice }: { onNotice: (s: string) => void }) {
  const [images, setImages] = useState<CatalogImage[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [confirm, setConfirm] = useState<Confirm | null>(null);
  const [aliasFor, setAliasFor] = useState<CatalogImage | null>(null);
  const [alias, setAlias] = useState('');
  const [aliasError, setAliasError] = useState<string | null>(null);
  const [filter, setFilter] = useState('');

  const load = () => envqApi.images(true).then((r) => { setImages(r.images); setError(null); })
    .catch((e) => setError(`Cannot read the image catalog: ${(e as Error).message}`));
  useEffect(() => { load(); }, []);

  const rescan = async () => {
    setBusy(true);
    try {
      const r = await envqApi.rescan();
      onNotice(`Rescanned: ${r.nodes} of ${r.nodes_alive} node${r.nodes_alive === 1 ? '' : 's'} answered; ${r.images} image${r.images === 1 ? '' : 's'} in the catalog.`);
      await load();
    } catch (e) {
      setError(`Cannot rescan: ${(e as Error).message}`);
    } finally { setBusy(false); }
  };
  const runConfirm = async () => {
    const c = confirm!;
    setConfirm(null);
    try { await c.run(); onNotice(c.done); } catch (e) { setError(`${c.action} failed: ${(e as Error).message}`); }
    load();
  };
  const saveAlias = async (e: Event) => {
    e.preventDefault();
    const a = alias.trim();
    if (!a) { setAliasError('Give the alias a name, e.g. python or pytorch-latest.'); return; }
    try {
      await envqApi.setAlias(a, aliasFor!.ref);
      onNotice(`Alias ${a} now names ${aliasFor!.ref}.`);
      setAliasFor(null);
      load();
    } catch (err) { setAliasError((err as Error).message); }
  };

  // The catalog: what anyone may launch, and the hidden ones; private
  // images are their owners' (and listed on their My environments).
  const shown = (images ?? []).filter((i) => i.visibility !== 'private' && (!i.status || i.status === 'ready'))
    .filter((i) => !filter || `${i.ref} ${i.title} ${i.family} ${(i.aliases ?? []).join(' ')}`.toLowerCase().includes(filter.toLowerCase()))
    .sort((a, b) => a.family.localeCompare(b.family) || a.ref.localeCompare(b.ref));
  const total = shown.reduce((n, i) => n + i.size, 0);
  return (
    <section aria-labelledby="catalog-title">
      <div class="toolbar">
        <h2 id="catalog-title">Image catalog</h2>
        <Button onClick={rescan} disabled={busy}>{busy ? 'Rescanning…' : 'Rescan nodes'}</Button>
      </div>
      <p class="hint">Every image the nodes hold that sessions may start from, read from the nodes’ Docker and the images’ labels. Rescan asks every node again (an image pulled or removed by hand).</p>
      <ErrorText error={error} />
      <TextField label="Filter" value={filter} onInput={setFilter} placeholder="name, framework or alias" />
      {images === null ? <p class="loading">Loading…</p> : shown.length === 0 ? (
        <p class="empty">{filter ? 'No image matches the filter.' : 'No image on any node. Pull or build one (tessera image pull, tessera image build), then rescan.'}</p>
      ) : (
        <div class="table-scroll">
          <table class="stack env-catalog">
            <caption class="sr-only">{shown.length} images, {fmtBytes(total)} in all</caption>
            <thead><tr>
              <th scope="col">Environment</th><th scope="col">Image</th><th scope="col">Frameworks</th>
              <th scope="col">Minimum</th><th scope="col">Apps</th><th scope="col">Nodes</th><th scope="col">Size</th>
              <th scope="col">Aliases</th><th scope="col"><span class="sr-only">Actions</span></th>
            </tr></thead>
            <tbody>
              {shown.map((i) => (
                <tr key={i.ref} data-ref={i.ref}>
                  <td data-label="Environment">{i.title}{i.visibility === 'hidden' && <span class="badge" title="not offered in the launcher">hidden</span>}</td>
                  <td data-label="Image"><Name text={i.ref} mono /></td>
                  <td data-label="Frameworks">{frameworksLine(i, 4) || '—'}{i.cuda ? ` · CUDA ${i.cuda}` : ''}</td>
                  <td data-label="Minimum">{i.min.cpu || i.min.mem || i.min.fgpu ? fmtConfig(i.min) : '—'}</td>
                  <td data-label="Apps">{apps(i) || '—'}</td>
                  <td data-label="Nodes" class="env-nodes">{i.nodes.map((n) => <span key={n} class="badge"><Name text={n} host /></span>)}</td>
                  <td data-label="Size">{fmtBytes(i.size)}</td>
                  <td data-label="Aliases">{(i.aliases ?? []).length === 0 ? '—' : (i.aliases ?? []).map((a) => (
                    <span key={a} class="alias-chip">
                      <code>{a}</code>
                      <button type="button" class="chip-x" aria-label={`Remove alias ${a}`} onClick={() => setConfirm({
                        title: `Remove alias ${a}?`, action: `Removing alias ${a}`, done: `Alias ${a} removed.`,
                        body: `Sessions can no longer be started with the name ${a}; ${i.ref} itself stays, as do running sessions.`,
                        run: () => envqApi.removeAlias(a),
                      })}>×</button>
                    </span>))}</td>
                  <td data-label="Actions"><div class="row-actions horizontal">
                    <Button onClick={() => { setAlias(''); setAliasError(null); setAliasFor(i); }} label={`Add an alias for ${i.ref}`}>Alias…</Button>
                    <Button kind="danger" label={`Remove ${i.ref}`} onClick={() => setConfirm({
                      title: `Remove ${i.ref}?`, action: `Removing ${i.ref}`, done: `${i.ref} removed from ${i.nodes.join(', ')}.`,
                      body: `It is deleted from node${i.nodes.length === 1 ? '' : 's'} ${i.nodes.join(', ')} (${fmtBytes(i.size)} each). New sessions cannot start from it until it is pulled or built again. A session still using it keeps it (the removal is refused).`,
                      run: () => envqApi.removeImage(i.ref),
                    })}>Remove</Button>
                  </div></td>
                </tr>
              ))}
            </tbody>
          </table>
          <p class="hint">{shown.length} image{shown.length === 1 ? '' : 's'}, {fmtBytes(total)} in all (each on every node listed).</p>
        </div>
      )}
      <Dialog open={aliasFor !== null} title={`Alias for ${aliasFor?.ref ?? ''}`} onClose={() => setAliasFor(null)}>
        <form onSubmit={saveAlias}>
          <p>A short name users may launch instead of <code>{aliasFor?.ref}</code>. An alias that exists is moved to this image.</p>
          <TextField label="Alias" value={alias} onInput={(v) => { setAlias(v); setAliasError(null); }} mono error={aliasError}
            hint="An image name: lower case, e.g. python or pytorch:latest." />
          <div class="actions">
            <Button onClick={() => setAliasFor(null)}>Cancel</Button>
            <Button type="submit" kind="primary">Set alias</Button>
          </div>
        </form>
      </Dialog>
      <ConfirmDialog confirm={confirm} onCancel={() => setConfirm(null)} onConfirm={runConfirm} />
    </section>
  );
}

function ConfirmDialog(props: { confirm: Confirm | null; onCancel: () => void; onConfirm: () => void }) {
  const c = props.confirm;
  return (
    <Dialog open={c !== null} title={c?.title ?? ''} onClose={props.onCancel}>
      <p>{c?.body}</p>
      <div class="actions">
        <Button onClick={props.onCancel}>Cancel</Button>
        <Button kind="danger" onClick={props.onConfirm}>{c?.title.startsWith('Remove alias') ? 'Remove alias' : 'Remove'}</Button>
      </div>
    </Dialog>
  );
}

function Mine({ user, onNotice }: { user: User; onNotice: (s: string) => void }) {
  const [images, setImages] = useState<CatalogImage[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [confirm, setConfirm] = useState<Confirm | null>(null);
  const load = () => envqApi.images(false).then((r) => { setImages(r.images); setError(null); })
    .catch((e) => setError(`Cannot read your images: ${(e as Error).message}`));
  useEffect(() => { load(); }, []);
  const runConfirm = async () => {
    const c = confirm!;
    setConfirm(null);
    try { await c.run(); onNotice(c.done); } catch (e) { setError(`${c.action} failed: ${(e as Error).message}`); }
    load();
  };
  // Private images are their owner's: an admin sees everyone's in the
  // catalog's API, but this list is the user's own.
  // Those being converted (or whose conversion failed) are listed too.
  const mine = (images ?? []).filter((i) => (i.visibility === 'private' || (i.status && i.status !== 'ready')) && i.owner === user.email)
    .sort((a, b) => (b.committed_at ?? b.created_at ?? '').localeCompare(a.committed_at ?? a.created_at ?? ''));
  return (
    <section aria-labelledby="mine-title">
      <h2 id="mine-title">My environments</h2>
      <p class="hint">Your private images: sessions you converted (Convert to image on the Sessions page). Only you and administrators see them.</p>
      <ErrorText error={error} />
      {images === null ? <p class="loading">Loading…</p> : mine.length === 0 ? (
        <p class="empty">No private images yet. Convert a running session on the Sessions page to keep its installed packages as an image.</p>
      ) : (
        <div class="table-scroll">
          <table class="stack env-mine">
            <thead><tr>
              <th scope="col">Image</th><th scope="col">Made from</th><th scope="col">Made</th>
              <th scope="col">Nodes</th><th scope="col">Size</th><th scope="col"><span class="sr-only">Actions</span></th>
            </tr></thead>
            <tbody>
              {mine.map((i) => {
                const ready = !i.status || i.status === 'ready';
                return (
                  <tr key={i.ref} data-ref={i.ref}>
                    <td data-label="Image"><Name text={i.ref} mono />{!ready && <span class={`badge st-${i.status}`}>{i.status}</span>}
                      {i.error && <small class="error">{i.error}</small>}</td>
                    <td data-label="Made from">{i.source_session ? <>session <strong>{i.source_session}</strong>{i.source_image ? <><br />of <Name text={i.source_image} mono /></> : null}</> : '—'}</td>
                    <td data-label="Made">{(i.committed_at ?? i.created_at) ? `${(i.committed_at ?? i.created_at)!.replace('T', ' ').slice(0, 16)} UTC` : '—'}</td>
                    <td data-label="Nodes" class="env-nodes">{(i.nodes ?? []).map((n) => <span key={n} class="badge"><Name text={n} host /></span>)}{i.in_registry && <span class="badge">registry</span>}</td>
                    <td data-label="Size">{i.size ? fmtBytes(i.size) : '—'}</td>
                    <td data-label="Actions"><div class="row-actions horizontal">
                      <CopyName text={i.ref} label={`Copy the name ${i.ref}`} />
                      {ready && <Button kind="primary" onClick={() => launchFrom(i.ref)} label={`Launch a session from ${i.ref}`}>Launch</Button>}
                      {ready && <Button kind="danger" label={`Delete ${i.ref}`} onClick={() => setConfirm({
                        title: `Delete ${i.ref}?`, action: `Deleting ${i.ref}`, done: `${i.ref} deleted.`,
                        body: `It is removed from ${(i.nodes ?? []).join(', ') || 'its nodes'}; sessions can no longer start from it. The session it was made from is not touched.`,
                        run: () => envqApi.removeImage(i.ref),
                      })}>Delete</Button>}
                    </div></td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
      <ConfirmDialog confirm={confirm} onCancel={() => setConfirm(null)} onConfirm={runConfirm} />
    </section>
  );
}

export function EnvironmentsPage({ user }: { user: User }) {
  const [tab, setTab] = useState<Tab>(tabFromUrl(user.is_admin));
  const [notice, setNotice] = useState<string | null>(null);
  useEffect(() => {
    const onPop = () => setTab(tabFromUrl(user.is_admin));
    addEventListener('popstate', onPop);
    return () => removeEventListener('popstate', onPop);
  }, []);
  const pick = (t: Tab) => {
    history.replaceState(null, '', t === 'mine' ? '/environments?tab=mine' : '/environments');
    setTab(t);
    setNotice(null);
  };
  return (
    <section aria-labelledby="env-title" class="environments">
      <h1 id="env-title">Environments</h1>
      {user.is_admin && (
        <div class="tabs" role="tablist" aria-label="Environments">
          <button type="button" role="tab" id="tab-catalog" aria-selected={tab === 'catalog'} aria-controls="env-panel"
            onClick={() => pick('catalog')}>Catalog</button>
          <button type="button" role="tab" id="tab-mine" aria-selected={tab === 'mine'} aria-controls="env-panel"
            onClick={() => pick('mine')}>My environments</button>
        </div>
      )}
      {notice && <p class="notice" role="status">{notice}</p>}
      <div id="env-panel" role={user.is_admin ? 'tabpanel' : undefined} aria-labelledby={user.is_admin ? `tab-${tab}` : undefined}>
        {tab === 'catalog' ? <Catalog onNotice={setNotice} /> : <Mine user={user} onNotice={setNotice} />}
      </div>
    </section>
  );
}
