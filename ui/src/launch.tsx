import { useEffect, useState } from 'preact/hooks';
import { api, fmtNum, type Node } from './api';
import { Button, Dialog, ErrorText, SliderField, TextField } from './components';

const GiB = 2 ** 30;

// The launch dialog: image, CPU, memory, GPU (fGPU) and Sessions. The
// sliders' ranges follow the largest node (GET /v1/nodes): a session must
// fit on one node.
export function LaunchDialog(props: { open: boolean; nodes: Node[]; onClose: () => void; onLaunched: () => void }) {
  const [images, setImages] = useState<string[]>([]);
  const [image, setImage] = useState('');
  const [name, setName] = useState('');
  const [cpu, setCpu] = useState(1);
  const [memGiB, setMemGiB] = useState(1);
  const [fgpu, setFgpu] = useState(0);
  const [count, setCount] = useState(1);
  const [step, setStep] = useState(0.1);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const alive = props.nodes.filter((n) => n.status === 'ALIVE');
  const pool = alive.length ? alive : props.nodes;
  const maxCpu = Math.max(1, ...pool.map((n) => n.capacity.cpu));
  const maxMem = Math.max(1, ...pool.map((n) => Math.floor((n.capacity.mem / GiB) * 4) / 4));
  const maxGpu = Math.max(0, ...pool.map((n) => n.capacity.fgpu ?? 0));

  useEffect(() => {
    if (!props.open) return;
    setError(null);
    api.images().then((r) => {
      const refs = r.images.map((i) => i.ref).sort();
      // Offered, not filled in: the list may arrive while the user is
      // typing, and a value set then would land in the middle of it.
      setImages(refs);
    }).catch(() => setImages([]));   // no image list: the field takes free text
    api.config().then((c) => {
      const q = Number(c.fgpu_quantum);
      if (q > 0) setStep(q >= 0.1 || Math.abs(Math.round(0.1 / q) - 0.1 / q) > 1e-9 ? q : 0.1);
    }).catch(() => { /* keep the default step */ });
    setCpu((v) => Math.min(v, maxCpu));
    setMemGiB((v) => Math.min(v, maxMem));
    setFgpu((v) => (maxGpu > 0 ? Math.min(v || 1, maxGpu) : 0));
  }, [props.open]);

  const launch = async (e: Event) => {
    e.preventDefault();
    setError(null);
    const chosen = image.trim() || images[0] || '';
    if (!chosen) { setError('Choose an image or type an image name.'); return; }
    if (!Number.isInteger(count) || count < 1 || count > 100) { setError('Sessions must be a whole number from 1 to 100.'); return; }
    const req: Record<string, unknown> = {
      image: chosen, count,
      resources: { cpu: fmtNum(cpu), mem: `${Math.round(memGiB * 1024)}MiB`, fgpu: fmtNum(fgpu) },
    };
    if (name.trim()) req.name = name.trim();
    setBusy(true);
    try {
      await api.launch(req);
      props.onLaunched();
    } catch (err) {
      setError(`Cannot launch: ${(err as Error).message}`);
    } finally {
      setBusy(false);
    }
  };

  return (
    <Dialog open={props.open} title="Start a session" onClose={props.onClose}>
      <form onSubmit={launch} class="launch">
        <TextField label="Image" value={image} onInput={setImage} list="tessera-images"
          placeholder={images[0]}
          hint={images.length ? `Pick an image or type the name of one on the nodes; left empty, ${images[0]}.`
            : 'Type an image name, e.g. python:3.11.'} />
        <datalist id="tessera-images">
          {images.map((r) => <option key={r} value={r} />)}
        </datalist>
        <TextField label="Name" value={name} onInput={setName} placeholder="optional" />
        <SliderField label="CPU" value={cpu} min={0.25} max={maxCpu} step={0.25} unit="cores" onChange={setCpu} />
        <SliderField label="Memory" value={memGiB} min={0.25} max={maxMem} step={0.25} unit="GiB" onChange={setMemGiB} />
        <SliderField label="GPU" value={fgpu} min={0} max={maxGpu} step={step} unit="fGPU" onChange={setFgpu}
          disabled={maxGpu === 0} hint={maxGpu === 0 ? 'No node offers a GPU.' : undefined} />
        <SliderField label="Sessions" value={count} min={1} max={20} step={1} onChange={(v) => setCount(Math.round(v))} />
        <ErrorText error={error} />
        <div class="actions">
          <Button onClick={props.onClose}>Cancel</Button>
          <Button type="submit" kind="primary" disabled={busy}>Launch</Button>
        </div>
      </form>
    </Dialog>
  );
}
