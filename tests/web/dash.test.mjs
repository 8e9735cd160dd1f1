// The browser half of test_dash_ui.sh: the admin dashboard, the About
// page and the announcement as the admin; the notifications tray, the
// announcement banner and the password change as a user. Prints
// "ok ..." / "FAIL ..." lines and "# done" at the end; the shell side
// counts them. Waits are on states reached (rows, words), never on how fast.
import { createRequire } from 'node:module';
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';

const env = (k) => { if (!process.env[k]) throw new Error(`${k} is not set`); return process.env[k]; };
const require = createRequire(path.join(env('UI_SRC'), 'package.json'));
const { chromium } = require('playwright-core');

const WEB = env('WEB_URL'), ADMIN_PASSWORD = env('ADMIN_PASSWORD'), EMAIL = env('USER_EMAIL');
const PASSWORD = env('USER_PASSWORD'), USER_CONF = env('USER_CONF'), IMAGE = env('TEST_IMAGE');
const NODE = env('NODE'), VERSION = env('VERSION'), SHOTS = env('SHOTS'), TESSERA = env('TESSERA_BIN');
const NEW_PASSWORD = 'erins second password';
const ANNOUNCEMENT = 'Maintenance on Friday 18:00-20:00: save your work';
mkdirSync(SHOTS, { recursive: true });
const WAIT = 60000;

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
const shot = (page, name) => page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
const asUser = (...args) => execFileSync(TESSERA, args, { encoding: 'utf8', env: { ...process.env, TESSERA_CONFIG: USER_CONF } });

