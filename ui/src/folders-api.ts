// Calls for data folders and their files (docs/api.md, "Folders" and
// "Folder files"), through the webserver like the rest (api.ts).
import { ApiError, call, csrfToken } from './api';

export interface Share { email: string; permission: 'ro' | 'rw' }
export interface Folder {
  id: string; name: string; host: string; owner: string; quota_bytes: number; usage_bytes: number;
  permission: 'owner' | 'rw' | 'ro'; shared_with?: Share[]; automount: boolean;
  created_at: string; trashed_at: string | null;
  /* What caps writes made inside sessions: the kernel (btrfs-qgroup,
   * project-quota) or only the API's uploads (api-only). */
  quota_enforced?: 'btrfs-qgroup' | 'project-quota' | 'api-only';
}
export interface FileEntry { name: string; type: 'file' | 'dir' | 'link' | 'other'; size: number; mtime: string; mode: number }

const enc = encodeURIComponent;
const base = (name: string) => `/api/v1/folders/${enc(name)}`;

export const folders = {
  list: () => call<{ folders: Folder[] }>('GET', '/api/v1/folders'),
  trash: () => call<{ folders: Folder[] }>('GET', '/api/v1/folders?trash=1'),
  create: (body: { name: string; host?: string; quota?: string }) => call<Folder>('POST', '/api/v1/folders', body),
  rename: (name: string, to: string) => call<Folder>('PATCH', base(name), { name: to }),
  remove: (name: string, force: boolean) => call<unknown>('DELETE', `${base(name)}${force ? '?force=1' : ''}`),
  restore: (name: string) => call<Folder>('POST', `${base(name)}/restore`),
  // force: take away what that user's sessions mount, ending them (409 otherwise).
  share: (name: string, email: string, permission: 'ro' | 'rw', force = false) =>
    call<Folder>('POST', `${base(name)}/shares`, force ? { email, permission, force } : { email, permission }),
  unshare: (name: string, email: string, force = false) =>
    call<Folder>('DELETE', `${base(name)}/shares/${enc(email)}${force ? '?force=1' : ''}`),
  files: (name: string, path: string) =>
    call<{ path: string; entries: FileEntry[] }>('GET', `${base(name)}/files${path ? `?path=${enc(path)}` : ''}`),
  mkdir: (name: string, path: string) => call<unknown>('POST', `${base(name)}/mkdir`, { path, parents: false }),
  move: (name: string, from: string, to: string) => call<unknown>('POST', `${base(name)}/mv`, { from, to, overwrite: false }),
  removeFile: (name: string, path: string, recursive: boolean) =>
    call<unknown>('DELETE', `${base(name)}/files?path=${enc(path)}${recursive ? '&recursive=1' : ''}`),
  // A plain link: the browser downloads it as any file (the webserver
  // streams it with its length and name).
  downloadUrl: (name: string, path: string) => `${base(name)}/download?path=${enc(path)}`,
};

// PUT .../upload with the body's SHA-256 (computed first: the API needs it
// before the body). XMLHttpRequest, not fetch: its upload reports progress.
// Resolves with the server's answer; rejects with an ApiError in words.
export function uploadFile(folder: string, path: string, file: Blob, sha256: string, overwrite: boolean,
  onProgress: (sent: number) => void, signal: AbortSignal): Promise<{ path: string; size: number; sha256: string }> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('PUT', `${base(folder)}/upload?path=${enc(path)}${overwrite ? '&overwrite=1' : ''}`);
    xhr.setRequestHeader('X-CSRF-Token', csrfToken());
    xhr.setRequestHeader('X-Tessera-Content-SHA256', sha256);
    xhr.setRequestHeader('Content-Type', 'application/octet-stream');
    xhr.setRequestHeader('Accept', 'application/json');
    xhr.upload.onprogress = (e) => onProgress(e.loaded);
    const abort = () => xhr.abort();
    signal.addEventListener('abort', abort);
    const done = () => signal.removeEventListener('abort', abort);
    xhr.onload = () => {
      done();
      let data: any = null;
      try { data = xhr.responseText ? JSON.parse(xhr.responseText) : null; } catch { /* not JSON */ }
      if (xhr.status >= 200 && xhr.status < 300) resolve(data);
      else reject(new ApiError(data?.error?.message ?? `The server answered HTTP ${xhr.status}.`, xhr.status,
        data?.error?.code ?? 'http'));
    };
    xhr.onerror = () => { done(); reject(new ApiError('The upload was cut: cannot reach the Tessera webserver.', 0, 'network')); };
    xhr.onabort = () => { done(); reject(new ApiError('Cancelled.', 0, 'cancelled')); };
    xhr.send(file);
  });
}

// Size in words: bytes below 1 KiB, else KiB/MiB/GiB/TiB with one decimal
// under 10.
export function fmtSize(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = bytes, u = 0;
  while (v >= 1024 && u < units.length - 1) { v /= 1024; u++; }
  return `${u === 0 || v >= 10 ? Math.round(v) : v.toFixed(1)} ${units[u]}`;
}

// Joins a directory (relative, '' for the root) and a name.
export const joinPath = (dir: string, name: string) => (dir ? `${dir}/${name}` : name);

// A name typed for a file or directory: one path component.
export function checkEntryName(n: string): string | null {
  if (!n) return 'Enter a name.';
  if (n === '.' || n === '..') return 'A name cannot be . or ..';
  if (n.includes('/')) return 'A name cannot contain /';
  if (n.includes('\0')) return 'A name cannot contain a NUL character.';
  return null;
}

// A folder name as the API takes it (docs/folders.md, "Names").
export function checkFolderName(n: string): string | null {
  if (!/^[A-Za-z0-9._-]{1,63}$/.test(n)) return 'A folder name is 1 to 63 letters, digits, dots, underscores or dashes.';
  if (n === '.' || n === '..') return 'A folder name cannot be . or ..';
  return null;
}
