import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, setCsrf, type User } from './api';
import { Button, Email } from './components';
import { LoginPage } from './login';
import { SessionsPage } from './sessions';
import { AdminPage } from './admin';
import { DataPage } from './data';
import { SessionPage } from './session';
import { NodesPage } from './nodes';
import { CredentialsPage } from './credentials';
import { lazyPage } from './lazy';
import { AnnouncementBanner, NotificationsTray } from './tray';
import './style.css';

// Pages few open, in chunks of their own (lazy.tsx).
const DashboardPage = lazyPage(() => import('./dashboard').then((m) => m.DashboardPage));
const AboutPage = lazyPage(() => import('./about').then((m) => m.AboutPage));
const StatisticsPage = lazyPage(() => import('./statistics').then((m) => m.StatisticsPage));

type Page = 'sessions' | 'admin' | 'nodes' | 'data' | 'credentials' | 'dashboard' | 'about' | 'statistics';

function pageFromPath(): Page {
  const p = location.pathname;
  return p.startsWith('/data') ? 'data' : p.startsWith('/credentials') ? 'credentials' : p.startsWith('/admin') ? 'admin'
    : p.startsWith('/nodes') ? 'nodes' : p.startsWith('/dashboard') ? 'dashboard' : p.startsWith('/about') ? 'about'
    : p.startsWith('/statistics') ? 'statistics' : 'sessions';
}
// A session's own page: /sessions/ID.
function sessionFromPath(): string | null {
  const m = /^\/sessions\/([^/]+)\/?$/.exec(location.pathname);
  return m ? decodeURIComponent(m[1]) : null;
}

function App() {
  const [user, setUser] = useState<User | null | undefined>(undefined);
  const [page, setPage] = useState<Page>(pageFromPath());
  const [sessionId, setSessionId] = useState<string | null>(sessionFromPath());

  useEffect(() => {
    api.me().then((r) => { setCsrf(r.csrf_token); setUser(r.user); }).catch(() => setUser(null));
    const onPop = () => { setPage(pageFromPath()); setSessionId(sessionFromPath()); };
    addEventListener('popstate', onPop);
    return () => removeEventListener('popstate', onPop);
  }, []);

  const go = (p: Page) => {
    history.pushState(null, '', `/${p}`);
    setPage(p);
    setSessionId(null);
    // A page that keeps its place in the address (the Data page's open
    // folder) hears of the move as of Back.
    dispatchEvent(new PopStateEvent('popstate'));
  };
  const logout = async () => {
    try { await api.logout(); } catch { /* logged out anyway */ }
    setCsrf('');
    setUser(null);
  };

  if (user === undefined) return <p class="loading">Loading…</p>;
  if (user === null)
    return <LoginPage onLogin={(u, token) => { setCsrf(token); setUser(u); }} />;
  // The Data and Credentials pages are everyone's; Nodes and Admin are admins' only.
  const current: Page = page === 'data' || page === 'credentials' || page === 'about' || page === 'statistics' ? page
    : page !== 'sessions' && user.is_admin ? page : 'sessions';
  const navLink = (p: Page, label: string) => (
    <a href={`/${p}`} aria-current={current === p ? 'page' : undefined}
      onClick={(e) => { e.preventDefault(); go(p); }}>{label}</a>
  );
  return (
    <>
      <header>
        <strong class="brand">Tessera</strong>
        <nav aria-label="Main">
          <a href="/sessions" aria-current={current === 'sessions' ? 'page' : undefined}
            onClick={(e) => { e.preventDefault(); go('sessions'); }}>Sessions</a>
          {navLink('data', 'Data')}
          {navLink('credentials', 'Credentials')}
          {navLink('statistics', 'Statistics')}
          {user.is_admin && navLink('dashboard', 'Dashboard')}
          {user.is_admin && navLink('nodes', 'Nodes')}
          {user.is_admin && (
            <a href="/admin" aria-current={current === 'admin' ? 'page' : undefined}
              onClick={(e) => { e.preventDefault(); go('admin'); }}>Admin</a>
          )}
          {navLink('about', 'About')}
        </nav>
        <NotificationsTray user={user} />
        <span class="who"><Email email={user.email} /></span>
        <Button onClick={logout}>Log out</Button>
      </header>
      <AnnouncementBanner />
      <main>{current === 'admin' ? <AdminPage /> : current === 'nodes' ? <NodesPage />
        : current === 'dashboard' ? <DashboardPage /> : current === 'about' ? <AboutPage />
        : current === 'data' ? <DataPage user={user} />
        : current === 'statistics' ? <StatisticsPage user={user} />
        : current === 'credentials' ? <CredentialsPage user={user} onSignedOut={() => { setCsrf(''); setUser(null); }} />
        : sessionId ? <SessionPage key={sessionId} id={sessionId} user={user} /> : <SessionsPage user={user} />}</main>
    </>
  );
}

render(<App />, document.getElementById('app')!);
