// The browser half of test_folders_ui.sh: the Data page, the file browser
// and the launch dialog's folder picker. Prints "ok ..." / "FAIL ..." lines
// and "# done" at the end; the shell side counts them. Waits are on states
// reached (rows, words, progress values), never on how fast.
import { createRequire } from 'node:module';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const env = (k) => { if (!process.env[k]) throw new Error(`${k} is not set`); return process.env[k]; };
const require = createRequire(path.join(env('UI_SRC'), 'package.json'));
const { chromium } = require('playwright-core');

const WEB = env('WEB_URL'), EMAIL = env('ADMIN_EMAIL'), PASSWORD = env('ADMIN_PASSWORD');
const IMAGE = env('IMAGE'), SHOTS = env('SHOTS'), SLOW_FILE = env('SLOW_FILE');
const TESSERA = env('TESSERA_BIN');
env('TESSERA_CONFIG');
mkdirSync(SHOTS, { recursive: true });
const WAIT = 60000;
// The launch dialog's Review, then Launch on its review step (the
// launcher shows what it will ask for before it does).
const reviewAndLaunch = async (dlg) => {
  await dlg.getByRole('button', { name: 'Review', exact: true }).click();
  await dlg.getByRole('button', { name: 'Launch', exact: true }).click();
};

let failed = 0;
async function step(name, fn) {
  try {
    await fn();
    console.log(`ok ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${String(e.message).split('\n')[0]}`);
    throw e;
  }
}
const shot = (page, name) => page.screenshot({ path: path.join(SHOTS, `${name}.png`) });
const cli = (...args) => execFileSync(TESSERA, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

async function login(page, email, password) {
  await page.goto(WEB);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: WAIT });
}

// An upload row reaches `words` ("uploaded", "cancelled"...).
async function uploadState(page, name, words) {
  await page.locator(`li.upload[data-upload="${name}"] .upload-state`, { hasText: words }).waitFor({ timeout: WAIT });
}

const launch = (profile) => chromium.launchPersistentContext(profile, {
  executablePath: '/usr/bin/chromium',
  headless: true,
  acceptDownloads: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  viewport: { width: 1200, height: 760 },
});

