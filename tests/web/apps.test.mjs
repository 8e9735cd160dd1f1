// The browser half of test_apps_ui.sh. Prints "ok ..." / "FAIL ..." lines
// and "# done" at the end; the shell side counts them. Waits are on states
// reached (rows, words on the screen), never on how fast.
import { createRequire } from 'node:module';
import { mkdirSync } from 'node:fs';
import path from 'node:path';

const env = (k) => { if (!process.env[k]) throw new Error(`${k} is not set`); return process.env[k]; };
const require = createRequire(path.join(env('UI_SRC'), 'package.json'));
const { chromium } = require('playwright-core');

const WEB = env('WEB_URL'), EMAIL = env('ADMIN_EMAIL'), PASSWORD = env('ADMIN_PASSWORD');
const IMAGE = env('IMAGE'), SHOTS = env('SHOTS');
mkdirSync(SHOTS, { recursive: true });
const WAIT = 60000;
// The launch dialog's Review, then Launch on its review step (the
// launcher shows what it will ask for before it does).
const reviewAndLaunch = async (dlg) => {
  await dlg.getByRole('button', { name: 'Review', exact: true }).click();
  await dlg.getByRole('button', { name: 'Launch', exact: true }).click();
};
// Jupyter starts on first use: the proxy's "starting" page refreshes itself until it answers.
const APP_WAIT = 180000;
const SESSION = 'apps';

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

const ctx = await chromium.launchPersistentContext(env('PROFILE_DIR'), {
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  viewport: { width: 1100, height: 640 },
});

// Clicks an app's button in the launcher; returns the tab it opened, once
// that tab left about:blank for the app's origin.
async function openApp(page, label) {
  const dlg = page.getByRole('dialog', { name: `Apps of ${SESSION}` });
  const [tab] = await Promise.all([
    ctx.waitForEvent('page', { timeout: WAIT }),
    dlg.getByRole('button', { name: label, exact: true }).click(),
  ]);
  await tab.waitForURL((u) => u.protocol === 'http:' || u.protocol === 'https:', { timeout: WAIT });
  const err = dlg.getByRole('alert');
  if (await err.count()) throw new Error(`the launcher says: ${await err.first().textContent()}`);
  return tab;
}

