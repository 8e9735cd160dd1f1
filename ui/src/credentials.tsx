// The Credentials page (docs/user-guide.md, "API keys for the CLI"): the
// user's own API keys (GET/POST /v1/keypairs, DELETE /v1/keypairs/{key};
// docs/api.md, "API keys") and SSH public keys (GET/POST /v1/ssh-keys,
// DELETE /v1/ssh-keys/{id}; docs/api.md, "SSH keys"). A new key's secret is shown once, with a
// client.conf to download in the format `tessera login` writes. Revoking the
// main key (the one the web UI signs with) signs this browser out.
import { useEffect, useLayoutEffect, useState } from 'preact/hooks';
import { api, call, type User } from './api';
import { Button, Dialog, ErrorText, TextField } from './components';
import { PasswordSection, RotateDialog } from './account';

export interface Keypair { access_key: string; label: string; created_at: string; main: boolean; current: boolean }
interface KeyList { keypairs: Keypair[]; endpoint: string; max: number }
interface NewKey { keypair: Keypair; secret_key: string; endpoint: string }

const enc = encodeURIComponent;
export const keys = {
  list: () => call<KeyList>('GET', '/api/v1/keypairs'),
  create: (label: string) => call<NewKey>('POST', '/api/v1/keypairs', label ? { label } : {}),
  revoke: (ak: string) => call<{ revoked: string; main_replaced: boolean }>('DELETE', `/api/v1/keypairs/${enc(ak)}`),
};

export interface SshKey { id: string; type: string; fingerprint: string; comment: string }
export const sshKeys = {
  list: () => call<{ keys: SshKey[]; max: number }>('GET', '/api/v1/ssh-keys'),
  add: (key: string) => call<SshKey>('POST', '/api/v1/ssh-keys', { key }),
  remove: (id: string) => call<{ removed: SshKey }>('DELETE', `/api/v1/ssh-keys/${enc(id)}`),
};

