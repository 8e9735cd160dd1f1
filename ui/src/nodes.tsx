// The Nodes page (admins): every node with its live use beside what is
// allocated on it, per GPU too, its sessions, and drain/undrain (PATCH
// /v1/nodes/{id}): a drained node gets no new sessions, its sessions keep
// running; and its resource group (PATCH group): a session asks for a
// group and is placed only on its nodes.
import { useEffect, useId, useState } from 'preact/hooks';
import { api2, api3, fmtBytes, fmtNum, type NodeFull, type SessionFull } from './api';
import { Button, Dialog, Email, ErrorText, TextField } from './components';
import { useClusterState } from './sessions';
import { navigate, sessionHref } from './session';

// Two bars on one line: live use and allocation, both against the same
// total, each with its words.
function DualBar(props: { label: string; live: number | null; alloc: number; total: number; fmt: (n: number) => string; allocLabel?: string }) {
  const id = useId();
  const pct = (v: number) => (props.total > 0 ? Math.min(100, (v / props.total) * 100) : 0);
  return (
    <div class="dual">
      <div class="dual-head">
        <span id={id} class="dual-label">{props.label}</span>
        <span class="dual-nums">
          <span class="live-num">{props.live === null ? 'use —' : `use ${props.fmt(props.live)}`}</span>
          <span class="alloc-num">{props.allocLabel ?? 'allocated'} {props.fmt(props.alloc)} / {props.fmt(props.total)}</span>
        </span>
      </div>
      <div class="dual-bars">
        <span class="bar-track" role="meter" aria-label={`${props.label} in use`} aria-valuemin={0} aria-valuemax={props.total}
          aria-valuenow={props.live ?? undefined} aria-valuetext={props.live === null ? 'no sample yet' : `${props.fmt(props.live)} of ${props.fmt(props.total)} in use`}>
          <span class="bar-fill live" style={{ width: `${pct(props.live ?? 0)}%` }} />
        </span>
        <span class="bar-track" role="meter" aria-label={`${props.label} allocated`} aria-valuemin={0} aria-valuemax={props.total}
          aria-valuenow={props.alloc} aria-valuetext={`${props.fmt(props.alloc)} of ${props.fmt(props.total)} allocated`}>
          <span class="bar-fill alloc" style={{ width: `${pct(props.alloc)}%` }} />
        </span>
      </div>
    </div>
  );
}

const cores = (n: number) => `${fmtNum(Math.round(n * 100) / 100)} CPU`;
const fgpu = (n: number) => `${fmtNum(Math.round(n * 100) / 100)} fGPU`;
const pctFmt = (n: number) => `${Math.round(n)}%`;

function NodeCard({ n, sessions, onDrain, onGroup }: {
  n: NodeFull; sessions: SessionFull[]; onDrain: (n: NodeFull) => void; onGroup: (n: NodeFull) => void;
}) {
  const drained = n.schedulable === false;
  const mine = sessions.filter((s) => s.agent === n.id);
  return (
    <article class={`node card${drained ? ' drained' : ''}`} aria-label={`Node ${n.id}`} data-node={n.id}>
      <div class="node-head">
        <h2>{n.id}</h2>
        <span class={`status st-${n.status.toLowerCase()}`}>{n.status}</span>
        {drained && <span class="badge drained-badge">Drained: no new sessions</span>}
        {n.group !== undefined && <span class="badge group-badge" data-testid="node-group" title="its resource group">group {n.group}</span>}
        <span class="spacer" />
        {n.group !== undefined && <Button onClick={() => onGroup(n)} label={`Set the resource group of ${n.id}`}>Set group</Button>}
        <Button kind={drained ? 'primary' : 'plain'} onClick={() => onDrain(n)} label={`${drained ? 'Undrain' : 'Drain'} ${n.id}`}>
          {drained ? 'Undrain' : 'Drain'}
        </Button>
      </div>
      <div class="node-grid">
        <DualBar label="CPU" live={n.usage ? n.usage.cpu_cores : null} alloc={n.used.cpu} total={n.capacity.cpu} fmt={cores} />
        <DualBar label="Memory" live={n.usage ? n.usage.mem_bytes : null} alloc={n.used.mem} total={n.capacity.mem} fmt={fmtBytes} />
      </div>
      <h3>GPUs</h3>
      {(n.gpus ?? []).length === 0 ? <p class="hint">No GPU.</p> : (
        <div class="gpu-list">
          {(n.gpus ?? []).map((g) => (
            <div class="gpu" key={g.uuid} data-gpu={g.index}>
              {/* A model name that says its memory ("... 16 GiB") is not followed by it again. */}
              <div class="gpu-name">GPU {g.index} · {g.name}{!g.name.includes(fmtBytes(g.memory)) && <span class="hint"> ({fmtBytes(g.memory)})</span>}</div>
              <DualBar label={`GPU ${g.index} SM`} live={g.util_pct ?? null} alloc={(g.fgpu_used / (g.fgpu_capacity || 1)) * 100}
                total={100} fmt={pctFmt} allocLabel="fGPU share" />
              <DualBar label={`GPU ${g.index} memory`} live={g.mem_used_bytes ?? null}
                alloc={g.fgpu_capacity ? (g.fgpu_used / g.fgpu_capacity) * g.memory : 0} total={g.memory} fmt={fmtBytes}
                allocLabel={`${fgpu(g.fgpu_used)} of ${fgpu(g.fgpu_capacity)} allocated:`} />
            </div>
          ))}
        </div>
      )}
      <h3>Sessions on it ({mine.length})</h3>
      {mine.length === 0 ? <p class="hint">None.</p> : (
        <ul class="node-sessions">
          {mine.map((s) => (
            <li key={s.id}>
              <a href={sessionHref(s.id)} onClick={(e) => { e.preventDefault(); navigate(sessionHref(s.id)); }}>{s.name}</a>
              <span class={`status st-${s.status.toLowerCase()}`}>{s.status}</span>
              <span class="hint"><Email email={s.owner} /></span>
            </li>
          ))}
        </ul>
      )}
      <p class="hint node-foot">Last heartbeat {n.last_heartbeat ? new Date(n.last_heartbeat).toLocaleTimeString() : '—'}{n.mock_gpus ? ' · mock GPUs' : ''}</p>
    </article>
  );
}

