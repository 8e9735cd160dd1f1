// The Admin page's Resource presets section (docs/admin.md, "Resource
// presets"): admins make, change and remove the launcher's presets (POST,
// PATCH, DELETE /v1/presets), what `tessera preset` does from a shell.
// A chunk of its own (lazy.tsx): only admins open it.
import { useEffect, useState } from 'preact/hooks';
import { Button, Dialog, ErrorText, TextField } from './components';
import { presetsApi, presetWhat, type Preset, type PresetBody } from './presets';

// The form of a preset: text fields, checked by the server (its message
// shown as is), so the rules live in one place.
function PresetForm(props: { initial?: Preset; onDone: (msg: string) => void; onCancel?: () => void }) {
  const p = props.initial;
  const [name, setName] = useState(p?.name ?? '');
  const [cpu, setCpu] = useState(p ? String(p.resources.cpu) : '');
  const [memGiB, setMemGiB] = useState(p ? String(Math.round((p.resources.mem / 2 ** 30) * 100) / 100) : '');
  const [fgpu, setFgpu] = useState(p ? String(p.resources.fgpu) : '0');
  const [group, setGroup] = useState(p?.group ?? '');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  // A field changed: the last refusal no longer speaks of what is there.
  const edit = (set: (v: string) => void) => (v: string) => { set(v); setError(null); };
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(null);
    const mem = Number(memGiB.trim());
    if (memGiB.trim() === '' || !(mem > 0)) { setError('Memory must be a number of GiB above 0, e.g. 8 or 0.5.'); return; }
    const body: PresetBody = {
      resources: { cpu: cpu.trim(), mem: `${Math.round(mem * 1024)}MiB`, fgpu: fgpu.trim() || '0' },
      group: group.trim() || null,
    };
    setBusy(true);
    try {
      if (p) await presetsApi.update(p.name, body);
      else await presetsApi.create({ ...body, name: name.trim() });
      props.onDone(p ? `Changed preset ${p.name}.` : `Created preset ${name.trim()}.`);
      if (!p) { setName(''); setCpu(''); setMemGiB(''); setFgpu('0'); setGroup(''); }
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="inline preset-form" onSubmit={submit} aria-label={p ? `Edit preset ${p.name}` : 'Create a preset'}>
      {!p && <h3>Create a preset</h3>}
      {!p && <TextField label="Name" value={name} onInput={edit(setName)} required placeholder="e.g. Large" />}
      <TextField label="CPU" value={cpu} onInput={edit(setCpu)} required placeholder="e.g. 8" hint="Cores, 0.01 to 1024." />
      <TextField label="Memory (GiB)" value={memGiB} onInput={edit(setMemGiB)} required placeholder="e.g. 32" />
      <TextField label="fGPU" value={fgpu} onInput={edit(setFgpu)} hint="0 for none." />
      <TextField label="Resource group" value={group} onInput={edit(setGroup)} placeholder="every group"
        hint="Offered only when launching in this group; empty: in every group." />
      <ErrorText error={error} />
      <div class="actions">
        {props.onCancel && <Button onClick={props.onCancel}>Cancel</Button>}
        <Button type="submit" kind="primary" disabled={busy}>{p ? 'Save' : 'Create preset'}</Button>
      </div>
    </form>
  );
}

export function PresetsSection() {
  const [presets, setPresets] = useState<Preset[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [editing, setEditing] = useState<Preset | null>(null);
  const [removing, setRemoving] = useState<Preset | null>(null);
  const load = () => presetsApi.list().then((r) => setPresets(r.presets)).catch((e) => setError((e as Error).message));
  useEffect(() => { load(); }, []);
  const done = (msg: string) => { setNotice(msg); setError(null); setEditing(null); load(); };
  const remove = async (p: Preset) => {
    setRemoving(null);
    try {
      await presetsApi.remove(p.name);
      done(`Removed preset ${p.name}.`);
    } catch (e) {
      setError((e as Error).message);
    }
  };
  return (
    <section aria-labelledby="presets-title">
      <h2 id="presets-title">Resource presets</h2>
      <p class="hint">The launcher's buttons that set CPU, memory and GPU at once; every user sees them (<code>tessera preset</code>).</p>
      <ErrorText error={error} />
      {notice && <p class="notice" role="status">{notice}</p>}
      <div class="table-scroll">
        <table class="stack presets-table">
          <thead><tr><th scope="col">Name</th><th scope="col">Resources</th><th scope="col">Group</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
          <tbody>
            {presets.map((p) => (
              <tr key={p.name}>
                <td data-label="Name">{p.name}</td>
                <td data-label="Resources">{presetWhat(p)}</td>
                <td data-label="Group">{p.group ?? 'every group'}</td>
                <td data-label="Actions"><div class="row-actions horizontal">
                  <Button onClick={() => setEditing(p)} label={`Edit preset ${p.name}`}>Edit</Button>
                  <Button kind="danger" onClick={() => setRemoving(p)} label={`Remove preset ${p.name}`}>Remove</Button>
                </div></td>
              </tr>
            ))}
            {presets.length === 0 && <tr><td colSpan={4} class="hint">No presets: the launcher shows its sliders alone.</td></tr>}
          </tbody>
        </table>
      </div>
      <PresetForm onDone={done} />
      <Dialog open={editing !== null} title={`Edit preset ${editing?.name ?? ''}`} onClose={() => setEditing(null)}>
        {editing && <PresetForm key={editing.name} initial={editing} onDone={done} onCancel={() => setEditing(null)} />}
      </Dialog>
      <Dialog open={removing !== null} title="Remove preset" onClose={() => setRemoving(null)}>
        {removing && (
          <div>
            <p>Remove preset <strong>{removing.name}</strong> ({presetWhat(removing)})? The launcher stops offering it; sessions made with it are not affected.</p>
            <div class="actions">
              <Button onClick={() => setRemoving(null)}>Cancel</Button>
              <Button kind="danger" onClick={() => remove(removing)}>Remove preset</Button>
            </div>
          </div>
        )}
      </Dialog>
    </section>
  );
}
