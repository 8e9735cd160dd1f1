// The Sessions page's history (issue 35 item 1): the Running / Finished
// switch, the finished sessions paged over the API's continue tokens
// (GET /v1/sessions?status=TERMINATED,CANCELLED,ERROR&all=1&order=newest
// &limit=N, docs/api.md "List sessions"), and the choice of columns. All
// three live in the URL's query (view=finished, page=N, per=N, cols=...),
// so that a reload or a shared link shows the same.
import { useEffect, useId, useRef, useState } from 'preact/hooks';
import { api4, fmtConfig, type SessionFull, type User } from './api';
import { Button, Email, ErrorText, Name } from './components';
import { navigate, sessionHref } from './session';

export type Show = 'running' | 'finished';
// The columns one may hide; the name always shows.
export type Col = 'image' | 'status' | 'config' | 'usage' | 'node' | 'age' | 'ended' | 'exit';
export const COLS: Record<Col, string> = {
  image: 'Image', status: 'Status', config: 'Configuration', usage: 'Usage', node: 'Node', age: 'Age',
  ended: 'Ended', exit: 'Exit code',
};
// Usage is live (running only); Ended and Exit code are the history's.
const FOR: Record<Show, Col[]> = {
  running: ['image', 'status', 'config', 'usage', 'node', 'age'],
  finished: ['image', 'status', 'config', 'node', 'age', 'ended', 'exit'],
};
export const PER_PAGE = [10, 25, 50, 100];
// The age column of finished sessions shows when each was created.
export const colLabel = (c: Col, show: Show) => (c === 'age' && show === 'finished' ? 'Created' : COLS[c]);

export interface HistoryView { show: Show; page: number; per: number; cols: Col[] | null }

export function readHistory(q: URLSearchParams): HistoryView {
  const per = Number(q.get('per'));
  const page = Number(q.get('page'));
  const cols = q.get('cols');
  return {
    show: q.get('view') === 'finished' ? 'finished' : 'running',
    page: Number.isInteger(page) && page >= 1 && page <= 1000 ? page : 1,
    per: PER_PAGE.includes(per) ? per : 25,
    cols: cols === null ? null : cols.split(',').filter((c): c is Col => c in COLS),
  };
}
export function writeHistory(v: HistoryView, q: URLSearchParams) {
  if (v.show === 'finished') q.set('view', 'finished');
  if (v.show === 'finished' && v.page > 1) q.set('page', String(v.page));
  if (v.show === 'finished' && v.per !== 25) q.set('per', String(v.per));
  if (v.cols) q.set('cols', v.cols.join(','));
}
// The columns shown: those chosen that this view has, else its default.
export function shownCols(v: HistoryView): Set<Col> {
  return new Set(v.cols ? v.cols.filter((c) => FOR[v.show].includes(c)) : FOR[v.show]);
}

export function ViewSwitch({ show, onChange }: { show: Show; onChange: (s: Show) => void }) {
  return (
    <div class="seg" role="group" aria-label="Which sessions">
      {(['running', 'finished'] as Show[]).map((s) => (
        <button key={s} type="button" class={`btn seg-btn${show === s ? ' on' : ''}`} aria-pressed={show === s}
          onClick={() => onChange(s)}>{s === 'running' ? 'Running' : 'Finished'}</button>
      ))}
    </div>
  );
}

// Which columns show: a disclosure of checkboxes (native, keyboard-usable).
export function ColumnPicker({ v, onChange }: { v: HistoryView; onChange: (cols: Col[]) => void }) {
  const shown = shownCols(v);
  const id = useId();
  return (
    <details class="col-picker">
      <summary>Columns</summary>
      <fieldset aria-labelledby={id}>
        <legend id={id} class="sr-only">Columns to show</legend>
        {FOR[v.show].map((c) => (
          <label key={c} class="check-inline">
            <input type="checkbox" checked={shown.has(c)} onChange={(e) => {
              const on = (e.target as HTMLInputElement).checked;
              // Kept in the order of the table; the other view's choice stays.
              const other = (v.cols ?? []).filter((x) => !FOR[v.show].includes(x));
              onChange([...other, ...FOR[v.show].filter((x) => (x === c ? on : shown.has(x)))]);
            }} /> {colLabel(c, v.show)}
          </label>
        ))}
      </fieldset>
    </details>
  );
}

function fmtWhen(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}
function fmtRan(s: SessionFull): string {
  if (!s.started_at || !s.terminated_at) return 'never ran';
  const sec = Math.max(0, Math.round((Date.parse(s.terminated_at) - Date.parse(s.started_at)) / 1000));
  const m = Math.floor(sec / 60);
  return sec < 60 ? `ran ${sec} s` : m < 60 ? `ran ${m} min` : `ran ${Math.floor(m / 60)} h ${m % 60} min`;
}

