// The Queue page (/queue): the PENDING sessions in the order the
// scheduler's last pass tried them (GET /v1/queue), each with its
// position, priority and why it waits; a session's scheduling history
// (GET /v1/sessions/{id}/scheduling: each distinct reason the passes gave,
// first and last seen, how many passes); an admin's move (POST
// /v1/queue/{id}/move: a priority, or the front) and cancel (DELETE
// /v1/sessions/{id}). The same as `tessera queue ls|history|move|cancel`.
import { useEffect, useState } from 'preact/hooks';
import { api, envqApi, fmtAge, fmtConfig, type QueueEntry, type QueueHistory, type User } from './api';
import { Button, Dialog, Email, ErrorText, TextField } from './components';
import { navigate, sessionHref } from './session';

const POLL_MS = 3000;

function HistoryDialog({ entry, onClose }: { entry: QueueEntry | null; onClose: () => void }) {
  const [hist, setHist] = useState<(QueueEntry & { history: QueueHistory[]; history_max: number }) | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    setHist(null);
    setError(null);
    if (!entry) return;
    let live = true;
    const load = () => envqApi.scheduling(entry.id).then((h) => { if (live) setHist(h); })
      .catch((e) => { if (live) setError(`Cannot read the history: ${(e as Error).message}`); });
    load();
    const t = setInterval(load, POLL_MS);
    return () => { live = false; clearInterval(t); };
  }, [entry?.id]);
  const now = Date.now();
  return (
    <Dialog open={entry !== null} title={`Scheduling history of ${entry?.name ?? ''}`} onClose={onClose}>
      <ErrorText error={error} />
      {hist && (
        <>
          <p>
            {hist.status}{hist.position ? `, position ${hist.position}` : ''}, priority {hist.priority};{' '}
            {hist.passes} scheduling pass{hist.passes === 1 ? '' : 'es'} looked at it.
          </p>
          {hist.history.length === 0 ? <p class="empty">No pass has looked at it since the manager started.</p> : (
            <div class="table-scroll">
              <table class="stack queue-history">
                <thead><tr><th scope="col">First</th><th scope="col">Last</th><th scope="col">Passes</th><th scope="col">Reason</th></tr></thead>
                <tbody>
                  {hist.history.map((h) => (
                    <tr key={h.reason}>
                      <td data-label="First">{fmtAge(h.first, now)} ago</td>
                      <td data-label="Last">{fmtAge(h.last, now)} ago</td>
                      <td data-label="Passes">{h.passes}</td>
                      <td data-label="Reason">{h.reason}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
          <p class="hint">The last {hist.history_max} distinct reasons, kept in the manager’s memory while the session waits.</p>
        </>
      )}
      <div class="actions"><Button kind="primary" onClick={onClose}>Close</Button></div>
    </Dialog>
  );
}

function MoveDialog({ entry, onClose, onDone }: { entry: QueueEntry | null; onClose: () => void; onDone: (s: string) => void }) {
  const [prio, setPrio] = useState('0');
  const [error, setError] = useState<string | null>(null);
  useEffect(() => { setPrio(String(entry?.priority ?? 0)); setError(null); }, [entry?.id]);
  const n = Number(prio);
  const bad = !/^\d+$/.test(prio.trim()) || n > 100 ? 'A whole number from 0 to 100 (higher starts first).' : null;
  const move = async (body: { priority: number } | { top: true }) => {
    try {
      const r = await envqApi.move(entry!.id, body);
      onDone(`${r.name}: priority ${r.priority} (was ${r.previous_priority}). Its position follows at the next scheduling pass.`);
    } catch (e) { setError((e as Error).message); }
  };
  return (
    <Dialog open={entry !== null} title={`Move ${entry?.name ?? ''} in the queue`} onClose={onClose}>
      <form onSubmit={(e) => { e.preventDefault(); if (!bad) move({ priority: n }); }}>
        <p>The queue goes by priority first (higher first), then by the queue policy. A higher priority may also let it preempt lower-priority preemptible sessions.</p>
        <TextField label="Priority" type="number" value={prio} onInput={setPrio} error={bad} hint={`Now ${entry?.priority ?? 0}.`} />
        <ErrorText error={error} />
        <div class="actions">
          <Button onClick={onClose}>Cancel</Button>
          <Button onClick={() => move({ top: true })}>Move to front</Button>
          <Button type="submit" kind="primary" disabled={bad !== null}>Set priority</Button>
        </div>
      </form>
    </Dialog>
  );
}

export function QueuePage({ user }: { user: User }) {
  const [q, setQ] = useState<{ queue_policy: string; pending: number; sessions: QueueEntry[] } | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [histFor, setHistFor] = useState<QueueEntry | null>(null);
  const [moveFor, setMoveFor] = useState<QueueEntry | null>(null);
  const [cancelFor, setCancelFor] = useState<QueueEntry | null>(null);
  const [now, setNow] = useState(Date.now());
  const load = () => envqApi.queue().then((r) => { setQ(r); setError(null); setNow(Date.now()); })
    .catch((e) => setError(`Cannot read the queue: ${(e as Error).message}`));
  useEffect(() => {
    load();
    const t = setInterval(load, POLL_MS);
    return () => clearInterval(t);
  }, []);
  const cancel = async () => {
    const e = cancelFor!;
    setCancelFor(null);
    try { await api.terminate(e.id); setNotice(`${e.name} cancelled.`); } catch (err) { setError(`Cannot cancel ${e.name}: ${(err as Error).message}`); }
    load();
  };
  const list = q?.sessions ?? [];
  return (
    <section aria-labelledby="queue-title">
      <h1 id="queue-title">Queue</h1>
      <p class="hint">
        Sessions waiting to start, in the order the scheduler tries them{q ? ` (${q.queue_policy} within a priority)` : ''}.
        {q && !user.is_admin && q.pending > list.length ? ` ${q.pending} sessions wait in all; yours are listed.` : ''}
      </p>
      <ErrorText error={error} />
      {notice && <p class="notice" role="status">{notice}</p>}
      {q === null ? <p class="loading">Loading…</p> : list.length === 0 ? <p class="empty">No session is waiting.</p> : (
        <div class="table-scroll">
          <table class="stack queue">
            <thead><tr>
              <th scope="col">Position</th><th scope="col">Session</th>{user.is_admin && <th scope="col">Owner</th>}
              <th scope="col">Priority</th><th scope="col">Waiting</th><th scope="col">Resources</th><th scope="col">Reason</th>
              <th scope="col"><span class="sr-only">Actions</span></th>
            </tr></thead>
            <tbody>
              {list.map((e) => (
                <tr key={e.id} data-session={e.name}>
                  <td data-label="Position" class="queue-pos">{e.position ?? '—'}</td>
                  <td data-label="Session"><a href={sessionHref(e.id)} onClick={(ev) => { ev.preventDefault(); navigate(sessionHref(e.id)); }}>{e.name}</a></td>
                  {user.is_admin && <td data-label="Owner"><Email email={e.owner} /></td>}
                  <td data-label="Priority">{e.priority}</td>
                  <td data-label="Waiting">{fmtAge(e.created_at, now)}</td>
                  <td data-label="Resources">{fmtConfig(e.resources)}{e.containers > 1 ? ` × ${e.containers}` : ''}</td>
                  <td data-label="Reason" class="queue-reason">{e.reason ?? '—'}</td>
                  <td data-label="Actions"><div class="row-actions horizontal">
                    <Button onClick={() => setHistFor(e)} label={`Scheduling history of ${e.name}`}>History</Button>
                    {user.is_admin && <Button onClick={() => { setNotice(null); setMoveFor(e); }} label={`Move ${e.name}`}>Move…</Button>}
                    {(user.is_admin || e.owner === user.email) && <Button kind="danger" onClick={() => setCancelFor(e)} label={`Cancel ${e.name}`}>Cancel</Button>}
                  </div></td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <HistoryDialog entry={histFor} onClose={() => setHistFor(null)} />
      <MoveDialog entry={moveFor} onClose={() => setMoveFor(null)} onDone={(s) => { setMoveFor(null); setNotice(s); load(); }} />
      <Dialog open={cancelFor !== null} title={`Cancel ${cancelFor?.name ?? ''}?`} onClose={() => setCancelFor(null)}>
        <p>It leaves the queue and never starts{cancelFor && cancelFor.owner !== user.email ? <> (its owner, <Email email={cancelFor.owner} />, sees it CANCELLED)</> : null}.</p>
        <div class="actions">
          <Button onClick={() => setCancelFor(null)}>Keep it</Button>
          <Button kind="danger" onClick={cancel}>Cancel session</Button>
        </div>
      </Dialog>
    </section>
  );
}
