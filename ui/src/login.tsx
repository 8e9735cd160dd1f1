import { useState } from 'preact/hooks';
import { api, ApiError, type User } from './api';
import { Button, ErrorText, TextField } from './components';

export function LoginPage({ onLogin }: { onLogin: (u: User, csrf: string) => void }) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (e: Event) => {
    e.preventDefault();
    setError(null);
    if (!email || !password) { setError('Enter your email and your password.'); return; }
    setBusy(true);
    try {
      const r = await api.login(email, password);
      onLogin(r.user, r.csrf_token);
    } catch (err) {
      const status = err instanceof ApiError ? err.status : 0;
      const msg = (err as Error).message;
      setError(status === 401 ? 'Wrong email or password.' : msg.charAt(0).toUpperCase() + msg.slice(1));
    } finally {
      setBusy(false);
    }
  };

  return (
    <main class="login">
      <form onSubmit={submit} aria-labelledby="login-title">
        <h1 id="login-title">Log in to Tessera</h1>
        <TextField label="Email" type="email" value={email} onInput={setEmail} autocomplete="username" required />
        <TextField label="Password" type="password" value={password} onInput={setPassword}
          autocomplete="current-password" required />
        <ErrorText error={error} />
        <Button type="submit" kind="primary" disabled={busy}>Log in</Button>
      </form>
    </main>
  );
}
