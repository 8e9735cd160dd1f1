import { useEffect, useState } from 'preact/hooks';
import { api, fmtAge, fmtConfig, type Node, type Session, type User } from './api';
import { Button, Dialog, ErrorText } from './components';
import { LaunchDialog } from './launch';
import { CommitDialog } from './commit';
import { AppChips, AppLauncherDialog, useSessionApps } from './apps';

const ENDED = new Set(['TERMINATED', 'CANCELLED']);

// Fields of a session this page reads beyond api.ts's Session: its type
// ("batch" ends with its command), how many of its processes the kernel
// killed for passing its memory limit, and whether it was removed.
type SessionRow = Session & { type?: string; oom_kills?: number; removed?: boolean };

// The status line under a status: why it waits, failed or is LOST (its
// node stopped answering), or, while it runs, that a process of it was
// killed for exceeding its memory limit.
function statusInfo(s: SessionRow): string | null {
  if (!s.status_info) return null;
  if (s.status === 'PENDING' || s.status === 'ERROR' || s.status === 'LOST') return s.status_info;
  if ((s.oom_kills ?? 0) > 0 && s.status === 'RUNNING') return s.status_info;
  return null;
}

// Live state: the manager's event stream (relayed by the webserver); when
// it is not available, polling every 2 s.
export function useClusterState() {
  const [sessions, setSessions] = useState<Session[]>([]);
  const [nodes, setNodes] = useState<Node[]>([]);
  const [error, setError] = useState<string | null>(null);

  const refresh = async () => {
    try {
      const [s, n] = await Promise.all([api.sessions(), api.nodes()]);
      setSessions(s.sessions);
      setNodes(n.nodes);
      setError(null);
    } catch (e) {
      setError((e as Error).message);
    }
  };

  useEffect(() => {
    let timer: number | undefined;
    let es: EventSource | null = null;
    const poll = () => {
      if (timer === undefined) timer = window.setInterval(refresh, 2000);
    };
    refresh();
    if (typeof EventSource !== 'undefined') {
      es = new EventSource('/api/v1/events');
      es.addEventListener('state', (ev) => {
        try {
          const d = JSON.parse((ev as MessageEvent).data);
          if (Array.isArray(d.sessions)) setSessions(d.sessions);
          if (Array.isArray(d.nodes)) setNodes(d.nodes);
          setError(null);
        } catch { /* ignore a malformed event */ }
      });
      es.addEventListener('relay_error', () => { es?.close(); poll(); });
      es.onerror = () => { if (es?.readyState === EventSource.CLOSED) poll(); };
    } else {
      poll();
    }
    return () => { es?.close(); if (timer !== undefined) clearInterval(timer); };
  }, []);

  return { sessions, nodes, error, refresh };
}

export function SessionsPage({ user }: { user: User }) {
  const { sessions, nodes, error, refresh } = useClusterState();
  const [launching, setLaunching] = useState(false);
  const [confirm, setConfirm] = useState<Session | null>(null);
  const [converting, setConverting] = useState<Session | null>(null);
  const [launcher, setLauncher] = useState<Session | null>(null);
  const apps = useSessionApps(sessions);
  const [actionError, setActionError] = useState<string | null>(null);
  const [now, setNow] = useState(Date.now());

  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, []);

  const terminate = async (s: Session) => {
    setConfirm(null);
    setActionError(null);
    try {
      await api.terminate(s.id);
      refresh();
    } catch (e) {
      setActionError(`Cannot terminate ${s.name}: ${(e as Error).message}`);
    }
  };

  const shown = (sessions as SessionRow[]).filter((s) => !ENDED.has(s.status) && !s.removed);
  return (
    <section aria-labelledby="sessions-title">
      <div class="toolbar">
        <h1 id="sessions-title">Sessions</h1>
        <Button kind="primary" onClick={() => setLaunching(true)}>Start</Button>
      </div>
      <ErrorText error={error} />
      <ErrorText error={actionError} />
      {shown.length === 0 ? (
        <p class="empty">No sessions. Press Start to launch one.</p>
      ) : (
        <div class="table-scroll">
        <table class="sessions">
          <caption class="sr-only">Your sessions{user.is_admin ? ' (administrators see everyone’s)' : ''}</caption>
          <thead>
            <tr>
              <th scope="col">Name</th><th scope="col">Image</th><th scope="col">Status</th>
              <th scope="col">Configuration</th><th scope="col">Node</th><th scope="col">Age</th>
              {user.is_admin && <th scope="col">Owner</th>}
              <th scope="col"><span class="sr-only">Actions</span></th>
            </tr>
          </thead>
          <tbody>
            {shown.map((s) => (
              <tr key={s.id} data-session={s.name}>
                <td>
                  {s.name}
                  {s.type === 'batch' && <span class="info badge" title="ends when its command ends"> batch</span>}
                  {s.status === 'RUNNING' && <AppChips apps={apps.get(s.id)} />}
                </td>
                <td>{s.image}</td>
                <td>
                  <span class={`status st-${s.status.toLowerCase()}`}>{s.status}</span>
                  {statusInfo(s) && (
                    <div class={(s.oom_kills ?? 0) > 0 && s.status === 'RUNNING' ? 'info oom' : 'info'}>
                      {statusInfo(s)}
                    </div>
                  )}
                </td>
                <td>{fmtConfig(s.resources)}</td>
                <td>{s.agent ?? '—'}</td>
                <td>{fmtAge(s.created_at, now)}</td>
                {user.is_admin && <td>{s.owner}</td>}
                <td><div class="row-actions">
                  {s.status === 'RUNNING' && (user.is_admin || s.owner === user.email) && (
                    <Button kind="primary" onClick={() => setLauncher(s)} label={`Apps of ${s.name}`}>Apps</Button>
                  )}
                  {s.status === 'RUNNING' && (user.is_admin || s.owner === user.email) && (
                    <Button onClick={() => setConverting(s)} label={`Convert ${s.name} to image`}>
                      Convert to image
                    </Button>
                  )}
                  <Button kind="danger" onClick={() => setConfirm(s)}
                    disabled={s.status === 'TERMINATING'}>Terminate</Button>
                </div></td>
              </tr>
            ))}
          </tbody>
        </table>
        </div>
      )}
      <Dialog open={confirm !== null} title="Terminate session" onClose={() => setConfirm(null)}>
        {confirm && (
          <>
            <p>Terminate session <strong>{confirm.name}</strong>? Its container is removed; this cannot be undone.</p>
            <div class="actions">
              <Button onClick={() => setConfirm(null)}>Cancel</Button>
              <Button kind="danger" onClick={() => terminate(confirm)}>Terminate</Button>
            </div>
          </>
        )}
      </Dialog>
      <AppLauncherDialog session={launcher} onClose={() => setLauncher(null)} />
      <CommitDialog session={converting} onClose={() => setConverting(null)} />
      <LaunchDialog open={launching} nodes={nodes} onClose={() => setLaunching(false)}
        onLaunched={() => { setLaunching(false); refresh(); }} />
    </section>
  );
}