// The SSH keys section: what `tessera user keys` does, for the sshd of
// the user's sessions (docs/user-guide.md, "Working from your own machine").
function SshKeys() {
  const [list, setList] = useState<{ keys: SshKey[]; max: number } | null>(null);
  const [text, setText] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [removing, setRemoving] = useState<SshKey | null>(null);
  const load = async () => {
    try { setList(await sshKeys.list()); } catch (err) { setError(`Cannot list your SSH keys: ${(err as Error).message}`); }
  };
  useEffect(() => { load(); }, []);
  const add = async (e: Event) => {
    e.preventDefault();
    setBusy(true); setError(null); setNotice(null);
    try {
      const k = await sshKeys.add(text.trim());
      setText('');
      setNotice(`SSH key ${k.fingerprint} added: sessions you start from now on accept it.`);
      await load();
    } catch (err) {
      setError(`Cannot add the key: ${(err as Error).message}`);
    } finally { setBusy(false); }
  };
  const remove = async () => {
    const k = removing!;
    setBusy(true);
    try {
      await sshKeys.remove(k.id);
      setRemoving(null);
      setNotice(`SSH key ${k.fingerprint} removed.`);
      await load();
    } catch (err) {
      setRemoving(null);
      setError(`Cannot remove the key: ${(err as Error).message}`);
    } finally { setBusy(false); }
  };
  const full = list !== null && list.keys.length >= list.max;
  return (
    <div class="ssh-keys">
      <h2>SSH keys</h2>
      <p class="hint">Your sessions' SSH server accepts these keys: <code>tessera session ssh NAME</code>, or
        the block of <code>tessera session ssh-config NAME</code> for ssh, scp, sftp, rsync and VS Code.
        A session accepts the keys you had when it started.</p>
      <ErrorText error={error} />
      {notice && <p class="notice" role="status">{notice}</p>}
      {list === null ? <p>Loading…</p> : list.keys.length === 0 ? <p>No SSH keys yet.</p> : (
        <div class="table-scroll">
          <table class="ssh-keys-table">
            <thead><tr><th scope="col">Type</th><th scope="col">Fingerprint</th><th scope="col">Comment</th>
              <th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
            <tbody>
              {list.keys.map((k) => (
                <tr key={k.id} data-ssh-key={k.id}>
                  <td>{k.type}</td>
                  <td><code>{k.fingerprint}</code></td>
                  <td>{k.comment || '—'}</td>
                  <td><Button kind="danger" onClick={() => setRemoving(k)} label={`Remove SSH key ${k.comment || k.fingerprint}`}>Remove</Button></td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <form class="inline" onSubmit={add} aria-label="Add SSH key">
        <h3>Add an SSH key</h3>
        <div class="field">
          <label for="ssh-key-text">Public key</label>
          <textarea id="ssh-key-text" class="mono" rows={3} value={text} spellcheck={false}
            placeholder="ssh-ed25519 AAAA… you@laptop" aria-describedby="ssh-key-hint"
            onInput={(e) => setText((e.target as HTMLTextAreaElement).value)} />
          <small class="hint" id="ssh-key-hint">The contents of your .pub file, e.g. ~/.ssh/id_ed25519.pub. Never the
            private key.</small>
        </div>
        <Button type="submit" kind="primary" disabled={busy || full || !text.trim()}>Add key</Button>
        {full && <p class="hint">You have {list!.max} SSH keys, the most there may be: remove one first.</p>}
      </form>
      <Dialog open={!!removing} title="Remove SSH key" onClose={() => setRemoving(null)}>
        {removing && (
          <>
            <p>Remove <code>{removing.fingerprint}</code>{removing.comment ? ` (${removing.comment})` : ''}? Sessions
              started from then on refuse it; running ones keep the keys they started with.</p>
            <div class="actions">
              <Button onClick={() => setRemoving(null)}>Cancel</Button>
              <Button kind="danger" disabled={busy} onClick={remove}>Remove</Button>
            </div>
          </>
        )}
      </Dialog>
    </div>
  );
}

// client.conf as `tessera login` writes it (src/common/conf.c: key = value).
export function clientConf(endpoint: string, accessKey: string, secretKey: string): string {
  return `endpoint = ${endpoint}\naccess_key = ${accessKey}\nsecret_key = ${secretKey}\n`;
}

function download(name: string, text: string) {
  const url = URL.createObjectURL(new Blob([text], { type: 'text/plain' }));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

function NewKeyDialog(props: { made: NewKey | null; onClose: () => void }) {
  const [endpoint, setEndpoint] = useState('');
  useLayoutEffect(() => { if (props.made) setEndpoint(props.made.endpoint || location.origin); }, [props.made]);
  const k = props.made;
  const ep = endpoint.trim();
  return (
    <Dialog open={!!k} title="New API key" onClose={props.onClose}>
      {k && (
        <div class="new-key">
          <p>Copy the secret key now or download a client.conf: <strong>the secret is not shown again.</strong></p>
          <dl class="key-pair">
            <dt>Access key</dt><dd><code data-field="access_key">{k.keypair.access_key}</code></dd>
            <dt>Secret key</dt><dd><code data-field="secret_key">{k.secret_key}</code></dd>
          </dl>
          <TextField label="API endpoint" value={endpoint} onInput={setEndpoint}
            hint="The manager's address as your computer reaches it; your administrator knows it if this one is not." />
          <p class="hint">Save the file as ~/.config/tessera/client.conf (chmod 600), or point TESSERA_CONFIG at it.
            The same as: tessera login --endpoint {ep || 'URL'} --access-key {k.keypair.access_key} --secret-key …</p>
          <div class="actions">
            <Button disabled={!ep} onClick={() => download('client.conf', clientConf(ep, k.keypair.access_key, k.secret_key))}>
              Download client.conf</Button>
            <Button kind="primary" onClick={props.onClose}>Done</Button>
          </div>
        </div>
      )}
    </Dialog>
  );
}

function RevokeDialog(props: { keypair: Keypair | null; onClose: () => void; onDone: (mainReplaced: boolean, wasCurrent: boolean) => void }) {
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  useLayoutEffect(() => { setError(null); }, [props.keypair]);
  const k = props.keypair;
  const revoke = async () => {
    setBusy(true);
    try {
      const r = await keys.revoke(k!.access_key);
      props.onDone(r.main_replaced, k!.current);
    } catch (err) {
      setError(`Cannot revoke the key: ${(err as Error).message}`);
    } finally { setBusy(false); }
  };
  return (
    <Dialog open={!!k} title="Revoke API key" onClose={props.onClose}>
      {k && (
        <>
          <p>Revoke <code>{k.access_key}</code>{k.label ? ` (${k.label})` : ''}? Every program that signs with it is
            refused from then on.</p>
          {k.main && <p><strong>This is your main key: the web UI signs with it.</strong> Revoking it signs you out
            of the web UI in every browser, this one too, and makes a new main key; log in again to go on.</p>}
          <ErrorText error={error} />
          <div class="actions">
            <Button onClick={props.onClose}>Cancel</Button>
            <Button kind="danger" disabled={busy} onClick={revoke}>Revoke</Button>
          </div>
        </>
      )}
    </Dialog>
  );
}

export function CredentialsPage(props: { user: User; onSignedOut: () => void }) {
  const [list, setList] = useState<KeyList | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [label, setLabel] = useState('');
  const [busy, setBusy] = useState(false);
  const [made, setMade] = useState<NewKey | null>(null);
  const [revoking, setRevoking] = useState<Keypair | null>(null);
  const [rotating, setRotating] = useState<Keypair | null>(null);

  const load = async () => {
    try {
      setList(await keys.list());
    } catch (err) {
      setError(`Cannot list your API keys: ${(err as Error).message}`);
    }
  };
  useEffect(() => { load(); }, []);

  const create = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    setNotice(null);
    try {
      const r = await keys.create(label.trim());
      setMade(r);
      setLabel('');
      await load();
    } catch (err) {
      setError(`Cannot make a key: ${(err as Error).message}`);
    } finally { setBusy(false); }
  };

  const revoked = async (mainReplaced: boolean, wasCurrent: boolean) => {
    const ak = revoking?.access_key;
    setRevoking(null);
    if (mainReplaced && wasCurrent) {
      // This browser's key is gone: its login with it.
      try { await api.logout(); } catch { /* signed out anyway */ }
      props.onSignedOut();
      return;
    }
    setNotice(`API key ${ak} revoked.`);
    await load();
  };

  const full = list !== null && list.keypairs.length >= list.max;
  return (
    <section class="credentials-page" aria-labelledby="credentials-title">
      <div class="toolbar">
        <h1 id="credentials-title">Credentials</h1>
      </div>
      <p class="hint">API keys let the tessera command line and your scripts act as {props.user.email}. Keep a
        secret key like a password; revoke a key you no longer use or that may have leaked.</p>
      <ErrorText error={error} />
      {notice && <p class="notice" role="status">{notice}</p>}
      <h2>API keys</h2>
      {list === null ? <p>Loading…</p> : (
        <div class="table-scroll">
          <table class="keys">
            <thead><tr><th scope="col">Access key</th><th scope="col">Label</th><th scope="col">Created</th>
              <th scope="col">Use</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
            <tbody>
              {list.keypairs.map((k) => (
                <tr key={k.access_key} data-key={k.access_key}>
                  <td><code>{k.access_key}</code></td>
                  <td>{k.label || '—'}</td>
                  <td>{k.created_at ? new Date(k.created_at).toLocaleString() : ''}</td>
                  <td>{k.main && <span class="chip main-key" title="The web UI signs with this key">main{k.current ? ' · this browser' : ''}</span>}</td>
                  <td class="key-actions">
                    {/* The main key is the web UI's: revoking replaces it (and signs out). */}
                    {!k.main && <Button onClick={() => setRotating(k)} label={`Rotate ${k.access_key}`}>Rotate</Button>}
                    <Button kind="danger" onClick={() => setRevoking(k)} label={`Revoke ${k.access_key}`}>Revoke</Button></td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <form class="inline" onSubmit={create} aria-label="New API key">
        <h3>New API key</h3>
        <TextField label="Label" value={label} onInput={setLabel} placeholder="e.g. laptop"
          hint="Optional: what the key is for, shown in this list." />
        <Button type="submit" kind="primary" disabled={busy || full}>Create key</Button>
        {full && <p class="hint">You have {list!.max} keys, the most there may be: revoke one first.</p>}
      </form>
      <SshKeys />
      <PasswordSection user={props.user} />
      <NewKeyDialog made={made} onClose={() => setMade(null)} />
      <RotateDialog accessKey={rotating?.access_key ?? null} label={rotating?.label ?? ''} onClose={() => setRotating(null)}
        onDone={(r) => { setRotating(null); setNotice(`API key ${r.revoked} rotated: ${r.keypair.access_key} replaces it.`); setMade(r); load(); }} />
      <RevokeDialog keypair={revoking} onClose={() => setRevoking(null)} onDone={revoked} />
    </section>
  );
}
