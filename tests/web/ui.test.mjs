// The browser half of test_ui.sh. Prints "ok ..." / "FAIL ..." lines and
// "# done" at the end; the shell side counts them. Waits are on states
// reached (rows, words), never on how fast.
import { createRequire } from 'node:module';
import { mkdirSync } from 'node:fs';
import path from 'node:path';

const env = (k) => { if (!process.env[k]) throw new Error(`${k} is not set`); return process.env[k]; };
const require = createRequire(path.join(env('UI_SRC'), 'package.json'));
const { chromium } = require('playwright-core');

const WEB = env('WEB_URL'), EMAIL = env('ADMIN_EMAIL'), PASSWORD = env('ADMIN_PASSWORD');
const IMAGE = env('IMAGE'), SHOTS = env('SHOTS'), ML_IMAGE = env('ML_IMAGE');
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

// Counts of rows per status word in the sessions table.
async function statusCounts(page) {
  return page.$$eval('tr[data-session] .status', (els) =>
    els.reduce((m, e) => ((m[e.textContent] = (m[e.textContent] || 0) + 1), m), {}));
}
async function waitCounts(page, want) {
  await page.waitForFunction((want) => {
    const m = {};
    for (const e of document.querySelectorAll('tr[data-session] .status')) m[e.textContent] = (m[e.textContent] || 0) + 1;
    return Object.entries(want).every(([k, v]) => (m[k] || 0) === v) &&
      document.querySelectorAll('tr[data-session]').length === Object.values(want).reduce((a, b) => a + b, 0);
  }, want, { timeout: WAIT });
}

async function login(page, email, password) {
  await page.goto(WEB);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Log in' }).click();
}