async function login(page, email, password) {
  await page.goto(WEB);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: WAIT });
}
const nav = (page, name) => page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name, exact: true }).click();

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const admin = await (await browser.newContext({ viewport: { width: 1280, height: 800 }, colorScheme: 'light' })).newPage();
  const user = await (await browser.newContext({ viewport: { width: 1280, height: 800 }, colorScheme: 'light' })).newPage();

  await step('the admin\'s Dashboard shows the node\'s capacity, the GPU model, and the failed session with its reason', async () => {
    await login(admin, 'admin@tessera.local', ADMIN_PASSWORD);
    await nav(admin, 'Dashboard');
    await admin.getByRole('heading', { name: 'Dashboard', exact: true }).waitFor({ timeout: WAIT });
    const row = admin.locator(`table.dash-nodes tr[data-node="${NODE}"]`);
    await row.waitFor({ timeout: WAIT });
    await row.getByText('ALIVE').waitFor();
    // The half GPU the holder session has, of the node's 2 fGPU.
    await row.getByRole('meter', { name: `${NODE} fGPU` }).waitFor();
    const now = await row.getByRole('meter', { name: `${NODE} fGPU` }).getAttribute('aria-valuenow');
    if (now !== '0.5') throw new Error(`the node's fGPU meter says ${now}`);
    await admin.locator('table.dash-models tbody tr').first().waitFor();
    const fail = admin.locator('table.dash-failures tr', { hasText: 'broken' });
    await fail.waitFor({ timeout: WAIT });
    await fail.getByText('ERROR').waitFor();
    await fail.getByText('exit code 3').waitFor();
    if (await admin.locator('.dash-statuses li[data-status="ERROR"] strong').textContent() !== '1') throw new Error('ERROR count');
    await admin.locator('table.dash-users tr[data-user="admin@tessera.local"]').waitFor();
    await shot(admin, 'dashboard-light');
  });

  await step('the dashboard is live: a new session shows in the counts without a reload', async () => {
    const running = admin.locator('.dash-statuses li[data-status="RUNNING"] strong');
    const before = Number(await running.textContent());
    execFileSync(TESSERA, ['session', 'create', IMAGE, '--name', 'live-one', '--cpu', '0.25', '--mem', '64m',
      '--startup-command', 'sleep infinity', '--wait'], { encoding: 'utf8' });
    await admin.waitForFunction(([sel, want]) => document.querySelector(sel)?.textContent === want,
      ['.dash-statuses li[data-status="RUNNING"] strong', String(before + 1)], { timeout: WAIT });
  });

  await step('a user does not see the Dashboard in the nav, and the API refuses it', async () => {
    await login(user, EMAIL, PASSWORD);
    if (await user.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Dashboard' }).count())
      throw new Error('Dashboard in a user\'s nav');
    const st = await user.evaluate(async () => (await fetch('/api/v1/dashboard')).status);
    if (st !== 403) throw new Error(`GET /api/v1/dashboard as a user: ${st}`);
  });

  await step('a notification appears when the user\'s session starts', async () => {
    await user.locator('.tray[data-ready]').waitFor({ timeout: WAIT });
    asUser('session', 'create', IMAGE, '--name', 'erins-nb', '--cpu', '0.25', '--mem', '64m',
      '--startup-command', 'sleep infinity', '--wait');
    const bell = user.getByRole('button', { name: /^Notifications, [1-9]\d* unread$/ });
    await bell.waitFor({ timeout: WAIT });
    await bell.click();
    const panel = user.getByRole('region', { name: 'Notifications' });
    await panel.getByText('Session erins-nb started').waitFor({ timeout: WAIT });
    await shot(user, 'notifications_tray-light');
    // Read once opened; dismissed, it is gone (and stays gone after a reload).
    await user.getByRole('button', { name: 'Notifications, 0 unread' }).waitFor();
    await panel.getByRole('button', { name: 'Dismiss: Session erins-nb started' }).click();
    await panel.getByText('Session erins-nb started').waitFor({ state: 'detached' });
    await user.reload();
    await user.getByRole('button', { name: 'Notifications, 0 unread' }).click();
    await user.getByRole('region', { name: 'Notifications' }).getByText('Nothing yet').waitFor();
    await user.keyboard.press('Escape');
  });

  await step('the admin posts an announcement on the Dashboard; a too long one is refused in the server\'s words', async () => {
    const field = admin.getByLabel('New announcement');
    // maxlength stops typing at 500: the server's check is seen through the API.
    const st = await admin.evaluate(async () => {
      const csrf = (await (await fetch('/auth/me')).json()).csrf_token;
      const r = await fetch('/api/v1/config/announcement', { method: 'PUT', headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': csrf },
        body: JSON.stringify({ value: 'x'.repeat(501) }) });
      return `${r.status} ${(await r.json()).error?.message}`;
    });
    if (!st.startsWith('400') || !st.includes('at most 500')) throw new Error(`501 bytes: ${st}`);
    await field.fill(ANNOUNCEMENT);
    await admin.getByRole('button', { name: 'Post', exact: true }).click();
    await admin.getByRole('status').filter({ hasText: 'Posted' }).waitFor({ timeout: WAIT });
    await admin.getByRole('region', { name: 'Announcement', exact: true }).getByText(ANNOUNCEMENT).waitFor({ timeout: WAIT });
  });

  await step('the user sees the announcement on every page and dismisses it', async () => {
    await user.reload();
    const banner = user.getByRole('region', { name: 'Announcement', exact: true });
    await banner.getByText(ANNOUNCEMENT).waitFor({ timeout: WAIT });
    await nav(user, 'Data');
    await banner.getByText(ANNOUNCEMENT).waitFor({ timeout: WAIT });
    await shot(user, 'announcement-light');
    await banner.getByRole('button', { name: 'Dismiss the announcement' }).click();
    await banner.waitFor({ state: 'detached' });
    await user.reload();
    await user.getByRole('heading', { name: 'Data' }).first().waitFor({ timeout: WAIT });
    if (await user.getByRole('region', { name: 'Announcement', exact: true }).count()) throw new Error('back after a reload');
  });

  await step('an admin does not set their own password without the current one (PATCH /v1/users/{id} refused)', async () => {
    const r = await admin.evaluate(async () => {
      const me = await (await fetch('/auth/me')).json();
      const resp = await fetch(`/api/v1/users/${me.user.id}`, { method: 'PATCH',
        headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': me.csrf_token }, body: JSON.stringify({ password: 'no-old-one-1' }) });
      return `${resp.status} ${(await resp.json()).error?.message}`;
    });
    if (!r.startsWith('400') || !r.includes('old_password')) throw new Error(r);
  });

  await step('About shows the version and healthy components', async () => {
    await nav(admin, 'About');
    await admin.getByRole('heading', { name: 'About Tessera' }).waitFor({ timeout: WAIT });
    const v = await admin.getByTestId('version').textContent();
    if (v !== `tessera ${VERSION}`) throw new Error(`version ${v}`);
    for (const c of ['manager', 'store', 'agents', 'webserver'])
      await admin.locator(`tr[data-component="${c}"][data-health="up"]`).waitFor({ timeout: WAIT });
    await admin.getByText('All components answer').waitFor();
    await shot(admin, 'about-light');
  });

  await step('a user changes their password: a wrong current one is refused, then logs in with the new one', async () => {
    await nav(user, 'Credentials');
    const form = user.getByRole('form', { name: 'Password' });
    await form.getByLabel('Current password').fill('not my password');
    await form.getByLabel('New password', { exact: true }).fill(NEW_PASSWORD);
    await form.getByLabel('New password again').fill(NEW_PASSWORD);
    await form.getByRole('button', { name: 'Change password' }).click();
    await form.getByRole('alert').getByText('your current password is wrong').waitFor({ timeout: WAIT });
    await form.getByLabel('Current password').fill(PASSWORD);
    await form.getByRole('button', { name: 'Change password' }).click();
    await form.getByRole('status').getByText('Your password was changed').waitFor({ timeout: WAIT });
    await user.getByRole('button', { name: 'Log out' }).click();
    await user.getByLabel('Email').fill(EMAIL);
    await user.getByLabel('Password').fill(PASSWORD);
    await user.getByRole('button', { name: 'Log in' }).click();
    await user.getByRole('alert').waitFor({ timeout: WAIT });
    await login(user, EMAIL, NEW_PASSWORD);
  });

  await step('a key is rotated on the Credentials page: the new secret shown once, the old key gone', async () => {
    await nav(user, 'Credentials');
    await user.getByLabel('Label').fill('laptop');
    await user.getByRole('button', { name: 'Create key' }).click();
    const made = user.getByRole('dialog', { name: 'New API key' });
    const old = await made.locator('code[data-field="access_key"]').textContent();
    await made.getByRole('button', { name: 'Done' }).click();
    await user.getByRole('button', { name: `Rotate ${old}` }).click();
    await user.getByRole('dialog', { name: 'Rotate API key' }).getByRole('button', { name: 'Rotate' }).click();
    const dlg = user.getByRole('dialog', { name: 'New API key' });
    await dlg.waitFor({ timeout: WAIT });
    const now = await dlg.locator('code[data-field="access_key"]').textContent();
    if (!now || now === old || !/^[0-9a-f]{40}$/.test(await dlg.locator('code[data-field="secret_key"]').textContent() ?? ''))
      throw new Error(`rotated to ${now}`);
    await dlg.getByRole('button', { name: 'Done' }).click();
    await user.locator(`tr[data-key="${now}"]`, { hasText: 'laptop' }).waitFor({ timeout: WAIT });
    await user.locator(`tr[data-key="${old}"]`).waitFor({ state: 'detached', timeout: WAIT });
    // The main key has no Rotate: revoking replaces it.
    if (await user.locator('table.keys tr', { has: user.locator('.main-key') }).getByRole('button', { name: /^Rotate/ }).count())
      throw new Error('Rotate on the main key');
    await shot(user, 'credentials_rotate_password-light');
  });

  await step('at 400 pixels the dashboard and About scroll no page sideways', async () => {
    await admin.setViewportSize({ width: 400, height: 800 });
    for (const p of ['Dashboard', 'About']) {
      await nav(admin, p);
      await admin.getByRole('heading', { name: p === 'About' ? 'About Tessera' : 'Dashboard', exact: true }).waitFor({ timeout: WAIT });
      const wide = await admin.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
      if (wide > 1) throw new Error(`${p}: ${wide} px sideways`);
    }
    await nav(admin, 'Dashboard');
    await admin.locator('table.dash-failures').waitFor({ timeout: WAIT });
  });
} catch {
  // the failing step has said why
} finally {
  await browser.close();
}
if (!failed) console.log('# done');
