import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, setCsrf, type User } from './api';
import { Button } from './components';
import { LoginPage } from './login';
import { SessionsPage } from './sessions';
import { AdminPage } from './admin';
import { DataPage } from './data';
import './style.css';

type Page = 'sessions' | 'admin' | 'data';

function pageFromPath(): Page {
  if (location.pathname.startsWith('/data')) return 'data';
  return location.pathname.startsWith('/admin') ? 'admin' : 'sessions';
}

function App() {
  const [user, setUser] = useState<User | null | undefined>(undefined);
  const [page, setPage] = useState<Page>(pageFromPath());

  useEffect(() => {
    api.me().then((r) => { setCsrf(r.csrf_token); setUser(r.user); }).catch(() => setUser(null));
    const onPop = () => setPage(pageFromPath());
    addEventListener('popstate', onPop);
    return () => removeEventListener('popstate', onPop);
  }, []);

  const go = (p: Page) => {
    history.pushState(null, '', `/${p}`);
    setPage(p);
  };
  const logout = async () => {
    try { await api.logout(); } catch { /* logged out anyway */ }
    setCsrf('');
    setUser(null);
  };

  if (user === undefined) return <p class="loading">Loading…</p>;
  if (user === null)
    return <LoginPage onLogin={(u, token) => { setCsrf(token); setUser(u); }} />;
  const current = page === 'data' ? 'data' : page === 'admin' && user.is_admin ? 'admin' : 'sessions';
  return (
    <>
      <header>
        <strong class="brand">Tessera</strong>
        <nav aria-label="Main">
          <a href="/sessions" aria-current={current === 'sessions' ? 'page' : undefined}
            onClick={(e) => { e.preventDefault(); go('sessions'); }}>Sessions</a>
          <a href="/data" aria-current={current === 'data' ? 'page' : undefined}
            onClick={(e) => { e.preventDefault(); go('data'); }}>Data</a>
          {user.is_admin && (
            <a href="/admin" aria-current={current === 'admin' ? 'page' : undefined}
              onClick={(e) => { e.preventDefault(); go('admin'); }}>Admin</a>
          )}
        </nav>
        <span class="who">{user.email}</span>
        <Button onClick={logout}>Log out</Button>
      </header>
      <main>{current === 'admin' ? <AdminPage /> : current === 'data' ? <DataPage user={user} /> : <SessionsPage user={user} />}</main>
    </>
  );
}

render(<App />, document.getElementById('app')!);
