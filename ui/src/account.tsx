// Self-service on the Credentials page (issue 35, item 7): a user's own
// password, changed with the current one (POST /v1/users/{id}/password
// {"old_password", "password"}; docs/api.md, "Users"), and an API key
// rotated: a new key with its label replaces it (POST
// /v1/keypairs/{key}/rotate; docs/api.md, "API keys").
import { useLayoutEffect, useState } from 'preact/hooks';
import { call, type User } from './api';
import { Button, Dialog, ErrorText, TextField } from './components';

const enc = encodeURIComponent;

export function PasswordSection({ user }: { user: User }) {
  const [old, setOld] = useState('');
  const [pw, setPw] = useState('');
  const [again, setAgain] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  // Said under the fields while typing; the server checks the rest
  // (length, characters) and its words are shown as they come.
  const mismatch = again && pw !== again ? 'The two new passwords differ.' : null;
  const same = pw && old && pw === old ? 'The new password is the same as the current one.' : null;
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true); setError(null); setNotice(null);
    try {
      await call('POST', `/api/v1/users/${enc(user.id)}/password`, { old_password: old, password: pw });
      setOld(''); setPw(''); setAgain('');
      setNotice('Your password was changed. Use the new one the next time you log in; your API keys stay valid.');
    } catch (err) {
      setError(`Cannot change your password: ${(err as Error).message}`);
    } finally { setBusy(false); }
  };
  return (
    <form class="inline password-form" onSubmit={submit} aria-labelledby="password-title">
      <h2 id="password-title">Password</h2>
      <p class="hint">The password you log in to the web UI with. To change it, give the current one first.</p>
      <ErrorText error={error} />
      {notice && <p class="notice" role="status">{notice}</p>}
      <TextField label="Current password" type="password" autocomplete="current-password" value={old} onInput={setOld} />
      <TextField label="New password" type="password" autocomplete="new-password" value={pw} onInput={setPw} error={same} />
      <TextField label="New password again" type="password" autocomplete="new-password" value={again} onInput={setAgain}
        error={mismatch} />
      <Button type="submit" kind="primary" disabled={busy || !old || !pw || pw !== again || !!same}>Change password</Button>
    </form>
  );
}

export interface Rotated { keypair: { access_key: string; label: string; created_at: string; main: boolean; current: boolean };
  secret_key: string; endpoint: string; revoked: string }

// Asks before rotating: programs that sign with the old key are refused
// from then on. onDone gets the new key, whose secret is shown once.
export function RotateDialog(props: { accessKey: string | null; label: string; onClose: () => void; onDone: (r: Rotated) => void }) {
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  useLayoutEffect(() => { setError(null); }, [props.accessKey]);
  const rotate = async () => {
    setBusy(true);
    try {
      props.onDone(await call<Rotated>('POST', `/api/v1/keypairs/${enc(props.accessKey!)}/rotate`));
    } catch (err) {
      setError(`Cannot rotate the key: ${(err as Error).message}`);
    } finally { setBusy(false); }
  };
  return (
    <Dialog open={!!props.accessKey} title="Rotate API key" onClose={props.onClose}>
      <p>Replace <code>{props.accessKey}</code>{props.label ? ` (${props.label})` : ''} by a new key with the same
        label? The old key is refused from then on: put the new one where the old one was used.</p>
      <ErrorText error={error} />
      <div class="actions">
        <Button onClick={props.onClose}>Cancel</Button>
        <Button kind="primary" disabled={busy} onClick={rotate}>Rotate</Button>
      </div>
    </Dialog>
  );
}
