// The session's web terminal (docs/apps.md, "The terminal protocol"): an
// xterm.js terminal filling the window, attached to the runner's shell over
// the WebSocket on /ws of this page's own origin (the proxy's route for the
// session's `terminal` app). The runner keeps the shell named by term=main:
// a dropped connection reconnects to the same shell, which replays its
// recent output; when the shell exits, Enter starts a new one.
import { Terminal } from '@xterm/xterm';
import { FitAddon } from '@xterm/addon-fit';
import { AttachAddon } from '@xterm/addon-attach';
import '@xterm/xterm/css/xterm.css';
import './terminal.css';

// Each terminal's tab says whose it is: the app launcher puts the session's
// name in the fragment (#session=NAME); a link without it keeps the plain title.
const sessionName = new URLSearchParams(location.hash.slice(1)).get('session');
document.title = sessionName ? `${sessionName} · Tessera terminal` : 'Tessera terminal';

const term = new Terminal({
  cursorBlink: true,
  scrollback: 5000,
  fontFamily: 'ui-monospace, "DejaVu Sans Mono", "Liberation Mono", Menlo, Consolas, monospace',
  fontSize: 14,
  // At 1.0 the rows' boxes clip the underscore of DejaVu Sans Mono (the
  // font Debian's browsers pick): $TESSERA_SESSION_NAME showed blanks.
  lineHeight: 1.2,
  theme: {
    background: '#161b26', foreground: '#e6edf3', cursor: '#f0a500', cursorAccent: '#161b26',
    selectionBackground: '#34405a', black: '#1d2330', brightBlack: '#5a6478',
    blue: '#6e9bff', brightBlue: '#9fbdff', green: '#5fd27f', brightGreen: '#7ee787',
    yellow: '#e3b341', brightYellow: '#f0c96a', red: '#ff7b72', brightRed: '#ffa198',
    magenta: '#d2a8ff', brightMagenta: '#e2c5ff', cyan: '#56d4dd', brightCyan: '#8be9f0',
    white: '#c9d1d9', brightWhite: '#ffffff',
  },
});
const fit = new FitAddon();
term.loadAddon(fit);
term.open(document.getElementById('terminal')!);
fit.fit();
term.focus();

// Copy and paste as terminals on Linux do: Ctrl+Shift+C copies the
// selection (Ctrl+C stays the shell's interrupt); Ctrl+Shift+V is left to
// the browser, whose paste event xterm.js takes (as with the right-click
// menu's Paste), so no clipboard permission is asked.
function copySelection() {
  const text = term.getSelection();
  if (!text) return;
  const fallback = () => {
    const ta = document.createElement('textarea');
    ta.value = text;
    ta.style.cssText = 'position:fixed;opacity:0';
    document.body.appendChild(ta);
    ta.select();
    try { document.execCommand('copy'); } catch { /* nothing more to try */ }
    ta.remove();
    term.focus();
  };
  if (navigator.clipboard?.writeText) navigator.clipboard.writeText(text).catch(fallback);
  else fallback();
}
term.attachCustomKeyEventHandler((ev) => {
  if (!ev.ctrlKey || !ev.shiftKey || ev.altKey || ev.metaKey) return true;
  if (ev.code === 'KeyC') {
    if (ev.type === 'keydown') copySelection();
    ev.preventDefault();   // not the browser's "inspect element"
    return false;
  }
  if (ev.code === 'KeyV') return false;   // the browser pastes; xterm.js must not send ^V
  return true;
});

// Resize: [0x01, cols hi, cols lo, rows hi, rows lo].
function resizeFrame(cols: number, rows: number): Uint8Array {
  return new Uint8Array([0x01, (cols >> 8) & 0xff, cols & 0xff, (rows >> 8) & 0xff, rows & 0xff]);
}

let ws: WebSocket | null = null;
let attach: AttachAddon | null = null;
let backoffMs = 500;
let everOpened = false;      // a reconnect to a kept shell redraws from its replay
let waitingForEnter = false; // the shell exited: Enter starts a new one
let reconnectTimer: number | undefined;
// True while connecting for a new shell (after an exit): nothing to replay,
// the old screen stays above the new prompt.
let freshShell = false;

function connect() {
  reconnectTimer = undefined;
  const scheme = location.protocol === 'https:' ? 'wss://' : 'ws://';
  const url = `${scheme}${location.host}/ws?term=main&cols=${term.cols}&rows=${term.rows}`;
  const sock = new WebSocket(url);
  sock.binaryType = 'arraybuffer';
  ws = sock;
  let opened = false;
  sock.addEventListener('open', () => {
    opened = true;
    backoffMs = 500;
    // After a dropped connection the runner replays the shell's recent
    // output: start from a clean screen so it is not shown twice.
    if (everOpened && !freshShell) term.reset();
    freshShell = false;
    everOpened = true;
    attach = new AttachAddon(sock, { bidirectional: true });
    term.loadAddon(attach);
    sock.send(resizeFrame(term.cols, term.rows));
    term.focus();
  });
  sock.addEventListener('close', (ev) => {
    attach?.dispose();
    attach = null;
    if (ws === sock) ws = null;
    const exit = /^exit (\d+)$/.exec(ev.reason || '');
    if (exit) {
      term.write(`\r\n\x1b[2m[shell exited with status ${exit[1]} — press Enter to start a new one]\x1b[0m\r\n`);
      waitingForEnter = true;
      return;
    }
    const wait = backoffMs;
    backoffMs = Math.min(backoffMs * 2, 10000);
    const why = opened ? 'connection lost' : 'cannot connect';
    term.write(`\r\n\x1b[2m[${why}${ev.reason ? `: ${ev.reason}` : ''} — reconnecting in ${Math.ceil(wait / 1000)} s]\x1b[0m`);
    reconnectTimer = window.setTimeout(connect, wait);
  });
}

term.onData((data) => {
  if (!waitingForEnter) return;   // the attach addon sends input while connected
  if (data === '\r' || data === '\n') {
    waitingForEnter = false;
    freshShell = true;
    connect();
  }
});

term.onResize(({ cols, rows }) => {
  if (ws && ws.readyState === WebSocket.OPEN) ws.send(resizeFrame(cols, rows));
});

let fitPending = false;
window.addEventListener('resize', () => {
  if (fitPending) return;
  fitPending = true;
  requestAnimationFrame(() => { fitPending = false; fit.fit(); });
});

// Back online or back to the tab: reconnect now rather than at the end of a backoff.
const reconnectSoon = () => {
  if (reconnectTimer !== undefined) {
    clearTimeout(reconnectTimer);
    connect();
  }
};
window.addEventListener('online', reconnectSoon);
document.addEventListener('visibilitychange', () => { if (!document.hidden) reconnectSoon(); });

connect();
