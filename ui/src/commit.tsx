import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { api, ApiError, type Commit, type Session } from './api';
import { Button, Dialog, ErrorText, TextField } from './components';
import { CopyName, launchFrom } from './imagename';

// The manager's default image name for a commit, computed as it does
// (src/manager/commits.c): the session's name lower-cased, runs of other
// characters turned into one '-'. The manager puts it under the owner's
// own name space, tessera-private/<email up to the @>-<12 characters of
// the owner's id>/, and answers with the full name.
function nameComponent(s: string, fallback: string): string {
  const out = s.toLowerCase().split(/[^a-z0-9]+/).filter(Boolean).join('-');
  return out || fallback;
}
export function defaultImageName(session: string): string {
  return nameComponent(session, 'session');
}
// The default tag: the UTC time, YYYYMMDD-HHMMSS.
export function defaultTag(d = new Date()): string {
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getUTCFullYear()}${p(d.getUTCMonth() + 1)}${p(d.getUTCDate())}-` +
    `${p(d.getUTCHours())}${p(d.getUTCMinutes())}${p(d.getUTCSeconds())}`;
}

// "Convert to image": commits a RUNNING session into a private image of
// its owner (POST /v1/sessions/{id}/commit), then follows the commit with
// the API's long poll until it is ready or failed. Closing the dialog stops
// following it; the commit itself goes on in the manager.
export function CommitDialog(props: { session: Session | null; onClose: () => void }) {
  const s = props.session;
  const [name, setName] = useState('');
  const [tag, setTag] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [commit, setCommit] = useState<Commit | null>(null);
  // Bumped on every open and close: a poll of an earlier opening stops.
  const epoch = useRef(0);

  // A layout effect, as the other resets on opening: it runs before the
  // dialog can take input (components.tsx, Dialog).
  useLayoutEffect(() => {
    epoch.current++;
    setError(null);
    setCommit(null);
    setBusy(false);
    if (s) {
      setName(defaultImageName(s.name));
      setTag(defaultTag());
    }
  }, [s?.id]);

  const follow = async (c: Commit, mine: number) => {
    while (c.status === 'committing' && epoch.current === mine) {
      try {
        c = (await api.commitWait(c.id, 25)).commit;
      } catch (e) {
        if (epoch.current !== mine) return;
        // The webserver or the manager restarting: try again shortly.
        if (e instanceof ApiError && (e.status === 0 || e.status >= 500)) {
          await new Promise((r) => setTimeout(r, 2000));
          continue;
        }
        setError(`Cannot follow the commit: ${(e as Error).message}`);
        return;
      }
      if (epoch.current === mine) setCommit(c);
    }
  };

  const submit = async (e: Event) => {
    e.preventDefault();
    if (!s) return;
    setError(null);
    const n = name.trim(), t = tag.trim();
    if (!n) { setError('Give the image a name, e.g. ' + defaultImageName(s.name) + '.'); return; }
    if (!t) { setError('Give the image a tag, e.g. ' + defaultTag() + '.'); return; }
    const mine = epoch.current;
    setBusy(true);
    try {
      const c = (await api.commit(s.id, { name: n, tag: t })).commit;
      if (epoch.current !== mine) return;
      setCommit(c);
      await follow(c, mine);
    } catch (err) {
      if (epoch.current === mine) setError(`Cannot convert ${s.name}: ${(err as Error).message}`);
    } finally {
      if (epoch.current === mine) setBusy(false);
    }
  };

  const done = commit && commit.status !== 'committing';
  return (
    <Dialog open={s !== null} title="Convert to image" onClose={props.onClose}>
      {s && (
        <form onSubmit={submit} class="commit">
          <p>
            Saves session <strong>{s.name}</strong>’s container (not its mounted folders) as a private image
            {s.owner ? <> of <strong>{s.owner}</strong></> : null}: only its owner and administrators see it
            and can launch sessions from it. The session keeps running.
          </p>
          <TextField label="Image name" value={name} onInput={setName} disabled={busy || commit !== null}
            hint={`Lower case; no registry host and no tag. It is saved under ${s.owner ? `${s.owner}’s` : 'the owner’s'} own name space, tessera-private/…/${name.trim() || 'NAME'}.`} />
          <TextField label="Tag" value={tag} onInput={setTag} disabled={busy || commit !== null} hint="Letters, digits, '_', '.' and '-'." />
          {commit?.status === 'committing' && (
            <p class="commit-state" role="status">
              <span class="spinner" aria-hidden="true" /> Converting into <code>{commit.ref}</code>… This takes
              a while for a large container; you may close this dialog, the conversion goes on.
            </p>
          )}
          {commit?.status === 'ready' && (
            <div class="commit-state ready" role="status">
              <p><strong>Ready:</strong> <code class="image-ref">{commit.ref}</code></p>
              <div class="row-actions horizontal">
                <Button kind="primary" onClick={() => { props.onClose(); launchFrom(commit.ref); }}>Launch from it</Button>
                <CopyName text={commit.ref} label={`Copy the name ${commit.ref}`} />
              </div>
              <p class="hint">
                It is listed on the Environments page, under My environments.
                {commit.push_error ? ` It was not pushed to the cluster registry (${commit.push_error}): it runs only on node ${commit.nodes?.join(', ') || 'where it was made'}.` : ''}
              </p>
            </div>
          )}
          {commit?.status === 'failed' && (
            <p class="error" role="alert">The conversion into {commit.ref} failed: {commit.error || 'no reason given'}</p>
          )}
          <ErrorText error={error} />
          <div class="actions">
            {done ? (
              <>
                {commit?.status === 'failed' && <Button onClick={() => { setCommit(null); setError(null); }}>Try again</Button>}
                <Button kind="primary" onClick={props.onClose}>Close</Button>
              </>
            ) : (
              <>
                <Button onClick={props.onClose}>{commit ? 'Close' : 'Cancel'}</Button>
                <Button type="submit" kind="primary" disabled={busy || commit !== null}>Convert</Button>
              </>
            )}
          </div>
        </form>
      )}
    </Dialog>
  );
}