const ctx = await launch(env('PROFILE_DIR'));
let ctx2 = null;
try {
  const page = ctx.pages()[0] ?? await ctx.newPage();

  await step('the admin logs in and opens the Data page', async () => {
    await login(page, EMAIL, PASSWORD);
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Data' }).click();
    await page.getByRole('heading', { name: 'Data', exact: true }).waitFor({ timeout: WAIT });
  });

  await step('a folder name the API refuses is caught with words', async () => {
    await page.getByRole('button', { name: 'New folder' }).click();
    const dlg = page.getByRole('dialog', { name: 'New folder' });
    await dlg.getByLabel('Name').fill('bad/name');
    await dlg.getByRole('button', { name: 'Create' }).click();
    await dlg.getByRole('alert').filter({ hasText: 'letters, digits' }).waitFor({ timeout: WAIT });
    await dlg.getByRole('button', { name: 'Cancel' }).click();
    await dlg.waitFor({ state: 'hidden' });
  });

  for (const [name, quota] of [['project', '1g'], ['.local', '']]) {
    await step(`New folder makes ${name}${quota ? ` with a ${quota} quota` : ''}`, async () => {
      await page.getByRole('button', { name: 'New folder' }).click();
      const dlg = page.getByRole('dialog', { name: 'New folder' });
      await dlg.getByLabel('Name').fill(name);
      if (quota) await dlg.getByLabel('Quota').fill(quota);
      await dlg.getByRole('button', { name: 'Create' }).click();
      await dlg.waitFor({ state: 'hidden', timeout: WAIT });
      await page.locator(`tr[data-folder="${name}"]`).waitFor({ timeout: WAIT });
    });
  }

  await step('a dot-folder carries the automount mark; a quota shows as a bar', async () => {
    await page.locator('tr[data-folder=".local"] .chip.automount').waitFor();
    const meter = page.getByRole('meter', { name: /Usage of project/ });
    if (await meter.getAttribute('aria-valuemax') !== String(2 ** 30)) throw new Error('the bar is not against the 1 GiB quota');
  });

  await step('a second try of the same name shows the API\'s error', async () => {
    await page.getByRole('button', { name: 'New folder' }).click();
    const dlg = page.getByRole('dialog', { name: 'New folder' });
    await dlg.getByLabel('Name').fill('project');
    await dlg.getByRole('button', { name: 'Create' }).click();
    await dlg.getByRole('alert').filter({ hasText: 'Cannot create the folder' }).waitFor({ timeout: WAIT });
    await page.keyboard.press('Escape');
    await dlg.waitFor({ state: 'hidden' });
  });

  await step('Browse opens the file browser; New directory makes inputs', async () => {
    await page.getByRole('button', { name: 'Browse project' }).click();
    await page.getByRole('heading', { name: 'Folder project' }).waitFor({ timeout: WAIT });
    await page.getByRole('button', { name: 'New directory' }).click();
    const dlg = page.getByRole('dialog', { name: 'New directory' });
    await dlg.getByLabel('Directory name').fill('inputs');
    await dlg.getByRole('button', { name: 'Create' }).click();
    await dlg.waitFor({ state: 'hidden', timeout: WAIT });
    await page.locator('tr[data-entry="inputs"]').waitFor({ timeout: WAIT });
  });

  await step('a file dropped on the browser (a drop event with a DataTransfer) uploads to 100%', async () => {
    const dt = await page.evaluateHandle(() => {
      const d = new DataTransfer();
      d.items.add(new File(['dropped by the browser test\n'], 'drop.txt', { type: 'text/plain' }));
      d.items.add(new File([new Uint8Array(3 << 20).map((_, i) => i & 255)], 'three-mib.bin'));
      return d;
    });
    const zone = page.getByTestId('drop-zone');
    await zone.dispatchEvent('dragenter', { dataTransfer: dt });
    await zone.dispatchEvent('dragover', { dataTransfer: dt });
    await zone.dispatchEvent('drop', { dataTransfer: dt });
    await uploadState(page, 'drop.txt', 'uploaded');
    await uploadState(page, 'three-mib.bin', 'uploaded');
    const v = await page.locator('li.upload[data-upload="three-mib.bin"] progress').getAttribute('value');
    if (v !== '100') throw new Error(`progress ends at ${v}`);
    await page.locator('tr[data-entry="drop.txt"]').waitFor({ timeout: WAIT });
    await page.locator('tr[data-entry="three-mib.bin"]', { hasText: '3.0 MiB' }).waitFor({ timeout: WAIT });
  });

  await step('browsing into inputs shows it in the breadcrumb', async () => {
    await page.getByRole('button', { name: 'Open directory inputs' }).click();
    await page.getByRole('navigation', { name: 'Breadcrumb' }).getByRole('link', { name: 'inputs' }).waitFor({ timeout: WAIT });
    await page.getByText('This directory is empty.').waitFor({ timeout: WAIT });
  });

  const content = 'hello from the file input\n'.repeat(1000);
  await step('a file chosen with the file input uploads into inputs', async () => {
    await page.locator('#upload-input').setInputFiles({ name: 'hello.txt', mimeType: 'text/plain', buffer: Buffer.from(content) });
    await uploadState(page, 'hello.txt', 'uploaded');
    await page.locator('tr[data-entry="hello.txt"]').waitFor({ timeout: WAIT });
    const listing = cli('folder', 'files', 'project', 'inputs');
    if (!listing.includes('hello.txt')) throw new Error(`the CLI does not list it: ${listing}`);
  });

  await step('Download saves the file, unchanged, as a browser download', async () => {
    const [dl] = await Promise.all([
      page.waitForEvent('download', { timeout: WAIT }),
      page.getByRole('link', { name: 'Download hello.txt' }).click(),
    ]);
    if (dl.suggestedFilename() !== 'hello.txt') throw new Error(`saved as ${dl.suggestedFilename()}`);
    const got = readFileSync(await dl.path(), 'utf8');
    if (got !== content) throw new Error(`downloaded ${got.length} bytes, not the ${content.length} uploaded`);
  });

  await step('an upload over an existing file fails with words; Replace replaces it', async () => {
    await page.getByRole('button', { name: 'Dismiss hello.txt' }).click();
    await page.locator('#upload-input').setInputFiles({ name: 'hello.txt', mimeType: 'text/plain', buffer: Buffer.from('new\n') });
    await page.locator('li.upload[data-upload="hello.txt"] .upload-state', { hasText: 'already exists' }).waitFor({ timeout: WAIT });
    await page.getByRole('button', { name: 'Replace hello.txt' }).click();
    await uploadState(page, 'hello.txt', 'uploaded');
    mkdirSync(env('DOWNLOADS'), { recursive: true });
    const local = path.join(env('DOWNLOADS'), 'replaced.txt');
    cli('folder', 'download', 'project', 'inputs/hello.txt', local);
    const got = readFileSync(local, 'utf8');
    if (got !== 'new\n') throw new Error(`the folder holds ${JSON.stringify(got.slice(0, 40))}`);
    // Back as it was, for the session's check below.
    await page.getByRole('button', { name: 'Dismiss hello.txt' }).click();
    await page.locator('#upload-input').setInputFiles({ name: 'hello.txt', mimeType: 'text/plain', buffer: Buffer.from(content) });
    await page.locator('li.upload[data-upload="hello.txt"] .upload-state', { hasText: 'already exists' }).waitFor({ timeout: WAIT });
    await page.getByRole('button', { name: 'Replace hello.txt' }).click();
    await uploadState(page, 'hello.txt', 'uploaded');
  });

  await step('an upload in progress shows its bar; Cancel stops it and leaves no file', async () => {
    // The browser's own network throttling keeps the upload going long
    // enough to be seen and cancelled.
    const cdp = await ctx.newCDPSession(page);
    await cdp.send('Network.enable');
    await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: 1 << 20 });
    await page.locator('#upload-input').setInputFiles(SLOW_FILE);
    const name = path.basename(SLOW_FILE);
    await page.waitForFunction((n) => {
      const li = document.querySelector(`li.upload[data-upload="${n}"]`);
      return li && li.classList.contains('upload') && li.querySelector('.upload-state').textContent.startsWith('uploading') &&
        Number(li.querySelector('progress').value) > 0;
    }, name, { timeout: WAIT });
    await shot(page, 'data_upload_progress');
    await page.getByRole('button', { name: `Cancel upload of ${name}` }).click();
    await uploadState(page, name, 'cancelled');
    await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: -1 });
    await page.getByRole('button', { name: 'Refresh' }).click();
    await page.locator('tr[data-entry="hello.txt"]').waitFor();
    if (await page.locator(`tr[data-entry="${name}"]`).count()) throw new Error('the cancelled upload is listed');
    // Nor a hidden partial file: the manager drops it when the body is cut.
    for (let i = 0; ; i++) {
      const all = cli('folder', 'files', 'project', 'inputs');
      if (!all.includes('.tessera') && !all.includes(name)) break;
      if (i > 100) throw new Error(`a partial file stays: ${all}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  });

  await step('Remove asks first, then removes the file', async () => {
    await page.getByRole('navigation', { name: 'Breadcrumb' }).getByRole('link', { name: 'project' }).click();
    await page.locator('tr[data-entry="drop.txt"]').waitFor({ timeout: WAIT });
    await page.getByRole('button', { name: 'Remove drop.txt' }).click();
    const dlg = page.getByRole('dialog', { name: 'Remove file' });
    await dlg.getByText('This cannot be undone').waitFor();
    await dlg.getByRole('button', { name: 'Remove' }).click();
    await page.locator('tr[data-entry="drop.txt"]').waitFor({ state: 'detached', timeout: WAIT });
  });

  await step('Rename moves a file into a directory', async () => {
    await page.getByRole('button', { name: 'Rename or move three-mib.bin' }).click();
    const dlg = page.getByRole('dialog', { name: 'Rename or move three-mib.bin' });
    await dlg.getByLabel('New path').fill('inputs/moved.bin');
    await dlg.getByRole('button', { name: 'Move' }).click();
    await page.locator('tr[data-entry="three-mib.bin"]').waitFor({ state: 'detached', timeout: WAIT });
    if (!cli('folder', 'files', 'project', 'inputs').includes('moved.bin')) throw new Error('not moved');
  });

  await step('the Data page lists the folders with usage against quota', async () => {
    await page.getByRole('button', { name: '← All folders' }).click();
    await page.locator('tr[data-folder="project"]').waitFor({ timeout: WAIT });
    await shot(page, 'data_page');
  });

  await step('Share gives bob read-only access', async () => {
    // bob is made through the API as the admin, as the Admin page does.
    const made = await page.evaluate(async () => {
      const me = await (await fetch('/auth/me')).json();
      const r = await fetch('/api/v1/users', { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': me.csrf_token },
        body: JSON.stringify({ email: 'bob@folders-ui.test', password: 'bob password 1' }) });
      return r.status;
    });
    if (made !== 201) throw new Error(`POST /v1/users answered ${made}`);
    await page.getByRole('button', { name: 'Share project' }).click();
    const dlg = page.getByRole('dialog', { name: 'Share project' });
    await dlg.getByLabel('Email').fill('bob@folders-ui.test');
    await dlg.getByLabel('Read-only').check();
    await dlg.getByRole('button', { name: 'Share' }).click();
    await dlg.getByRole('button', { name: 'Unshare with bob@folders-ui.test' }).waitFor({ timeout: WAIT });
    await dlg.getByRole('button', { name: 'Close' }).click();
    await page.locator('tr[data-folder="project"]', { hasText: 'bob@folders-ui.test (ro)' }).waitFor({ timeout: WAIT });
    // Closed, the focus is back on the button that opened it.
    const back = await page.waitForFunction(() => document.activeElement?.getAttribute('aria-label') === 'Share project',
      null, { timeout: 5000 }).then(() => 'Share project', () => page.evaluate(() => document.activeElement?.getAttribute('aria-label')));
    if (back !== 'Share project') {
      const html = await page.evaluate(() => document.activeElement?.outerHTML.slice(0, 160));
      throw new Error(`focus went to ${back} (${html})`);
    }
  });

  await step('bob sees the share read-only: uploads and removals disabled, with the reason', async () => {
    ctx2 = await launch(`${env('PROFILE_DIR')}-bob`);
    const bob = ctx2.pages()[0] ?? await ctx2.newPage();
    await login(bob, 'bob@folders-ui.test', 'bob password 1');
    await bob.goto(`${WEB}data`);
    await bob.locator('tr[data-folder="project"]', { hasText: 'read-only' }).waitFor({ timeout: WAIT });
    if (await bob.getByRole('button', { name: 'Remove project' }).count()) throw new Error('bob is offered Remove');
    await bob.getByRole('button', { name: 'Browse project' }).click();
    await bob.getByRole('note').filter({ hasText: 'read-only' }).waitFor({ timeout: WAIT });
    if (!(await bob.getByRole('button', { name: 'Upload files' }).isDisabled())) throw new Error('Upload is enabled');
    if (!(await bob.getByRole('button', { name: 'Remove inputs' }).isDisabled())) throw new Error('Remove is enabled');
    const desc = await bob.getByRole('button', { name: 'Upload files' }).getAttribute('aria-describedby');
    if (!desc) throw new Error('the disabled Upload button does not point at the reason');
    await bob.getByRole('button', { name: 'Open directory inputs' }).click();
    await bob.locator('tr[data-entry="hello.txt"]').waitFor({ timeout: WAIT });
    await ctx2.close();
    ctx2 = null;
  });

  await step('Remove asks, says "trash", and moves the folder to the trash', async () => {
    await page.getByRole('button', { name: 'Remove project' }).click();
    const dlg = page.getByRole('dialog', { name: 'Remove folder' });
    await dlg.getByText('to the trash').waitFor();
    // The keyboard's focus is in the dialog, on Cancel, not on the
    // destructive button.
    const focused = await page.evaluate(() => document.activeElement?.closest('dialog') ? document.activeElement.textContent : null);
    if (focused !== 'Cancel') throw new Error(`focus is on ${focused}`);
    await dlg.getByRole('button', { name: 'Move to trash' }).click();
    await page.locator('tr[data-folder="project"]').waitFor({ state: 'detached', timeout: WAIT });
    await page.locator('tr[data-trashed="project"]').waitFor({ timeout: WAIT });
  });

  await step('Restore brings it back with its files', async () => {
    await page.getByRole('button', { name: 'Restore project' }).click();
    await page.locator('tr[data-folder="project"]').waitFor({ timeout: WAIT });
    await page.locator('tr[data-trashed="project"]').waitFor({ state: 'detached', timeout: WAIT });
    if (!cli('folder', 'files', 'project', 'inputs').includes('hello.txt')) throw new Error('files lost');
  });

  await step('the launch dialog mounts the folder picked at the path typed, read-only', async () => {
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Sessions' }).click();
    await page.getByRole('button', { name: 'Start' }).click();
    const dlg = page.getByRole('dialog', { name: 'Start a session' });
    await dlg.waitFor();
    await dlg.getByLabel('Image', { exact: true }).fill(IMAGE);
    await dlg.getByLabel('Name').fill('mnt');
    await dlg.getByRole('spinbutton', { name: 'CPU' }).fill('0.25');
    await dlg.getByRole('spinbutton', { name: 'Memory' }).fill('0.25');
    await dlg.getByText('are mounted automatically').waitFor();
    await dlg.getByLabel('Mount project').check();
    const p = dlg.getByLabel('Path for project');
    if (await p.inputValue() !== '/home/work/project') throw new Error(`default path ${await p.inputValue()}`);
    await p.fill('/etc/project');
    await dlg.getByText('cannot be under /etc').waitFor();
    await dlg.getByRole('button', { name: 'Review', exact: true }).click();
    await dlg.getByRole('alert').filter({ hasText: 'The mount path of project' }).waitFor();
    await p.fill('/data/project');
    await dlg.locator('li.mount[data-mount="project"]').getByLabel('Read-only').check();
    await dlg.locator('fieldset.folder-picker').scrollIntoViewIfNeeded();
    await shot(page, 'launch_folder_picker');
    await reviewAndLaunch(dlg);
    await dlg.waitFor({ state: 'hidden', timeout: WAIT });
  });

  await step('the session mounts project at /data/project read-only, and .local by itself', async () => {
    let info;
    for (;;) {
      info = JSON.parse(cli('session', 'info', 'mnt', '--json'));
      const s = info.session ?? info;
      if (s.status === 'RUNNING') { info = s; break; }
      if (['ERROR', 'TERMINATED', 'CANCELLED'].includes(s.status)) throw new Error(`session ${s.status}: ${s.status_info}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    const m = info.mounts ?? [];
    const pm = m.find((x) => x.folder === 'project');
    if (!pm || pm.path !== '/data/project' || !pm.ro) throw new Error(`mounts: ${JSON.stringify(m)}`);
    if (!m.find((x) => x.folder === '.local' && x.automount)) throw new Error(`.local not automounted: ${JSON.stringify(m)}`);
    const got = cli('session', 'exec', 'mnt', '--', 'cat', '/data/project/inputs/hello.txt');
    if (got !== content) throw new Error(`exec read ${got.length} bytes`);
    let err = '';
    try { cli('session', 'exec', 'mnt', '--', 'touch', '/data/project/x'); } catch (e) { err = String(e.stderr) + String(e.stdout); }
    if (!err.includes('Read-only')) throw new Error(`a write in the read-only mount did not fail with EROFS: ${err}`);
  });

  await step('a folder a session mounts is not removed without force; the dialog names the session', async () => {
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Data' }).click();
    await page.getByRole('button', { name: 'Remove project' }).click();
    const dlg = page.getByRole('dialog', { name: 'Remove folder' });
    await dlg.getByRole('button', { name: 'Move to trash' }).click();
    await dlg.getByRole('alert').filter({ hasText: 'mnt' }).waitFor({ timeout: WAIT });
    await dlg.getByRole('button', { name: 'Remove anyway (force)' }).waitFor();
    await dlg.getByRole('button', { name: 'Cancel' }).click();
    await dlg.waitFor({ state: 'hidden' });
    await page.locator('tr[data-folder="project"]').waitFor();
  });
} catch {
  // the failing step has said why
} finally {
  if (ctx2) await ctx2.close();
  await ctx.close();
  try { cli('session', 'rm', 'mnt'); } catch { /* not made */ }
}
if (!failed) console.log('# done');
