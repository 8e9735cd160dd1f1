// What every page's header carries besides the nav (issue 35, item 7):
// the notifications tray, which says when one of the user's sessions
// started, failed or was preempted, and the announcement banner an admin
// posts (the setting "announcement", docs/admin.md). The tray reads the
// user's own sessions (GET /v1/sessions?owner=ME) every few seconds: a
// status it saw change is a notification, kept in this browser
// (localStorage) until dismissed.
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, call, type Session, type User } from './api';
import { Button } from './components';
import { navigate, sessionHref } from './session';

// ---- the user's own sessions, read every few seconds ----

// Not the event stream: a page that has one (the Sessions page) and the
// tray would hold two per tab, and a browser keeps at most 6 connections
// to one HTTP/1.1 site, so three such tabs would stall every other
// request. The tray asks for the user's own sessions only (?owner=), a
// small answer, every 5 s (less often in a hidden tab: browsers throttle).
export const TRAY_POLL_MS = 5000;
export function pollOwnSessions(email: string, l: (sessions: Session[]) => void): () => void {
  let stopped = false;
  const tick = () => call<{ sessions: Session[] }>('GET', `/api/v1/sessions?owner=${encodeURIComponent(email)}`)
    .then((r) => { if (!stopped && Array.isArray(r?.sessions)) l(r.sessions); })
    .catch(() => { /* the next tick tries again */ });
  tick();
  const t = window.setInterval(tick, TRAY_POLL_MS);
  return () => { stopped = true; clearInterval(t); };
}

// ---- notifications ----

export interface Note {
  id: string; session: string; name: string; kind: 'started' | 'failed' | 'preempted';
  text: string; at: number; read: boolean;
}
const MAX_NOTES = 50;
const storeKey = (email: string) => `tessera.notifications.${email}`;

function loadNotes(email: string): Note[] {
  try {
    const v = JSON.parse(localStorage.getItem(storeKey(email)) ?? '[]');
    return Array.isArray(v) ? v.filter((n) => n && typeof n.id === 'string' && typeof n.text === 'string') : [];
  } catch { return []; }
}
function saveNotes(email: string, notes: Note[]) {
  try { localStorage.setItem(storeKey(email), JSON.stringify(notes.slice(0, MAX_NOTES))); } catch { /* full or off */ }
}

// What a change of status says, or null when it is no news: a start
// (RUNNING from another status, or a session first seen running), a
// failure (ERROR) or a preemption.
export function noteFor(prev: string | undefined, s: Session): Pick<Note, 'kind' | 'text'> | null {
  if (prev === s.status) return null;
  const info = s.status_info ? `: ${s.status_info}` : '';
  if (s.status === 'RUNNING' && prev !== 'LOST') return { kind: 'started', text: `Session ${s.name} started` };
  if (s.status === 'ERROR') return { kind: 'failed', text: `Session ${s.name} failed${info}` };
  if (s.status === 'PREEMPTED') return { kind: 'preempted', text: `Session ${s.name} was preempted${info}` };
  return null;
}

function useNotes(user: User) {
  const [notes, setNotes] = useState<Note[]>(() => loadNotes(user.email));
  const seen = useRef<Map<string, string> | null>(null);
  // Once the first list came: changes are noticed from then on.
  const [ready, setReady] = useState(false);
  useEffect(() => pollOwnSessions(user.email, (mine) => {
    const before = seen.current;
    const now = new Map(mine.map((s) => [s.id, s.status]));
    seen.current = now;
    // The first list is where things stand: nothing has happened yet.
    if (!before) { setReady(true); return; }
    const fresh: Note[] = [];
    for (const s of mine) {
      const n = noteFor(before.get(s.id), s);
      if (n) fresh.push({ ...n, id: `${s.id}:${s.status}:${Date.now()}`, session: s.id, name: s.name, at: Date.now(), read: false });
    }
    if (fresh.length) setNotes((old) => { const v = [...fresh.reverse(), ...old].slice(0, MAX_NOTES); saveNotes(user.email, v); return v; });
  }), [user.email]);
  const update = (f: (n: Note[]) => Note[]) => setNotes((old) => { const v = f(old); saveNotes(user.email, v); return v; });
  return { notes, update, ready };
}

