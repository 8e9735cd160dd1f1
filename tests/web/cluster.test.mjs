// The browser half of test_cluster_ui.sh. Prints "ok ..." / "FAIL ..."
// lines and "# done" at the end; the shell side counts them. Waits are on
// states reached (rows, words), never on how fast.
import { createRequire } from 'node:module';
import { mkdirSync } from 'node:fs';
import path from 'node:path';

const env = (k) => { if (!process.env[k]) throw new Error(`${k} is not set`); return process.env[k]; };
const require = createRequire(path.join(env('UI_SRC'), 'package.json'));
const { chromium } = require('playwright-core');

const WEB = env('WEB_URL'), EMAIL = env('ADMIN_EMAIL'), PASSWORD = env('ADMIN_PASSWORD');
const IMAGE = env('IMAGE'), SHOTS = env('SHOTS'), NODE = env('NODE_ID');
mkdirSync(SHOTS, { recursive: true });
const WAIT = 60000;
// The launch dialog's Review, then Launch on its review step (the
// launcher shows what it will ask for before it does).
const reviewAndLaunch = async (dlg) => {
  await dlg.getByRole('button', { name: 'Review', exact: true }).click();
  await dlg.getByRole('button', { name: 'Launch', exact: true }).click();
};
const WIDE = { width: 1280, height: 900 };

