import { useEffect, useState } from 'preact/hooks';
import { api, type User } from './api';
import { Button, Dialog, Email, ErrorText, TextField } from './components';
import { SettingsSections } from './settings';
import { FairShareSection, ProjectsSection } from './projects';
import { lazyPage } from './lazy';
// Admins only, in a chunk of its own (lazy.tsx).
const PresetsSection = lazyPage(() => import('./presets-admin').then((m) => m.PresetsSection));

function Users() {
  const [users, setUsers] = useState<User[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [isAdmin, setIsAdmin] = useState(false);
  const [resetFor, setResetFor] = useState<User | null>(null);
  const [removing, setRemoving] = useState<User | null>(null);
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
      <div class="table-scroll">
      <table class="stack users">
        <thead><tr><th scope="col">Email</th><th scope="col">Role</th><th scope="col">State</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
        <tbody>
          {users.map((u) => (
            <tr key={u.id}>
              <td data-label="Email"><Email email={u.email} /></td>
              <td data-label="Role">{u.is_admin ? 'administrator' : 'user'}</td>
              <td data-label="State">{u.disabled ? 'disabled' : 'active'}</td>
              {/* The buttons in a div: the cell stays a table cell (a flex
                  td was pulled out of the table's layout). */}
              <td data-label="Actions"><div class="row-actions horizontal">
                <Button onClick={() => run(() => api.updateUser(u.id, { disabled: !u.disabled }),
                  `${u.email} is now ${u.disabled ? 'active' : 'disabled'}.`)}>
                  {u.disabled ? 'Enable' : 'Disable'}
                </Button>
                <Button onClick={() => { setNewPassword(''); setResetFor(u); }}>Reset password</Button>
                <Button kind="danger" onClick={() => setRemoving(u)}>Remove…</Button>
              </div></td>
            </tr>
          ))}
        </tbody>
      </table>
      </div>
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
      {/* The manager refuses (409, naming them) while the user has
          sessions not ended or folders not in the trash, and one's own
          account: its words are shown as they come. */}
      <Dialog open={removing !== null} title={`Remove ${removing?.email ?? ''}?`} onClose={() => setRemoving(null)}>
        <p>Their API keys are revoked and they can no longer log in. Their ended sessions, trashed folders
          and private images stay. Tessera refuses while they have sessions that have not ended or
          folders that are not in the trash: end and trash those first.</p>
        <div class="actions">
          <Button onClick={() => setRemoving(null)}>Cancel</Button>
          <Button kind="danger" onClick={() => {
            const u = removing!;
            setRemoving(null);
            run(async () => {
              const r = await api.removeUser(u.id);
              setNotice(`Removed ${u.email}: ${r.revoked_keys} API key${r.revoked_keys === 1 ? '' : 's'} revoked, ` +
                `${r.ended_sessions_kept} ended session${r.ended_sessions_kept === 1 ? '' : 's'} kept.`);
            });
          }}>Remove user</Button>
        </div>
      </Dialog>
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

export function AdminPage() {
  return (
    <>
      <h1>Administration</h1>
      <p class="hint">Nodes, their live use and drain are on the Nodes page.</p>
      <Users />
      <SettingsSections />
      <ProjectsSection />
      <PresetsSection />
      <FairShareSection />
    </>
  );
}