export function NotificationsTray({ user }: { user: User }) {
  const { notes, update, ready } = useNotes(user);
  const [open, setOpen] = useState(false);
  const panel = useRef<HTMLDivElement>(null);
  const unread = notes.filter((n) => !n.read).length;
  // Closing from the keyboard (Escape) or by a click elsewhere.
  useEffect(() => {
    if (!open) return;
    const onKey = (e: KeyboardEvent) => { if (e.key === 'Escape') setOpen(false); };
    const onClick = (e: MouseEvent) => {
      const t = e.target as Node;
      if (panel.current && !panel.current.parentElement?.contains(t)) setOpen(false);
    };
    addEventListener('keydown', onKey);
    addEventListener('click', onClick);
    return () => { removeEventListener('keydown', onKey); removeEventListener('click', onClick); };
  }, [open]);
  const toggle = () => {
    // Seen once the list is opened.
    if (!open && unread) update((ns) => ns.map((n) => (n.read ? n : { ...n, read: true })));
    setOpen(!open);
  };
  return (
    <div class="tray" data-ready={ready ? '1' : undefined}>
      <button type="button" class="btn plain tray-button" aria-expanded={open} aria-controls="tray-panel"
        aria-label={`Notifications, ${unread} unread`} onClick={toggle}>
        <svg class="tray-bell" aria-hidden="true" viewBox="0 0 24 24" width="18" height="18"><path fill="currentColor"
          d="M12 22a2.5 2.5 0 0 0 2.45-2h-4.9A2.5 2.5 0 0 0 12 22Zm7-6V11a7 7 0 0 0-5-6.71V3.5a2 2 0 0 0-4 0v.79A7 7 0 0 0 5 11v5l-2 2v1h18v-1Z" /></svg>{unread > 0 && <span class="tray-count" aria-hidden="true">{unread}</span>}
      </button>
      {open && (
        <div class="tray-panel" id="tray-panel" ref={panel} role="region" aria-label="Notifications">
          <div class="tray-head">
            <strong>Notifications</strong>
            {notes.length > 0 && <Button onClick={() => update(() => [])}>Dismiss all</Button>}
          </div>
          {notes.length === 0 ? <p class="hint">Nothing yet: your sessions' starts, failures and preemptions show here.</p> : (
            <ul class="tray-list">
              {notes.map((n) => (
                <li key={n.id} class={`note note-${n.kind}`} data-note={n.kind}>
                  <a href={sessionHref(n.session)} onClick={(e) => { e.preventDefault(); setOpen(false); navigate(sessionHref(n.session)); }}>
                    {n.text}</a>
                  <small class="hint"> · {new Date(n.at).toLocaleTimeString()}</small>
                  <Button label={`Dismiss: ${n.text}`} onClick={() => update((ns) => ns.filter((x) => x.id !== n.id))}>Dismiss</Button>
                </li>
              ))}
            </ul>
          )}
        </div>
      )}
    </div>
  );
}

// ---- the announcement ----

const DISMISSED = 'tessera.announcement.dismissed';

// GET /v1/config's "announcement" (every user reads it), again every 30 s.
export function useAnnouncement(): [string, () => void] {
  const [text, setText] = useState('');
  const load = () => api.config().then((c) => setText(typeof c.announcement === 'string' ? c.announcement : ''))
    .catch(() => { /* keep what is shown */ });
  useEffect(() => {
    load();
    const t = window.setInterval(() => { if (!document.hidden) load(); }, 30000);
    addEventListener('tessera:announcement', load);
    return () => { clearInterval(t); removeEventListener('tessera:announcement', load); };
  }, []);
  return [text, load];
}

// Dismissed per text: a new announcement shows again.
export function AnnouncementBanner() {
  const [text] = useAnnouncement();
  const [dismissed, setDismissed] = useState(() => { try { return localStorage.getItem(DISMISSED) ?? ''; } catch { return ''; } });
  if (!text || text === dismissed) return null;
  const dismiss = () => {
    try { localStorage.setItem(DISMISSED, text); } catch { /* off */ }
    setDismissed(text);
  };
  return (
    <div class="announcement" role="region" aria-label="Announcement">
      <span class="announcement-text">{text}</span>
      <Button onClick={dismiss} label="Dismiss the announcement">Dismiss</Button>
    </div>
  );
}