export function NodesPage() {
  const { nodes, sessions, error, refresh } = useClusterState();
  const [confirm, setConfirm] = useState<NodeFull | null>(null);
  const [actionError, setActionError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [grouping, setGrouping] = useState<NodeFull | null>(null);
  const all = nodes as NodeFull[];
  const apply = async (n: NodeFull) => {
    const drain = n.schedulable !== false;
    setBusy(true);
    setActionError(null);
    setNotice(null);
    try {
      await api2.setSchedulable(n.id, !drain);
      setNotice(drain ? `Node ${n.id} is drained: no new sessions are placed on it; its sessions keep running.`
        : `Node ${n.id} takes new sessions again.`);
      setConfirm(null);
      refresh();
    } catch (e) {
      setActionError(`Cannot ${drain ? 'drain' : 'undrain'} ${n.id}: ${(e as Error).message}`);
    } finally {
      setBusy(false);
    }
  };
  const running = confirm ? (sessions as SessionFull[]).filter((s) => s.agent === confirm.id).length : 0;
  return (
    <section aria-labelledby="nodes-title">
      <h1 id="nodes-title">Nodes</h1>
      <p class="hint legend"><span class="key live" /> in use now (live) <span class="key alloc" /> allocated to sessions</p>
      <ErrorText error={error} />
      <ErrorText error={actionError} />
      {notice && <p class="notice" role="status">{notice}</p>}
      {all.length === 0 && !error ? <div class="skeleton node-skeleton" aria-label="Loading the nodes" />
        : all.map((n) => <NodeCard key={n.id} n={n} sessions={sessions as SessionFull[]} onDrain={setConfirm} onGroup={setGrouping} />)}
      <GroupDialog node={grouping} groups={[...new Set(all.map((n) => n.group).filter((g): g is string => !!g))].sort()}
        onClose={() => setGrouping(null)}
        onDone={(msg) => { setGrouping(null); setNotice(msg); setActionError(null); refresh(); }} />
      <Dialog open={confirm !== null} title={confirm?.schedulable === false ? 'Undrain node' : 'Drain node'} onClose={() => setConfirm(null)}>
        {confirm && (
          <>
            {confirm.schedulable === false
              ? <p>Let the scheduler place new sessions on <strong>{confirm.id}</strong> again? Sessions waiting for room may start there at once.</p>
              : <p>Drain <strong>{confirm.id}</strong>? The scheduler places no new session on it. Its {running} session{running === 1 ? '' : 's'} keep{running === 1 ? 's' : ''} running: nothing is stopped or moved. Undrain it to place sessions there again.</p>}
            <ErrorText error={actionError} />
            <div class="actions">
              <Button onClick={() => setConfirm(null)}>Cancel</Button>
              <Button kind={confirm.schedulable === false ? 'primary' : 'danger'} disabled={busy} onClick={() => apply(confirm)}>
                {confirm.schedulable === false ? 'Undrain' : 'Drain'}
              </Button>
            </div>
          </>
        )}
      </Dialog>
    </section>
  );
}

// Moves a node to another resource group (PATCH /v1/nodes/{id} {group}):
// sessions placed from then on follow it; those running there stay.
function GroupDialog({ node, groups, onClose, onDone }: {
  node: NodeFull | null; groups: string[]; onClose: () => void; onDone: (msg: string) => void;
}) {
  const [group, setGroup] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => { setGroup(node?.group ?? ''); setError(null); }, [node?.id]);
  const save = async (e: Event) => {
    e.preventDefault();
    if (!node) return;
    const g = group.trim();
    if (!g) { setError('Enter a group name (default is the group of nodes never set).'); return; }
    setBusy(true);
    setError(null);
    try {
      await api3.setNodeGroup(node.id, g);
      onDone(`Node ${node.id} is in resource group ${g}: sessions asking for ${g} are placed on it from now on; its sessions keep running.`);
    } catch (err) {
      setError(`Cannot set the group of ${node.id}: ${(err as Error).message}`);
    } finally {
      setBusy(false);
    }
  };
  return (
    <Dialog open={node !== null} title={`Resource group of ${node?.id ?? ''}`} onClose={onClose}>
      {node && (
        <form onSubmit={save}>
          <TextField label="Resource group" value={group} onInput={setGroup} list="tessera-node-groups" required
            hint="A session asks for a group and runs only on its nodes; a project may be allowed only some groups." />
          <datalist id="tessera-node-groups">{groups.map((g) => <option key={g} value={g} />)}</datalist>
          <ErrorText error={error} />
          <div class="actions">
            <Button onClick={onClose}>Cancel</Button>
            <Button type="submit" kind="primary" disabled={busy}>Set group</Button>
          </div>
        </form>
      )}
    </Dialog>
  );
}
