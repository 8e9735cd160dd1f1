// The browser half of test_launcher_ui.sh: the full launcher as an admin.
// Prints "ok ..." / "FAIL ..." lines and "# done" at the end; the shell
// side counts them. Waits are on states reached (buttons, rows, words),
// never on how fast.
import { createRequire } from 'node:module';
import { mkdirSync } from 'node:fs';
import path from 'node:path';

const env = (k) => { if (!process.env[k]) throw new Error(`${k} is not set`); return process.env[k]; };
const require = createRequire(path.join(env('UI_SRC'), 'package.json'));
const { chromium } = require('playwright-core');

const WEB = env('WEB_URL'), EMAIL = env('ADMIN_EMAIL'), PASSWORD = env('ADMIN_PASSWORD');
const DEMO = env('DEMO'), SHOTS = env('SHOTS');
mkdirSync(SHOTS, { recursive: true });
const WAIT = 60000;
const WIDE = { width: 1280, height: 900 };

let failed = 0;
async function step(name, fn) {
  try {
    await fn();
    console.log(`ok ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${String(e.message).split('\n')[0]}`);
  }
}
async function shot(page, name) {
  await page.evaluate(() => document.activeElement?.blur?.());
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`) });
}
const apiGet = (page, url) => page.evaluate(async (url) => {
  const r = await fetch(url, { credentials: 'same-origin' });
  return { status: r.status, body: await r.json().catch(() => null) };
}, url);
async function openLaunch(page) {
  if (await page.locator('dialog[open]').count()) {
    await page.keyboard.press('Escape');
    await page.locator('dialog[open]').waitFor({ state: 'detached', timeout: WAIT });
  }
  if (!new URL(page.url()).pathname.startsWith('/sessions') || new URL(page.url()).pathname !== '/sessions') {
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Sessions' }).click();
    await page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: WAIT });
  }
  await page.getByRole('button', { name: 'Start' }).click();
  const dlg = page.getByRole('dialog', { name: 'Start a session' });
  await dlg.waitFor();
  await dlg.getByRole('group', { name: 'Environment' }).waitFor({ timeout: WAIT });
  return dlg;
}
async function closeLaunch(dlg) {
  await dlg.getByRole('button', { name: 'Cancel', exact: true }).click();
  await dlg.waitFor({ state: 'hidden', timeout: WAIT });
}
const presetButtons = (dlg) => dlg.getByRole('group', { name: 'Presets' }).getByRole('button');
// The button is whole inside a w x h window and on top there.
async function inSight(btn, w, h, what) {
  const box = await btn.boundingBox();
  if (!box || box.y < 0 || box.x < 0 || box.y + box.height > h || box.x + box.width > w)
    throw new Error(`${what} is at ${JSON.stringify(box)} in a ${w}x${h} window`);
  const hit = await btn.evaluate((b) => {
    const r = b.getBoundingClientRect();
    const e = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    return !!e && (e === b || b.contains(e));
  });
  if (!hit) throw new Error(`${what} is covered or clipped`);
}

const ctx = await chromium.launchPersistentContext(env('PROFILE_DIR'), {
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  viewport: WIDE,
});
try {
  const page = ctx.pages()[0] ?? await ctx.newPage();
  await page.goto(WEB);
  await page.getByLabel('Email').fill(EMAIL);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: WAIT });

  await step('the launcher\'s presets are the API\'s: Small, Medium and One GPU on a new install', async () => {
    const dlg = await openLaunch(page);
    await presetButtons(dlg).first().waitFor({ timeout: WAIT });
    const names = await dlg.locator('fieldset.presets:not(.recent) .preset-name').allTextContents();
    if (names.join('|') !== 'Small|Medium|One GPU') throw new Error(`the presets are ${names.join(', ')}`);
    const api = await apiGet(page, '/api/v1/presets');
    if (api.status !== 200 || api.body.presets.map((p) => p.name).join('|') !== names.join('|'))
      throw new Error(`GET /v1/presets answered ${api.status}: ${JSON.stringify(api.body)}`);
    const small = presetButtons(dlg).filter({ hasText: 'Small' });
    await small.click();
    if (await small.getAttribute('aria-pressed') !== 'true') throw new Error('Small is not shown as chosen once clicked');
    const cpu = await dlg.getByRole('spinbutton', { name: 'CPU' }).inputValue();
    if (cpu !== '1') throw new Error(`CPU shows ${cpu} after Small (1 CPU)`);
    await closeLaunch(dlg);
  });

  await step('an admin makes a preset on the Admin page, and removes another after a confirmation', async () => {
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Admin' }).click();
    const sec = page.locator('section', { has: page.getByRole('heading', { name: 'Resource presets' }) });
    await sec.locator('table.presets-table tbody tr').first().waitFor({ timeout: WAIT });
    const form = sec.getByRole('form', { name: 'Create a preset' });
    for (const [name, cpu, mem] of [['Browser big', '2', '1'], ['Scratch', '0.5', '0.5']]) {
      await form.getByLabel('Name').fill(name);
      await form.getByLabel('CPU').fill(cpu);
      await form.getByLabel('Memory (GiB)').fill(mem);
      await form.getByRole('button', { name: 'Create preset' }).click();
      await sec.locator('tr', { hasText: name }).waitFor({ timeout: WAIT });
    }
    // A bad value: the server's words, by the form.
    await form.getByLabel('Name').fill('Broken');
    await form.getByLabel('CPU').fill('0');
    await form.getByLabel('Memory (GiB)').fill('1');
    await form.getByRole('button', { name: 'Create preset' }).click();
    await form.getByRole('alert').filter({ hasText: 'resources.cpu must be 0.01 to 1024' }).waitFor({ timeout: WAIT });
    await sec.getByRole('button', { name: 'Remove preset Scratch' }).click();
    const confirm = page.getByRole('dialog', { name: 'Remove preset' });
    await confirm.getByText('Scratch').first().waitFor();
    await confirm.getByRole('button', { name: 'Remove preset' }).click();
    await sec.locator('tr', { hasText: 'Scratch' }).waitFor({ state: 'detached', timeout: WAIT });
    await form.getByLabel('Name').fill('');
    await form.getByLabel('CPU').fill('');
    await form.getByLabel('Memory (GiB)').fill('');
    if (await form.getByRole('alert').count()) throw new Error('the refusal stays once the fields are changed');
    await sec.scrollIntoViewIfNeeded();
    await page.evaluate(() => document.activeElement?.blur?.());
    await page.screenshot({ path: path.join(SHOTS, 'admin_presets.png'), clip: await sec.boundingBox() ?? undefined });
  });

  await step('the new preset appears in the launcher and sets CPU and memory', async () => {
    const dlg = await openLaunch(page);
    const big = presetButtons(dlg).filter({ hasText: 'Browser big' });
    await big.waitFor({ timeout: WAIT });
    if (await presetButtons(dlg).filter({ hasText: 'Scratch' }).count()) throw new Error('the removed preset is offered');
    await big.click();
    const cpu = await dlg.getByRole('spinbutton', { name: 'CPU' }).inputValue();
    const mem = await dlg.getByRole('spinbutton', { name: 'Memory' }).inputValue();
    if (cpu !== '2' || mem !== '1') throw new Error(`CPU ${cpu}, memory ${mem} after Browser big (2 CPU, 1 GiB)`);
    await closeLaunch(dlg);
  });

  await step('a batch session with a command, environment, timeout and a preopen port: the review shows every value', async () => {
    await page.setViewportSize({ width: 1280, height: 800 });
    const dlg = await openLaunch(page);
    await dlg.locator('label.env', { hasText: 'Launcher demo' }).click();
    await presetButtons(dlg).filter({ hasText: 'Small' }).click();
    await dlg.getByLabel('Name').fill('envjob');
    await dlg.getByRole('radio', { name: 'Batch' }).check();
    await dlg.getByLabel('Startup command').fill('echo "greeting=$GREETING"; exit 3');
    await dlg.getByLabel('Timeout (minutes)').fill('10');
    await dlg.getByLabel('Environment variables').fill('GREETING=hello-env\nBAD NAME=x');
    await dlg.locator('.field-error', { hasText: 'Line 2' }).waitFor({ timeout: WAIT });
    if (!await dlg.getByRole('button', { name: 'Review', exact: true }).isDisabled()) throw new Error('Review is on with a bad variable name');
    await dlg.getByLabel('Environment variables').fill('GREETING=hello-env');
    await dlg.getByLabel('Preopen ports').fill('8080');
    await dlg.locator('.estimate.fits, .estimate.waits').waitFor({ timeout: WAIT });
    await dlg.getByRole('button', { name: 'Review', exact: true }).click();
    const review = dlg.locator('[data-testid="review"]');
    await review.waitFor({ timeout: WAIT });
    const text = await review.textContent();
    for (const want of [DEMO, 'envjob', 'batch', 'echo "greeting=$GREETING"; exit 3', 'GREETING=hello-env', '10 min', '8080', '1 CPU'])
      if (!text.includes(want)) throw new Error(`the review lacks '${want}': ${text.slice(0, 300)}`);
    if (await dlg.getByRole('spinbutton', { name: 'CPU' }).isVisible()) throw new Error('the form is still shown beside the review');
    await inSight(dlg.getByRole('button', { name: 'Launch', exact: true }), 1280, 800, 'Launch on the review step');
    await shot(page, 'launch_review');
    // Back keeps every value; Review again, then Launch.
    await dlg.getByRole('button', { name: 'Back', exact: true }).click();
    if (await dlg.getByLabel('Environment variables').inputValue() !== 'GREETING=hello-env') throw new Error('Back lost the variables');
    await dlg.getByRole('button', { name: 'Review', exact: true }).click();
    await dlg.getByRole('button', { name: 'Launch', exact: true }).click();
    await dlg.waitFor({ state: 'hidden', timeout: WAIT });
    await page.setViewportSize(WIDE);
  });

  await step('it runs its command with the variable, and its exit code shows on its page', async () => {
    let s = null;
    for (let i = 0; i < 300; i++) {
      const r = await apiGet(page, '/api/v1/sessions/envjob');
      s = r.body;
      if (s && ['ERROR', 'TERMINATED'].includes(s.status)) break;
      await page.waitForTimeout(200);
    }
    if (!s || s.status !== 'ERROR' || s.exit_code !== 3) throw new Error(`envjob is ${s?.status}, exit code ${s?.exit_code}`);
    if (s.env?.GREETING !== 'hello-env' || s.batch_timeout !== 600 || JSON.stringify(s.preopen_ports) !== '[8080]')
      throw new Error(`envjob was made with ${JSON.stringify({ env: s.env, t: s.batch_timeout, p: s.preopen_ports })}`);
    const logs = await page.evaluate(async () => (await fetch('/api/v1/sessions/envjob/logs', { credentials: 'same-origin' })).text());
    if (!logs.includes('greeting=hello-env')) throw new Error(`its log: ${logs.slice(0, 200)}`);
    await page.goto(new URL(`/sessions/${encodeURIComponent(s.id)}`, WEB).href);
    const dt = page.locator('dt', { hasText: /^Exit code$/ });
    await dt.waitFor({ timeout: WAIT });
    const code = await dt.locator('xpath=following-sibling::dd[1]').textContent();
    if (code.trim() !== '3') throw new Error(`the page says exit code ${code}`);
  });

  await step('after a launch the Sessions count is 1, and a recent session re-launches into the form', async () => {
    const dlg = await openLaunch(page);
    const n = await dlg.getByRole('spinbutton', { name: 'Sessions' }).inputValue();
    if (n !== '1') throw new Error(`Sessions shows ${n}`);
    if (await dlg.getByLabel('Startup command').inputValue() !== '') throw new Error('the last command was kept unasked');
    const again = dlg.getByRole('button', { name: /^Re-launch envjob/ });
    await again.waitFor({ timeout: WAIT });
    await again.click();
    const checks = [
      ['Startup command', 'echo "greeting=$GREETING"; exit 3'],
      ['Environment variables', 'GREETING=hello-env'],
      ['Timeout (minutes)', '10'],
      ['Preopen ports', '8080'],
    ];
    for (const [label, want] of checks) {
      const v = await dlg.getByLabel(label).inputValue();
      if (v !== want) throw new Error(`${label} is '${v}', not '${want}'`);
    }
    if (!await dlg.getByRole('radio', { name: 'Batch' }).isChecked()) throw new Error('the type is not batch');
    if (!await dlg.locator('label.env.selected', { hasText: 'Launcher demo' }).count()) throw new Error('the environment is not chosen');
    const cpu = await dlg.getByRole('spinbutton', { name: 'CPU' }).inputValue();
    if (cpu !== '1') throw new Error(`CPU is ${cpu}, not envjob's 1`);
    if (await dlg.getByLabel('Name').inputValue() !== '') throw new Error('the name was copied');
    await dlg.locator('fieldset.recent').scrollIntoViewIfNeeded();
    await shot(page, 'launch_relaunch');
    await closeLaunch(dlg);
  });

  await step('at 1280x800 with folders listed, Review and Cancel stay in sight, whatever the body scrolls', async () => {
    await page.setViewportSize({ width: 1280, height: 800 });
    const dlg = await openLaunch(page);
    await dlg.getByText('launcher-folder-8').first().waitFor({ timeout: WAIT });
    for (const where of ['top', 'bottom']) {
      if (where === 'bottom') await dlg.evaluate((d) => d.querySelectorAll('*').forEach((e) => { if (e.scrollHeight > e.clientHeight) e.scrollTop = e.scrollHeight; }));
      for (const name of ['Review', 'Cancel'])
        await inSight(dlg.getByRole('button', { name, exact: true }), 1280, 800, `${name} (body at its ${where})`);
    }
    await closeLaunch(dlg);
    await page.setViewportSize(WIDE);
  });

  await step('a start time ahead is sent as starts_at, and the estimate says it waits for it', async () => {
    const dlg = await openLaunch(page);
    await dlg.locator('label.env', { hasText: 'Launcher demo' }).click();
    await dlg.getByRole('radio', { name: 'Batch' }).check();
    await dlg.getByLabel('Startup command').fill('true');
    const ahead = new Date(Date.now() + 2 * 3600e3);
    const p = (x) => String(x).padStart(2, '0');
    await dlg.getByLabel('Start at').fill(`${ahead.getFullYear()}-${p(ahead.getMonth() + 1)}-${p(ahead.getDate())}T${p(ahead.getHours())}:${p(ahead.getMinutes())}`);
    await dlg.locator('.estimate.waits', { hasText: 'waits for its start time' }).waitFor({ timeout: WAIT });
    await closeLaunch(dlg);
  });
} finally {
  console.log(failed ? `# ${failed} failed` : '# done');
  await ctx.close();
}
