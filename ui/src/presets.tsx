// Resource presets (docs/admin.md, "Resource presets"): the launcher's
// buttons that set CPU, memory and GPU at once, read from GET
// /v1/presets. The Admin page's section where admins make, change and
// remove them is presets-admin.tsx, a chunk of its own.
import { call, fmtBytes, fmtNum, type Resources } from './api';

// group null: offered for every resource group.
export interface Preset { name: string; resources: Resources; group: string | null }
export type PresetBody = { name?: string; resources?: Partial<Record<'cpu' | 'mem' | 'fgpu', number | string>>; group?: string | null };

const enc = encodeURIComponent;
export const presetsApi = {
  list: () => call<{ presets: Preset[] }>('GET', '/api/v1/presets'),
  create: (b: PresetBody) => call<{ preset: Preset }>('POST', '/api/v1/presets', b),
  update: (name: string, b: PresetBody) => call<{ preset: Preset }>('PATCH', `/api/v1/presets/${enc(name)}`, b),
  remove: (name: string) => call<{ removed: string }>('DELETE', `/api/v1/presets/${enc(name)}`),
};

// "4 CPU · 8 GiB · 1 fGPU"
export function presetWhat(p: Preset): string {
  const r = p.resources;
  return [`${fmtNum(r.cpu)} CPU`, fmtBytes(r.mem), r.fgpu ? `${fmtNum(r.fgpu)} fGPU` : ''].filter(Boolean).join(' \u00b7 ');
}

// The presets a launch in resource group `group` ('' : the default one)
// is offered: those for every group and those for that group.
export function presetsFor(all: Preset[], group: string): Preset[] {
  const g = group || 'default';
  return all.filter((p) => p.group === null || p.group === g);
}
