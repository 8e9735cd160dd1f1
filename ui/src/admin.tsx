import { useEffect, useState } from 'preact/hooks';
import { api, fmtBytes, fmtNum, type User } from './api';
import { Button, Dialog, ErrorText, TextField, UsageBar } from './components';
import { useClusterState } from './sessions';

function Nodes() {
  const { nodes, error } = useClusterState();
  return (
    <section aria-labelledby="nodes-title">
      <h2 id="nodes-title">Nodes</h2>
      <ErrorText error={error} />
      {nodes.map((n) => (
        <article class="node" key={n.id} aria-label={`Node ${n.id}`}>
          <h3>{n.id} <span class={`status st-${n.status.toLowerCase()}`}>{n.status}</span></h3>
          <p>{n.sessions} sessions · CPU {fmtNum(n.used.cpu)} / {fmtNum(n.capacity.cpu)} ·
            memory {fmtBytes(n.used.mem)} / {fmtBytes(n.capacity.mem)}</p>
          {(n.gpus ?? []).length === 0 ? <p class="hint">No GPU.</p> : (n.gpus ?? []).map((g) => (
            <UsageBar key={g.uuid} label={`GPU ${g.index} ${g.name} (${fmtBytes(g.memory)})`}
              used={g.fgpu_used} total={g.fgpu_capacity} unit="fGPU" />
          ))}
        </article>
      ))}
    </section>
  );
}

function Users() {
  const [users, setUsers] = useState<User[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [isAdmin, setIsAdmin] = useState(false);
  const [resetFor, setResetFor] = useState<User | null>(null);
  const [newPassword, setNewPassword] = useState('');

  const load = () => api.users().then((r) => setUsers(r.users)).catch((e) => setError((e as Error).message));
  useEffect(() => { load(); }, []);

  const run = async (what: () => Promise<unknown>, done?: string) => {
    setError(null);
    setNotice(null);
    try {
      await what();
      if (done) setNotice(done);
      load();
    } catch (e) {
      setError((e as Error).message);
    }
  };

  const create = (e: Event) => {
    e.preventDefault();
    run(async () => {
      const r = await api.createUser({ email, password: password || undefined, is_admin: isAdmin });
      setNotice(r.password ? `Created ${r.user.email}. Their password is ${r.password} — give it to them now; it is not shown again.`
        : `Created ${r.user.email}.`);
      setEmail(''); setPassword(''); setIsAdmin(false);
      load();
    });
  };

  return (
    <section aria-labelledby="users-title">
      <h2 id="users-title">Users</h2>
      <ErrorText error={error} />
      {notice && <p class="notice" role="status">{notice}</p>}
      <table>
        <thead><tr><th scope="col">Email</th><th scope="col">Role</th><th scope="col">State</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
        <tbody>
          {users.map((u) => (
            <tr key={u.id}>
              <td>{u.email}</td>
              <td>{u.is_admin ? 'administrator' : 'user'}</td>
              <td>{u.disabled ? 'disabled' : 'active'}</td>
              <td class="actions">
                <Button onClick={() => run(() => api.updateUser(u.id, { disabled: !u.disabled }),
                  `${u.email} is now ${u.disabled ? 'active' : 'disabled'}.`)}>
                  {u.disabled ? 'Enable' : 'Disable'}
                </Button>
                <Button onClick={() => { setNewPassword(''); setResetFor(u); }}>Reset password</Button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <form class="inline" onSubmit={create} aria-label="Create a user">
        <h3>Create a user</h3>
        <TextField label="Email" type="email" value={email} onInput={setEmail} required />
        <TextField label="Password" type="password" value={password} onInput={setPassword}
          hint="Leave empty to generate one." autocomplete="new-password" />
        <div class="field check">
          <input id="new-user-admin" type="checkbox" checked={isAdmin}
            onChange={(e) => setIsAdmin((e.target as HTMLInputElement).checked)} />
          <label for="new-user-admin">Administrator</label>
        </div>
        <Button type="submit" kind="primary">Create user</Button>
      </form>
      <Dialog open={resetFor !== null} title={`Reset password of ${resetFor?.email ?? ''}`} onClose={() => setResetFor(null)}>
        <form onSubmit={(e) => {
          e.preventDefault();
          const u = resetFor!;
          setResetFor(null);
          run(() => api.updateUser(u.id, { password: newPassword }), `The password of ${u.email} was changed.`);
        }}>
          <TextField label="New password" type="password" value={newPassword} onInput={setNewPassword}
            autocomplete="new-password" required hint="8 characters or more." />
          <div class="actions">
            <Button onClick={() => setResetFor(null)}>Cancel</Button>
            <Button type="submit" kind="primary">Set password</Button>
          </div>
        </form>
      </Dialog>
    </section>
  );
}

function Settings() {
  const [perDevice, setPerDevice] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  useEffect(() => {
    api.config().then((c) => setPerDevice(String(c.fgpu_per_device ?? '')))
      .catch((e) => setError(`Cannot read the settings: ${(e as Error).message}`));
  }, []);
  const save = async (e: Event) => {
    e.preventDefault();
    setError(null);
    setNotice(null);
    const v = Number(perDevice);
    if (!perDevice || Number.isNaN(v) || v <= 0) { setError('fGPU per GPU must be a positive number.'); return; }
    try {
      await api.setConfig('fgpu_per_device', v);
      setNotice(`Saved: 1 GPU = ${fmtNum(v)} fGPU.`);
    } catch (err) {
      setError((err as Error).message);
    }
  };
  return (
    <section aria-labelledby="settings-title">
      <h2 id="settings-title">Settings</h2>
      <form class="inline" onSubmit={save}>
        <TextField label="fGPU per GPU" type="number" value={perDevice} onInput={setPerDevice}
          hint="How many fGPU one physical GPU counts as (e.g. 2: a session with 1 fGPU gets half a GPU)." />
        <Button type="submit" kind="primary">Save</Button>
      </form>
      <ErrorText error={error} />
      {notice && <p class="notice" role="status">{notice}</p>}
    </section>
  );
}

export function AdminPage() {
  return (
    <>
      <h1>Administration</h1>
      <Nodes />
      <Users />
      <Settings />
    </>
  );
}