try {
  const page = ctx.pages()[0] ?? await ctx.newPage();

  await step('the admin logs in', async () => {
    await page.goto(WEB);
    await page.getByLabel('Email').fill(EMAIL);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: WAIT });
  });

  await step(`a session of ${IMAGE} runs`, async () => {
    await page.getByRole('button', { name: 'Start' }).click();
    const dlg = page.getByRole('dialog', { name: 'Start a session' });
    await dlg.waitFor();
    await dlg.getByLabel('Image', { exact: true }).fill(IMAGE);
    await dlg.getByLabel('Name').fill(SESSION);
    await dlg.getByRole('spinbutton', { name: 'Sessions' }).fill('1');
    await reviewAndLaunch(dlg);
    await dlg.waitFor({ state: 'hidden', timeout: WAIT });
    await page.locator(`tr[data-session="${SESSION}"] .status`, { hasText: 'RUNNING' }).waitFor({ timeout: WAIT });
  });

  await step('its row shows its apps: Terminal and Jupyter Notebook', async () => {
    const chips = page.locator(`tr[data-session="${SESSION}"] ul.app-chips`);
    try {
      await chips.getByText('Terminal', { exact: true }).waitFor({ timeout: WAIT });
      await chips.getByText('Jupyter Notebook', { exact: true }).waitFor({ timeout: WAIT });
    } catch (e) {
      // Say what the API answers, not only that the chips did not come.
      const id = await page.evaluate(async (name) => {
        const r = await fetch('/api/v1/sessions', { headers: { Accept: 'application/json' } });
        return (await r.json()).sessions.find((s) => s.name === name)?.id;
      }, SESSION);
      const got = await page.evaluate(async (id) => {
        const r = await fetch(`/api/v1/sessions/${id}/apps`, { headers: { Accept: 'application/json' } });
        return `HTTP ${r.status} ${(await r.text()).slice(0, 200)}`;
      }, id);
      throw new Error(`no Terminal and Jupyter Notebook chips; GET /v1/sessions/${id}/apps answers ${got}`);
    }
  });

  await step('the app launcher has a button per app and an "Open port" field', async () => {
    await page.locator(`tr[data-session="${SESSION}"]`).getByRole('button', { name: `Apps of ${SESSION}` }).click();
    const dlg = page.getByRole('dialog', { name: `Apps of ${SESSION}` });
    await dlg.waitFor();
    await dlg.getByRole('button', { name: 'Terminal', exact: true }).waitFor({ timeout: WAIT });
    await dlg.getByRole('button', { name: 'Jupyter Notebook', exact: true }).waitFor({ timeout: WAIT });
    await dlg.getByRole('spinbutton', { name: 'Open port' }).waitFor();
    // The focus is on the first app, not on "Open port" (the first field
    // there while the apps loaded).
    await page.waitForFunction(() => document.activeElement?.classList.contains('app-button'), null, { timeout: WAIT })
      .catch(async () => { throw new Error(`the focus is on ${await page.evaluate(() => document.activeElement?.outerHTML.slice(0, 80))}`); });
    await shot(page, 'app_launcher');
  });

  await step('the SSH / SFTP tile opens no tab: it shows the commands that connect', async () => {
    const dlg = page.getByRole('dialog', { name: `Apps of ${SESSION}` });
    const pages = ctx.pages().length;
    await dlg.getByRole('button', { name: 'SSH / SFTP', exact: true }).click();
    await dlg.locator('.ssh-help').getByText(`tessera session ssh-config ${SESSION}`).waitFor({ timeout: WAIT });
    await shot(page, 'app_launcher_ssh');
    if (ctx.pages().length !== pages) throw new Error('a tab was opened for sshd');
  });

  await step('Terminal opens in a new tab, where echo hello-$TESSERA_SESSION_NAME prints the session\'s name', async () => {
    const tab = await openApp(page, 'Terminal');
    const rows = tab.locator('.xterm-rows');
    // A prompt: the shell wrote something.
    await tab.waitForFunction(() => (document.querySelector('.xterm-rows')?.textContent ?? '').trim().length > 0,
      null, { timeout: APP_WAIT });
    // Named after its session: every terminal tab was "Tessera terminal".
    if (await tab.title() !== `${SESSION} · Tessera terminal`) throw new Error(`the tab's title is '${await tab.title()}'`);
    await tab.locator('.xterm').click();
    await tab.keyboard.type('echo hello-$TESSERA_SESSION_NAME');
    await tab.keyboard.press('Enter');
    // The command line shows the variable's name; only its output has the value.
    await tab.waitForFunction((want) => (document.querySelector('.xterm-rows')?.textContent ?? '').includes(want),
      `hello-${SESSION}`, { timeout: WAIT });
    await rows.waitFor();
    await shot(tab, 'app_terminal');
    await tab.close();
  });

  await step('Jupyter Notebook opens in a new tab; a new Python 3 notebook prints sys.version 3.11', async () => {
    await page.bringToFront();
    const tab = await openApp(page, 'Jupyter Notebook');
    // Notebook 6.4's tree page (after the proxy's "starting" page, if any).
    const newButton = tab.locator('#new-dropdown-button');
    await newButton.waitFor({ timeout: APP_WAIT });
    await newButton.click();
    const kernel = tab.locator('#new-menu li[id^="kernel-"] a', { hasText: /Python 3/ }).first();
    await kernel.waitFor({ timeout: WAIT });
    // The notebook opens in a tab of its own (or in this one).
    const opened = ctx.waitForEvent('page', { timeout: 15000 }).catch(() => null);
    await kernel.click();
    const nb = (await opened) ?? tab;
    await nb.waitForURL(/\/notebooks\//, { timeout: WAIT });
    await nb.locator('#kernel_indicator_icon.kernel_idle_icon').waitFor({ timeout: APP_WAIT });
    const cell = nb.locator('.cell.code_cell').first();
    await cell.locator('.CodeMirror').click();
    await nb.keyboard.type('import sys; print(sys.version)');
    await nb.keyboard.press('Shift+Enter');
    const out = cell.locator('.output_subarea');
    await out.filter({ hasText: /^\s*3\.11/ }).waitFor({ timeout: WAIT });
    await shot(nb, 'app_jupyter');
    if (nb !== tab) await nb.close();
    await tab.close();
  });
} catch {
  // reported by step()
} finally {
  await ctx.close();
}
console.log('# done');
process.exit(failed ? 1 : 0);
