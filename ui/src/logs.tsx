// A session's log on its detail page: GET /v1/sessions/{ref}/logs with
// follow=1 (docs/api.md), read as a stream and shown as it arrives. At
// most MAX_LINES lines are kept (the oldest are dropped, and the page says
// so), each cut at MAX_LINE characters, so a chatty session cannot fill
// the browser's memory. A search field filters and highlights.
import { useEffect, useId, useRef, useState } from 'preact/hooks';
import type { JSX } from 'preact';
import { Button } from './components';
import { containerQuery } from './api';

const MAX_LINES = 5000;
const MAX_LINE = 4000;
const SHOWN = 1500;   // lines rendered at most (the newest of the matches)
const TAIL = 1000;    // lines asked for when connecting

type State = 'connecting' | 'streaming' | 'ended' | 'error';

function highlight(line: string, q: string) {
  if (!q) return line;
  const out: (string | JSX.Element)[] = [];
  const lower = line.toLowerCase();
  let i = 0, k = 0;
  for (;;) {
    const j = lower.indexOf(q, i);
    if (j < 0) break;
    if (j > i) out.push(line.slice(i, j));
    out.push(<mark key={k++}>{line.slice(j, j + q.length)}</mark>);
    i = j + q.length;
  }
  out.push(line.slice(i));
  return out;
}

// container: which of a cluster session's containers (main1 when not given).
// kept: the session ended and its container was removed; what the route
// answers is the last of its log, kept then (docs/api.md).
export function LogViewer(props: { sessionId: string; live: boolean; hasContainer: boolean; container?: string; kept?: boolean }) {
  const lines = useRef<string[]>([]);
  const dropped = useRef(0);
  const [version, setVersion] = useState(0);
  const [state, setState] = useState<State>('connecting');
  const [message, setMessage] = useState<string | null>(null);
  const [query, setQuery] = useState('');
  const [follow, setFollow] = useState(true);
  const [attempt, setAttempt] = useState(0);
  const pre = useRef<HTMLDivElement>(null);
  const searchId = useId();

  useEffect(() => {
    lines.current = [];
    dropped.current = 0;
    setVersion((v) => v + 1);
    if (!props.hasContainer) {
      setState('ended');
      setMessage(props.container ? `Container ${props.container} has not started yet: its log appears once it does.`
        : 'This session has no container yet: its log appears once it starts.');
      return;
    }
    const ctl = new AbortController();
    let partial = '';
    let timer: number | undefined;
    // Re-rendering per chunk would be wasteful on a fast log: at most
    // every 200 ms.
    const schedule = () => {
      if (timer === undefined) timer = window.setTimeout(() => { timer = undefined; setVersion((v) => v + 1); }, 200);
    };
    const push = (text: string) => {
      const parts = (partial + text).split('\n');
      partial = parts.pop() ?? '';
      if (partial.length > MAX_LINE) { parts.push(partial); partial = ''; }
      for (const p of parts) lines.current.push(p.length > MAX_LINE ? `${p.slice(0, MAX_LINE)} …[cut]` : p);
      const over = lines.current.length - MAX_LINES;
      if (over > 0) { lines.current.splice(0, over); dropped.current += over; }
      schedule();
    };
    setState('connecting');
    setMessage(null);
    (async () => {
      try {
        const url = `/api/v1/sessions/${encodeURIComponent(props.sessionId)}/logs?tail=${TAIL}${props.live ? '&follow=1' : ''}${containerQuery(props.container, '&')}`;
        const resp = await fetch(url, { credentials: 'same-origin', signal: ctl.signal, headers: { Accept: 'text/plain' } });
        if (!resp.ok) {
          let msg = `The server answered HTTP ${resp.status}.`;
          try { msg = (await resp.json())?.error?.message ?? msg; } catch { /* not JSON */ }
          setState('error');
          setMessage(resp.status === 409 && !props.kept ? 'This session has no container: there is no log to show.' : msg);
          return;
        }
        setState('streaming');
        const reader = resp.body!.getReader();
        const dec = new TextDecoder();
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          push(dec.decode(value, { stream: true }));
        }
        push(dec.decode());
        if (partial) { lines.current.push(partial); partial = ''; }
        setVersion((v) => v + 1);
        setState('ended');
        setMessage(props.live ? 'The log ended: the session’s container stopped, or the connection was cut.' : null);
      } catch (e) {
        if (ctl.signal.aborted) return;
        setState('error');
        setMessage(`The log stream broke: ${(e as Error).message}`);
      }
    })();
    return () => { ctl.abort(); if (timer !== undefined) clearTimeout(timer); };
  }, [props.sessionId, props.live, props.hasContainer, props.container, props.kept, attempt]);

  // Follow: keep the newest line in view (within the log's own box).
  useEffect(() => {
    const el = pre.current;
    if (el && follow) el.scrollTop = el.scrollHeight;
  }, [version, follow, query]);

  const q = query.trim().toLowerCase();
  const all = lines.current;
  const matches = q ? all.filter((l) => l.toLowerCase().includes(q)) : all;
  const shown = matches.length > SHOWN ? matches.slice(matches.length - SHOWN) : matches;
  const stateWord = state === 'connecting' ? 'Connecting…' : state === 'streaming' ? (props.live ? 'Following' : 'Reading') : state === 'ended' ? 'Ended' : 'Not available';
  return (
    <div class="logs">
      <div class="logs-bar">
        <div class="field logs-search">
          <label for={searchId}>Search the log</label>
          <input id={searchId} type="search" value={query} placeholder="text to find"
            onInput={(e) => setQuery((e.target as HTMLInputElement).value)} />
        </div>
        <label class="check-inline"><input type="checkbox" checked={follow}
          onChange={(e) => setFollow((e.target as HTMLInputElement).checked)} /> Follow</label>
        <span class={`logs-state st-log-${state}`} role="status">{stateWord}
          {q ? ` · ${matches.length} matching line${matches.length === 1 ? '' : 's'}` : ` · ${all.length} line${all.length === 1 ? '' : 's'}`}</span>
        {(state === 'ended' || state === 'error') && props.hasContainer && !props.kept &&
          <Button onClick={() => setAttempt((n) => n + 1)}>Reconnect</Button>}
      </div>
      {props.kept && state !== 'error' &&
        <p class="hint" data-testid="log-kept">Its container was removed when it ended: these are the last lines of its log (up to 200), kept then.</p>}
      <div class="log-box" ref={pre} tabIndex={0} aria-label="Session log" data-lines={all.length}>
        {dropped.current > 0 && <div class="log-note">{dropped.current} older lines are not kept here (the page keeps the last {MAX_LINES}).</div>}
        {matches.length > shown.length && <div class="log-note">Showing the last {shown.length} of {matches.length} {q ? 'matching ' : ''}lines.</div>}
        {shown.length === 0 && state !== 'connecting'
          ? <div class="log-note">{q ? 'No line matches.' : 'Nothing written yet.'}</div>
          : shown.map((l, i) => <div key={i} class="log-line">{highlight(l, q)}</div>)}
      </div>
      {message && <p class={state === 'error' ? 'error' : 'hint'}>{message}</p>}
    </div>
  );
}