let failed = 0;
async function step(name, fn) {
  try {
    await fn();
    console.log(`ok ${name}`);
    return true;
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${String(e.message).split('\n')[0]}`);
    return false;
  }
}
async function shots(page, name, schemes = ['light', 'dark']) {
  await page.evaluate(() => { document.activeElement?.blur?.(); if (!document.querySelector('dialog[open]')) scrollTo(0, 0); });
  for (const scheme of schemes) {
    await page.emulateMedia({ colorScheme: scheme });
    await page.waitForTimeout(300);   // repainted in the new colours
    await page.screenshot({ path: path.join(SHOTS, `${name}-${scheme}.png`), fullPage: true });
  }
  await page.emulateMedia({ colorScheme: 'light' });
}
async function closeDialogs(page) {
  if (await page.locator('dialog[open]').count()) {
    await page.keyboard.press('Escape');
    await page.locator('dialog[open]').waitFor({ state: 'detached', timeout: WAIT });
  }
}
async function openLaunch(page) {
  await closeDialogs(page);
  await page.getByRole('button', { name: 'Start' }).click();
  const dlg = page.getByRole('dialog', { name: 'Start a session' });
  await dlg.waitFor();
  return dlg;
}
// The text under a field: its error, said next to it while it is wrong.
// (The inner locator of `has` is relative to each .field: a page's.)
const fieldError = (page, dlg, label) => dlg.locator('.field', { has: page.getByLabel(label, { exact: true }) }).locator('.field-error');
// The form's button: Review (Launch is on the review step).
const launchButton = (dlg) => dlg.getByRole('button', { name: 'Review', exact: true });

const launchOpts = {
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  viewport: WIDE,
};
const ctx = await chromium.launchPersistentContext(env('PROFILE_DIR'), launchOpts);
try {
  const page = ctx.pages()[0] ?? await ctx.newPage();
  await page.goto(WEB);
  await page.getByLabel('Email').fill(EMAIL);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: WAIT });

  // ---- The launch dialog. ----
  let dlg;
  await step('the launch dialog has Containers at 1 and no Placement', async () => {
    dlg = await openLaunch(page);
    const n = dlg.getByRole('spinbutton', { name: 'Containers' });
    if (await n.inputValue() !== '1') throw new Error(`Containers starts at ${await n.inputValue()}`);
    if (await dlg.getByRole('group', { name: 'Placement' }).count()) throw new Error('Placement is offered for one container');
  });

  await step('17 containers are refused under the field, with Launch off', async () => {
    await dlg.getByLabel('Image', { exact: true }).fill(IMAGE);
    await dlg.getByRole('spinbutton', { name: 'Containers' }).fill('17');
    await fieldError(page, dlg, 'Containers').filter({ hasText: 'from 1 to 16' }).waitFor({ timeout: WAIT });
    if (!await launchButton(dlg).isDisabled()) throw new Error('Launch is on with 17 containers');
  });

  await step('with 2 containers, Placement is offered (single node first) and the resources are per container', async () => {
    await dlg.getByRole('spinbutton', { name: 'Containers' }).fill('2');
    const placement = dlg.getByRole('group', { name: 'Placement' });
    await placement.waitFor({ timeout: WAIT });
    if (!await placement.getByRole('radio', { name: 'Single node' }).isChecked()) throw new Error('single node is not the default');
    const hint = await dlg.locator('.field.slider', { has: page.getByRole('spinbutton', { name: 'CPU' }) }).locator('.hint').textContent();
    if (!hint.includes('Per container')) throw new Error(`the CPU's hint says ${hint}`);
    // Never preemptible, even as a batch session (whose default it is).
    await dlg.getByRole('radio', { name: 'Batch' }).check();
    const pre = dlg.getByRole('checkbox', { name: 'Preemptible' });
    if (await pre.isChecked() || !await pre.isDisabled()) throw new Error('a cluster session may be made preemptible');
    await dlg.getByRole('radio', { name: 'Interactive' }).check();
  });

  await step('2 containers of 2 fGPU on the one 2-fGPU node are refused, single-node and multi-node, saying why', async () => {
    await dlg.getByRole('spinbutton', { name: 'GPU' }).fill('2');
    await fieldError(page, dlg, 'Containers').filter({ hasText: 'must fit one node' }).waitFor({ timeout: WAIT });
    if (!await launchButton(dlg).isDisabled()) throw new Error('Launch is on');
    await shots(page, 'cluster_launch_refused', ['light']);
    await dlg.getByRole('group', { name: 'Placement' }).getByRole('radio', { name: 'Multi-node' }).check();
    await fieldError(page, dlg, 'Containers').filter({ hasText: 'room for 1 container' }).waitFor({ timeout: WAIT });
    await dlg.getByRole('group', { name: 'Placement' }).getByRole('radio', { name: 'Single node' }).check();
    await dlg.getByRole('spinbutton', { name: 'GPU' }).fill('0');
    await fieldError(page, dlg, 'Containers').waitFor({ state: 'detached', timeout: WAIT });
  });

  const launched = await step('a 2-container single-node session is launched: the foot says the total, the request names the cluster', async () => {
    await dlg.getByLabel('Name').fill('gang');
    await dlg.getByRole('spinbutton', { name: 'CPU' }).fill('0.25');
    await dlg.getByRole('spinbutton', { name: 'Memory' }).fill('0.25');
    await dlg.getByLabel('Startup command').fill('sleep 3600');
    const total = dlg.getByTestId('launch-total');
    await total.filter({ hasText: '2 containers × (0.25 CPU, 256 MiB) = 0.5 CPU, 512 MiB' }).waitFor({ timeout: WAIT })
      .catch(async () => { throw new Error(`the foot says ${await total.textContent().catch(() => 'nothing')}`); });
    // The manager's estimate of the gang (a dry run): the one node holds both.
    await dlg.locator('.estimate.fits, .estimate.waits').waitFor({ timeout: WAIT });
    const estimate = (await dlg.locator('.estimate').textContent()).trim();
    if (!estimate.startsWith('Fits now')) throw new Error(`the estimate says ${estimate}`);
    await shots(page, 'cluster_launch');
    const sent = page.waitForRequest((r) => r.method() === 'POST' && new URL(r.url()).pathname === '/api/v1/sessions' &&
      !new URL(r.url()).searchParams.has('dry_run'), { timeout: WAIT });
    await reviewAndLaunch(dlg);
    const body = (await sent).postDataJSON();
    if (body.cluster_size !== 2 || body.cluster_mode !== 'single-node') throw new Error(`the request was ${JSON.stringify(body)}`);
    // Closed, or the server's refusal shown in it.
    await Promise.race([dlg.waitFor({ state: 'hidden', timeout: WAIT }), dlg.getByRole('alert').first().waitFor({ timeout: WAIT })]);
    if (await dlg.isVisible()) throw new Error(`the dialog stayed open: ${(await dlg.getByRole('alert').allTextContents()).join(' | ')}`);
  });
  // Nothing to look at without it: the steps below would each wait in vain.
  if (!launched) throw new Error('no session was launched: its row and page are not checked');

  await step('its row says ×2 and RUNNING', async () => {
    const row = page.locator('tr[data-session="gang"]');
    await row.locator('.status', { hasText: 'RUNNING' }).waitFor({ timeout: WAIT });
    const badge = (await row.getByTestId('cluster-badge').textContent()).trim();
    if (badge !== '×2') throw new Error(`its badge says ${badge}`);
    if (await row.getByRole('button', { name: /Convert/ }).count()) throw new Error('a cluster session offers Convert to image');
  });

  // ---- Its page. ----
  await step('its page: RUNNING, 2 containers single-node, main1 and sub1 RUNNING on the node', async () => {
    await page.locator('tr[data-session="gang"] a.session-link').click();
    await page.getByRole('heading', { name: 'gang' }).waitFor({ timeout: WAIT });
    await page.getByTestId('detail-status').filter({ hasText: 'RUNNING' }).waitFor({ timeout: WAIT });
    const cluster = (await page.getByTestId('detail-cluster').textContent()).trim();
    if (!cluster.startsWith('2 containers, single-node')) throw new Error(`its Cluster line says ${cluster}`);
    const table = page.getByTestId('containers');
    for (const name of ['main1', 'sub1']) {
      const row = table.locator(`tr[data-container="${name}"]`);
      await row.locator('.status', { hasText: 'RUNNING' }).waitFor({ timeout: WAIT })
        .catch(async () => { throw new Error(`${name}: ${(await row.textContent().catch(() => 'no row')) ?? ''}`); });
      const node = (await row.locator('td[data-label="Node"]').textContent()).trim();
      if (node !== NODE) throw new Error(`${name} is on ${node}, not ${NODE}`);
    }
    const names = await table.locator('tr[data-container]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-container')));
    if (names.join(',') !== 'main1,sub1') throw new Error(`the table lists ${names.join(', ')}`);
    await shots(page, 'cluster_session');
  });

  await step('the log\'s container picker starts at main1 and reads sub1\'s log with ?container=sub1', async () => {
    const logs = page.locator('section[aria-labelledby="logs-title"]');
    const picker = logs.getByRole('combobox', { name: 'Container' });
    if (await picker.inputValue() !== 'main1') throw new Error(`it starts at ${await picker.inputValue()}`);
    const answered = page.waitForResponse((r) => r.url().includes('/logs?') && new URL(r.url()).searchParams.get('container') === 'sub1',
      { timeout: WAIT });
    await picker.selectOption('sub1');
    const r = await answered;
    if (r.status() !== 200) throw new Error(`the log of sub1 answered ${r.status()}`);
  });

  await step('the app launcher offers a container picker; sub1\'s apps are listed with ?container=sub1, the terminal among them', async () => {
    await page.locator('.detail-actions').getByRole('button', { name: 'Apps' }).click();
    const apps = page.getByRole('dialog', { name: 'Apps of gang' });
    await apps.getByRole('button', { name: 'Terminal' }).waitFor({ timeout: WAIT });
    const picker = apps.getByRole('combobox', { name: 'Container' });
    if (await picker.inputValue() !== 'main1') throw new Error(`it starts at ${await picker.inputValue()}`);
    const answered = page.waitForResponse((r) => /\/apps\?/.test(r.url()) && new URL(r.url()).searchParams.get('container') === 'sub1',
      { timeout: WAIT });
    await picker.selectOption('sub1');
    const r = await answered;
    if (r.status() !== 200) throw new Error(`the apps of sub1 answered ${r.status()}`);
    await apps.getByRole('button', { name: 'Terminal' }).waitFor({ timeout: WAIT });
    await shots(page, 'cluster_apps', ['light']);
    await apps.getByRole('button', { name: 'Close' }).click();
    await apps.waitFor({ state: 'hidden', timeout: WAIT });
  });

  await step('at 400 pixels its page has no sideways scroll', async () => {
    await page.setViewportSize({ width: 400, height: 860 });
    try {
      await page.getByTestId('containers').waitFor({ timeout: WAIT });
      const r = await page.evaluate(() => ({ sw: document.documentElement.scrollWidth, iw: innerWidth }));
      if (r.sw > r.iw) throw new Error(`the page is ${r.sw} px wide in a ${r.iw} px window`);
      await shots(page, 'cluster_session_narrow', ['light']);
    } finally {
      await page.setViewportSize(WIDE);
    }
  });

  await step('terminated from its page', async () => {
    await page.locator('.detail-actions').getByRole('button', { name: 'Terminate' }).click();
    const end = page.getByRole('dialog', { name: 'Terminate session' });
    await end.getByRole('button', { name: 'Terminate' }).click();
    await end.waitFor({ state: 'hidden', timeout: WAIT });
  });
} catch (e) {
  failed++;
  console.log(`FAIL the browser test stopped: ${String(e.message).split('\n')[0]}`);
} finally {
  await ctx.close();
}
console.log('# done');
process.exit(failed ? 1 : 0);
