// A small component library: every control has a visible label, works
// from the keyboard (native elements, <dialog> for modals), and errors are
// announced (role="alert").
import { Fragment, type ComponentChildren } from 'preact';
import { useId, useLayoutEffect, useRef } from 'preact/hooks';

export function ErrorText({ error }: { error: string | null }) {
  return error ? <p class="error" role="alert">{error}</p> : null;
}

// An email in a narrow column: it may break only before its '@' (never
// inside a word), and a part wider than the column is cut with an
// ellipsis, the whole address in the title.
export function Email({ email }: { email: string }) {
  const at = email.lastIndexOf('@');
  if (at <= 0) return <span class="email" title={email}><span class="email-part">{email}</span></span>;
  return (
    <span class="email" title={email}>
      <span class="email-part">{email.slice(0, at)}</span><wbr /><span class="email-part">{email.slice(at)}</span>
    </span>
  );
}

// A name made of tokens (an image reference, REGISTRY/NAME:TAG): a line
// may break after a '/' or before a ':' or '@' only, never inside a token
// ("python:3.1|1"); a host name (a node's id) after a '-' or '.' too. One
// token longer than the line is cut short, and the title has it all.
export function Name({ text, mono, host }: { text: string; mono?: boolean; host?: boolean }) {
  const parts = text.split(host ? /(?<=[/.-])|(?=[:@])/ : /(?<=\/)|(?=[:@])/);
  return (
    <span class={`name-ref${mono ? ' mono' : ''}`} title={text}>
      {parts.map((p, i) => <Fragment key={i}>{i > 0 && <wbr />}<span class="name-part">{p}</span></Fragment>)}
    </span>
  );
}

export function Button(props: {
  children: ComponentChildren; onClick?: () => void; kind?: 'primary' | 'danger' | 'plain';
  type?: 'button' | 'submit'; disabled?: boolean; label?: string; describedBy?: string; title?: string;
}) {
  return (
    <button type={props.type ?? 'button'} class={`btn ${props.kind ?? 'plain'}`} onClick={props.onClick}
      disabled={props.disabled} aria-label={props.label} aria-describedby={props.describedBy} title={props.title}>
      {props.children}
    </button>
  );
}

// A field's problem, said under it while the user types (and named by
// the input's aria-describedby), so that a request is fixed before it is sent.
function FieldError({ id, error }: { id: string; error?: string | null }) {
  return error ? <small class="error field-error" id={id}>{error}</small> : null;
}

export function TextField(props: {
  label: string; value: string; onInput: (v: string) => void; type?: string; list?: string;
  autocomplete?: string; required?: boolean; placeholder?: string; hint?: string; disabled?: boolean;
  error?: string | null; mono?: boolean;
}) {
  const id = useId();
  return (
    <div class={`field${props.error ? ' invalid' : ''}`}>
      <label for={id}>{props.label}</label>
      <input id={id} type={props.type ?? 'text'} value={props.value} list={props.list}
        autocomplete={props.autocomplete} required={props.required} placeholder={props.placeholder}
        disabled={props.disabled} class={props.mono ? 'mono' : undefined}
        aria-invalid={props.error ? true : undefined} aria-describedby={props.error ? `${id}-error` : undefined}
        onInput={(e) => props.onInput((e.target as HTMLInputElement).value)} />
      <FieldError id={`${id}-error`} error={props.error} />
      {props.hint && <small class="hint">{props.hint}</small>}
    </div>
  );
}

// A slider and a number field bound to one value, both named by the one
// visible label.
export function SliderField(props: {
  label: string; value: number; min: number; max: number; step: number; unit?: string;
  onChange: (v: number) => void; disabled?: boolean; hint?: string; error?: string | null;
}) {
  const id = useId();
  const labelId = `${id}-label`;
  const set = (raw: string) => {
    const v = Number(raw);
    if (!Number.isNaN(v)) props.onChange(v);
  };
  return (
    <div class={`field slider${props.error ? ' invalid' : ''}`}>
      <label id={labelId} for={id}>{props.label}</label>
      <div class="slider-row">
        <input type="range" aria-labelledby={labelId} min={props.min} max={props.max} step={props.step}
          value={props.value} disabled={props.disabled}
          onInput={(e) => set((e.target as HTMLInputElement).value)} />
        <input id={id} type="number" min={props.min} max={props.max} step={props.step} value={props.value}
          disabled={props.disabled} onInput={(e) => set((e.target as HTMLInputElement).value)}
          aria-invalid={props.error ? true : undefined} aria-describedby={props.error ? `${id}-error` : undefined} />
        {props.unit && <span class="unit" aria-hidden="true">{props.unit}</span>}
      </div>
      <FieldError id={`${id}-error`} error={props.error} />
      {props.hint && <small class="hint">{props.hint}</small>}
    </div>
  );
}

export function Dialog(props: { open: boolean; title: string; onClose: () => void; children: ComponentChildren }) {
  const ref = useRef<HTMLDialogElement>(null);
  // The element that had the focus before the dialog opened gets it back
  // when it closes (if it is still on the page), so keyboard users go on
  // where they were.
  const opener = useRef<HTMLElement | null>(null);
  // A layout effect: it runs right after the render that closed the dialog
  // (a plain effect waits for the next frame), so the focus never rests on
  // the page's body in between, where the removed contents left it.
  useLayoutEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (props.open && !d.open) {
      opener.current = document.activeElement as HTMLElement | null;
      d.showModal();
    }
    if (!props.open && d.open) d.close();
    if (!props.open && opener.current) {
      const o = opener.current;
      opener.current = null;
      if (o.isConnected) o.focus();
    }
  }, [props.open]);
  const titleId = useId();
  return (
    <dialog ref={ref} aria-labelledby={titleId} onClose={props.onClose} onCancel={props.onClose}>
      <h2 id={titleId}>{props.title}</h2>
      {props.open && props.children}
    </dialog>
  );
}

export function UsageBar(props: { label: string; used: number; total: number; unit: string }) {
  const pct = props.total > 0 ? Math.min(100, (props.used / props.total) * 100) : 0;
  const id = useId();
  return (
    <div class="usage">
      <span id={id}>{props.label}: {props.used} / {props.total} {props.unit}</span>
      <div class="bar" role="meter" aria-labelledby={id} aria-valuemin={0} aria-valuemax={props.total}
        aria-valuenow={props.used}>
        <div class="fill" style={{ width: `${pct}%` }} />
      </div>
    </div>
  );
}