const ctx = await chromium.launchPersistentContext(env('PROFILE_DIR'), {
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  viewport: { width: 1100, height: 640 },
});
try {
  const page = ctx.pages()[0] ?? await ctx.newPage();

  await step('a wrong password is refused with words', async () => {
    await login(page, EMAIL, 'not-the-password');
    await page.getByRole('alert').filter({ hasText: 'Wrong email or password.' }).waitFor({ timeout: WAIT });
    await shot(page, 'login_wrong_password');
  });

  await step('the admin logs in and sees the Sessions page', async () => {
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: WAIT });
  });

  await step('the launch dialog takes image, CPU, Memory, GPU and Sessions', async () => {
    await page.getByRole('button', { name: 'Start' }).click();
    const dlg = page.getByRole('dialog', { name: 'Start a session' });
    await dlg.waitFor();
    await dlg.getByLabel('Image', { exact: true }).fill(IMAGE);
    await dlg.getByLabel('Name').fill('gpu');
    await dlg.getByRole('spinbutton', { name: 'CPU' }).fill('0.25');
    await dlg.getByRole('spinbutton', { name: 'Memory' }).fill('0.25');
    await dlg.getByRole('spinbutton', { name: 'GPU' }).fill('1');
    // The Sessions slider, from the keyboard: 1 -> 3.
    const sessions = dlg.getByRole('slider', { name: 'Sessions' });
    await sessions.focus();
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('ArrowRight');
    const n = await dlg.getByRole('spinbutton', { name: 'Sessions' }).inputValue();
    if (n !== '3') throw new Error(`Sessions field shows ${n} after two ArrowRight presses`);
    await dlg.locator('.estimate.fits, .estimate.waits').waitFor({ timeout: WAIT });   // the picture with its estimate
    await shot(page, 'session_launch_dialog');
    await reviewAndLaunch(dlg);
    await dlg.waitFor({ state: 'hidden', timeout: WAIT });
  });

  await step('3 sessions of 1 fGPU on 2 fGPU: 2 RUNNING and 1 PENDING', async () => {
    await waitCounts(page, { RUNNING: 2, PENDING: 1 });
    const cfg = await page.locator('tr[data-session]').first().textContent();
    if (!cfg.includes('1 fGPU')) throw new Error(`configuration does not show 1 fGPU: ${cfg}`);
  });

  await step('the PENDING row says why it waits', async () => {
    const row = page.locator('tr[data-session]').filter({ hasText: 'PENDING' });
    const info = await row.locator('.info').textContent();
    if (!info || !info.trim()) throw new Error('no status_info on the PENDING row');
    await shot(page, 'pending_session_list');
  });

  let pendingName;
  await step('terminating a RUNNING session (with a confirm) starts the PENDING one', async () => {
    pendingName = await page.locator('tr[data-session]').filter({ hasText: 'PENDING' }).getAttribute('data-session');
    const running = page.locator('tr[data-session]').filter({ hasText: 'RUNNING' }).first();
    const victim = await running.getAttribute('data-session');
    await running.getByRole('button', { name: 'Terminate' }).click();
    const dlg = page.getByRole('dialog', { name: 'Terminate session' });
    await dlg.waitFor();
    await dlg.getByRole('button', { name: 'Terminate' }).click();
    await page.locator(`tr[data-session="${victim}"]`).waitFor({ state: 'detached', timeout: WAIT });
    await waitCounts(page, { RUNNING: 2 });
    await page.locator(`tr[data-session="${pendingName}"] .status`, { hasText: 'RUNNING' }).waitFor({ timeout: WAIT });
    await shot(page, 'pending_to_running');
  });

  await step('the launch dialog picks an environment, then a version; the image\'s minimum sets the sliders', async () => {
    await page.getByRole('button', { name: 'Start' }).click();
    const dlg = page.getByRole('dialog', { name: 'Start a session' });
    await dlg.waitFor();
    const envs = dlg.getByRole('group', { name: 'Environment' });
    // The tiles and rows are what people click; their radios say what is chosen.
    await envs.locator('label.env').filter({ has: page.locator('.env-title', { hasText: /^PyTorch$/ }) })
      .click({ timeout: WAIT });
    if (!await envs.getByRole('radio', { name: /^PyTorch/ }).isChecked()) throw new Error('PyTorch is not chosen');
    const versions = dlg.getByRole('group', { name: 'Version' });
    const row = versions.locator('label.version', { hasText: /^3\.11-torch1\.13/ });
    await row.click({ timeout: WAIT });
    if (!await versions.getByRole('radio', { name: /^3\.11-torch1\.13/ }).isChecked()) throw new Error('3.11-torch1.13 is not chosen');
    const text = await row.textContent();
    for (const want of ['Python 3.11.2', 'PyTorch 1.13.1', 'scikit-learn 1.2.1', 'needs 1 CPU · 1.0 GiB']) {
      if (!text.includes(want)) throw new Error(`the version row says '${text}', without '${want}'`);
    }
    // A CUDA build's row says which CUDA (tessera.cuda); a CPU build's says none.
    if (text.includes('CUDA')) throw new Error(`the CPU build's row says '${text}'`);
    const cudaRow = versions.locator('label.version', { hasText: /^3\.13-torch2\.6-cuda12\.4/ });
    await cudaRow.locator('.tag-cuda', { hasText: /^CUDA 12\.4$/ }).waitFor({ timeout: WAIT });
    const cpu = dlg.getByRole('spinbutton', { name: 'CPU' });
    const mem = dlg.getByRole('spinbutton', { name: 'Memory' });
    if (await cpu.getAttribute('min') !== '1') throw new Error(`CPU starts at ${await cpu.getAttribute('min')}, not the image's 1`);
    if (await mem.getAttribute('min') !== '1') throw new Error(`Memory starts at ${await mem.getAttribute('min')}, not the image's 1 GiB`);
    await dlg.getByLabel('Name').fill('torch');
    await dlg.getByRole('spinbutton', { name: 'GPU' }).fill('0');
    await dlg.getByRole('spinbutton', { name: 'Sessions' }).fill('1');
    // The whole dialog in the picture (docs/user-guide.md).
    await page.setViewportSize({ width: 1280, height: 900 });
    await dlg.locator('.estimate.fits, .estimate.waits').waitFor({ timeout: WAIT });
    await dlg.locator('.launch-body').evaluate((b) => { b.scrollTop = 0; });
    await page.evaluate(() => document.activeElement?.blur?.());
    await shot(page, 'launch_environment_version');
    await page.setViewportSize({ width: 1100, height: 640 });
    await reviewAndLaunch(dlg);
    await dlg.waitFor({ state: 'hidden', timeout: WAIT });
    const srow = page.locator('tr[data-session="torch"]');
    await srow.locator('.status', { hasText: 'RUNNING' }).waitFor({ timeout: WAIT });
    const rowText = await srow.textContent();
    if (!rowText.includes(ML_IMAGE)) throw new Error(`the session row does not name ${ML_IMAGE}: ${rowText}`);
  });

  let privateRef;
  await step('"Convert to image" commits a RUNNING session into a private image and says when it is ready', async () => {
    const row = page.locator('tr[data-session]').filter({ hasText: IMAGE }).filter({ hasText: 'RUNNING' }).first();
    const source = await row.getAttribute('data-session');
    await row.getByRole('button', { name: `Convert ${source} to image` }).click();
    const dlg = page.getByRole('dialog', { name: 'Convert to image' });
    await dlg.waitFor();
    // The CLI's defaults: the session's name (the manager puts it under the
    // owner's name space), the UTC time.
    const name = await dlg.getByLabel('Image name').inputValue();
    if (name !== source) throw new Error(`the default image name is '${name}'`);
    const tag = await dlg.getByLabel('Tag').inputValue();
    if (!/^\d{8}-\d{6}$/.test(tag)) throw new Error(`the default tag '${tag}' is not YYYYMMDD-HHMMSS`);
    await shot(page, 'session_convert_dialog');
    await dlg.getByRole('button', { name: 'Convert' }).click();
    // committing, then ready (a failure shows its reason in an alert).
    const ready = dlg.locator('.commit-state.ready');
    const failed = dlg.getByRole('alert');
    await ready.or(failed).first().waitFor({ timeout: 240000 });
    if (await failed.count()) throw new Error(`the dialog says: ${await failed.first().textContent()}`);
    privateRef = (await dlg.locator('code.image-ref').textContent()).trim();
    console.log(`# image ${privateRef}`);   // removed by test_ui.sh
    // Under the owner's own name space: tessera-private/<local part>-<12 hex of the id>/.
    if (!new RegExp(`^tessera-private/admin-[0-9a-f]{12}/${name}:${tag}$`).test(privateRef))
      throw new Error(`the dialog names '${privateRef}', not tessera-private/admin-<id>/${name}:${tag}`);
    await shot(page, 'session_converted');
    await dlg.getByRole('button', { name: 'Close' }).click();
    await dlg.waitFor({ state: 'hidden' });
  });

  await step('a session launched from the private image typed in the launch dialog runs', async () => {
    await page.getByRole('button', { name: 'Start' }).click();
    const dlg = page.getByRole('dialog', { name: 'Start a session' });
    await dlg.waitFor();
    await dlg.getByLabel('Image', { exact: true }).fill(privateRef);
    await dlg.getByLabel('Name').fill('restored');
    await dlg.getByRole('spinbutton', { name: 'CPU' }).fill('0.25');
    await dlg.getByRole('spinbutton', { name: 'Memory' }).fill('0.25');
    await dlg.getByRole('spinbutton', { name: 'GPU' }).fill('0');
    await dlg.getByRole('spinbutton', { name: 'Sessions' }).fill('1');
    await reviewAndLaunch(dlg);
    await dlg.waitFor({ state: 'hidden', timeout: WAIT });
    const srow = page.locator('tr[data-session="restored"]');
    await srow.locator('.status', { hasText: 'RUNNING' }).waitFor({ timeout: WAIT });
    const rowText = await srow.textContent();
    if (!rowText.includes(privateRef)) throw new Error(`the session row does not name ${privateRef}: ${rowText}`);
  });

  await step('the nodes page shows per-GPU fGPU usage; the admin page creates a user', async () => {
    await page.getByRole('link', { name: 'Nodes' }).click();
    const gpu = page.locator('article.node [data-gpu="0"]');
    await gpu.waitFor({ timeout: WAIT });
    await page.waitForFunction(() => document.querySelector('article.node [data-gpu="0"]')?.textContent.includes('2 fGPU of 2 fGPU allocated'),
      null, { timeout: WAIT }).catch(async () => {
      throw new Error(`GPU 0 shows: ${await gpu.textContent()}`);
    });
    await shot(page, 'admin_nodes');
    await page.getByRole('link', { name: 'Admin' }).click();
    const form = page.getByRole('form', { name: 'Create a user' });
    await form.getByLabel('Email').fill('bob@example.org');
    await form.getByLabel('Password').fill('bob-password-1');
    await form.getByRole('button', { name: 'Create user' }).click();
    await page.getByRole('cell', { name: 'bob@example.org' }).waitFor({ timeout: WAIT });
    await shot(page, 'admin_users');
  });

  await step('the admin page removes a user after asking, and refuses the admin\'s own account in words', async () => {
    const form = page.getByRole('form', { name: 'Create a user' });
    await form.getByLabel('Email').fill('carol@example.org');
    await form.getByLabel('Password').fill('carol-password-1');
    await form.getByRole('button', { name: 'Create user' }).click();
    const carol = page.locator('table.users tr', { has: page.getByRole('cell', { name: 'carol@example.org' }) });
    await carol.waitFor({ timeout: WAIT });
    await carol.getByRole('button', { name: 'Remove…' }).click();
    const dlg = page.getByRole('dialog', { name: 'Remove carol@example.org?' });
    await dlg.waitFor();
    await dlg.getByRole('button', { name: 'Cancel' }).click();
    await dlg.waitFor({ state: 'hidden' });
    if (!(await carol.count())) throw new Error('Cancel removed carol');
    await carol.getByRole('button', { name: 'Remove…' }).click();
    await dlg.getByRole('button', { name: 'Remove user' }).click();
    await page.getByRole('status').filter({ hasText: 'Removed carol@example.org: 1 API key revoked, 0 ended sessions kept.' }).waitFor({ timeout: WAIT });
    await carol.waitFor({ state: 'detached', timeout: WAIT });
    const me = page.locator('table.users tr', { has: page.getByRole('cell', { name: 'admin@tessera.local' }) });
    await me.getByRole('button', { name: 'Remove…' }).click();
    await page.getByRole('dialog', { name: 'Remove admin@tessera.local?' }).getByRole('button', { name: 'Remove user' }).click();
    const err = page.locator('p.error[role="alert"]');
    await err.waitFor({ timeout: WAIT });
    const text = await err.textContent();
    if (!/own/.test(text)) throw new Error(`removing one's own account says: ${text}`);
    await me.waitFor();
  });

  await step('a second user sees none of the admin\'s sessions', async () => {
    await page.getByRole('button', { name: 'Log out' }).click();
    await login(page, 'bob@example.org', 'bob-password-1');
    await page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: WAIT });
    await page.getByText('No sessions.').waitFor({ timeout: WAIT });
    const n = await page.locator('tr[data-session]').count();
    if (n !== 0) throw new Error(`bob sees ${n} sessions`);
    if (await page.getByRole('link', { name: 'Admin' }).count()) throw new Error('bob sees the Admin page link');
  });
} catch {
  // reported by step()
} finally {
  await ctx.close();
}
console.log('# done');
process.exit(failed ? 1 : 0);
