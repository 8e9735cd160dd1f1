// An image's name to copy, and a launch from it: shared by the conversion
// dialog (commit.tsx, in the main script) and the Environments page (a
// chunk of its own, environments.tsx).
import { useState } from 'preact/hooks';
import { copyText } from './api';
import { Button } from './components';
import { navigate } from './session';

// Opens the launcher on the Sessions page with this image in its Image
// field (sessions.tsx reads ?launch=).
export function launchFrom(ref: string) {
  navigate(`/sessions?launch=${encodeURIComponent(ref)}`);
}

// A copy button: says "Copied" (announced) or, when the browser refused,
// shows the name selected for copying by hand.
export function CopyName({ text, label }: { text: string; label: string }) {
  const [state, setState] = useState<'idle' | 'copied' | 'failed'>('idle');
  const copy = async () => {
    setState((await copyText(text)) ? 'copied' : 'failed');
    setTimeout(() => setState('idle'), 2500);
  };
  return (
    <span class="copy-name">
      <Button onClick={copy} label={label}>Copy name</Button>
      <span role="status" class="copy-state">
        {state === 'copied' ? 'Copied' : state === 'failed' ? <input class="mono" readOnly value={text} aria-label="The name to copy"
          ref={(el) => el?.select()} /> : ''}
      </span>
    </span>
  );
}