// The finished sessions, newest first, a page at a time. The API pages
// forward only, by tokens it alone makes: the tokens seen are kept, so
// Previous is one call, and a link to page N walks N pages once.
export function FinishedSessions(props: {
  user: User; v: HistoryView; project: string; owner: string; showOwners: boolean; onPage: (page: number) => void;
}) {
  const { v, project, owner } = props;
  const [rows, setRows] = useState<SessionFull[] | null>(null);
  const [more, setMore] = useState(false);
  const [error, setError] = useState<string | null>(null);
  // tokens[i]: the continue token that reads page i + 2; per filter set.
  const tokens = useRef<{ key: string; list: string[] }>({ key: '', list: [] });
  const key = `${project}|${owner}|${v.per}`;
  useEffect(() => {
    let stop = false;
    if (tokens.current.key !== key) tokens.current = { key, list: [] };
    const base: Record<string, string> = { status: 'TERMINATED,CANCELLED,ERROR', all: '1', order: 'newest', limit: String(v.per) };
    if (project) base.project = project;
    if (owner) base.owner = owner;
    setError(null);
    (async () => {
      try {
        const known = tokens.current.list;
        let page = 1;
        let r;
        if (v.page > 1 && known[v.page - 2]) {
          r = await api4.sessionPage({ ...base, continue: known[v.page - 2] });
          page = v.page;
        } else {
          r = await api4.sessionPage(base);
        }
        // A link to page N: walk there from the first.
        while (page < v.page && r.continue) {
          known[page - 1] = r.continue;
          r = await api4.sessionPage({ ...base, continue: r.continue });
          page++;
        }
        if (stop) return;
        if (r.continue) known[page - 1] = r.continue;
        if (page !== v.page) props.onPage(page);   // fewer pages than the link said
        setRows(r.sessions);
        setMore(!!r.continue);
      } catch (e) {
        if (!stop) { setError((e as Error).message); setRows([]); }
      }
    })();
    return () => { stop = true; };
  }, [key, v.page]);

  const cols = shownCols(v);
  if (rows === null) return <div class="skeleton table-skeleton" aria-label="Loading the finished sessions" />;
  const open = (s: SessionFull) => navigate(sessionHref(s.id));
  return (
    <>
      <ErrorText error={error} />
      {rows.length === 0 && !error ? (
        <p class="empty">{v.page > 1 ? 'No more finished sessions.' : 'No finished sessions yet: sessions that were terminated, cancelled or failed show here.'}</p>
      ) : rows.length > 0 && (
        <div class="table-scroll">
          <table class="sessions finished stack">
            <caption class="sr-only">Finished sessions, newest first, page {v.page}</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                {(Object.keys(COLS) as Col[]).filter((c) => cols.has(c)).map((c) => <th key={c} scope="col">{colLabel(c, 'finished')}</th>)}
              </tr>
            </thead>
            <tbody>
              {rows.map((s) => (
                <tr key={s.id} data-session={s.name} class="clickable"
                  onClick={(e) => { if (!(e.target as HTMLElement).closest('a')) open(s); }}>
                  <td data-label="Name">
                    <a class="session-link" href={sessionHref(s.id)} onClick={(e) => { e.preventDefault(); open(s); }}>{s.name}</a>
                    {s.type === 'batch' && <span class="info badge"> batch</span>}
                    {props.showOwners && <div class="owner-line"><Email email={s.owner} /></div>}
                  </td>
                  {cols.has('image') && <td data-label="Image"><Name text={s.image} /></td>}
                  {cols.has('status') && <td data-label="Status">
                    <span class={`status st-${s.status.toLowerCase()}`}>{s.status}</span>
                    {s.status_info && <div class="info">{s.status_info}</div>}
                  </td>}
                  {cols.has('config') && <td data-label="Configuration">{fmtConfig(s.resources)}</td>}
                  {cols.has('node') && <td data-label="Node"><Name text={s.agent ?? '—'} host /></td>}
                  {cols.has('age') && <td data-label="Created">{fmtWhen(s.created_at)}</td>}
                  {cols.has('ended') && <td data-label="Ended">{fmtWhen(s.terminated_at)}<div class="info">{fmtRan(s)}</div></td>}
                  {cols.has('exit') && <td data-label="Exit code" data-testid="exit-code">{s.exit_code ?? '—'}</td>}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <nav class="pager" aria-label="Pages of finished sessions">
        <Button onClick={() => props.onPage(v.page - 1)} disabled={v.page <= 1}>Previous</Button>
        <span role="status">Page {v.page}</span>
        <Button onClick={() => props.onPage(v.page + 1)} disabled={!more}>Next</Button>
      </nav>
    </>
  );
}
