// The browser half of test_history_ui.sh: the Sessions list's Finished
// switch, its pages and columns kept in the URL; a finished session's
// page; the Statistics page and its CSV download; a user who sees only
// their own. Prints "ok ..." / "FAIL ..." lines and "# done" at the end;
// the shell side counts them. Waits are on states reached (rows, words),
// never on how fast.
import { createRequire } from 'node:module';
import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const env = (k) => { if (!process.env[k]) throw new Error(`${k} is not set`); return process.env[k]; };
const require = createRequire(path.join(env('UI_SRC'), 'package.json'));
const { chromium } = require('playwright-core');

const WEB = env('WEB_URL'), SHOTS = env('SHOTS'), WORK = env('WORK_DIR');
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
  }
}
const shot = (page, name) => page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });

async function login(page, email, password) {
  await page.goto(WEB);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: WAIT });
}
const nav = (page, name) => page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name }).click();
const query = (page) => new URL(page.url()).searchParams;

async function browser() {
  return chromium.launchPersistentContext(path.join(env('PROFILE_DIR'), String(Math.random()).slice(2)), {
    executablePath: '/usr/bin/chromium',
    headless: true,
    acceptDownloads: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1280, height: 800 },
  });
}

let ctx = await browser();
try {
  const page = ctx.pages()[0] ?? await ctx.newPage();
  await login(page, env('ADMIN_EMAIL'), env('ADMIN_PASSWORD'));
  const finished = page.locator('table.finished');

  await step('Running shows no ended session; Finished shows the terminated one and the failed batch one, newest first', async () => {
    await page.getByRole('button', { name: 'Running', pressed: true }).waitFor({ timeout: WAIT });
    if (await page.locator('table.sessions tr[data-session="done"]').count()) throw new Error('done is in the Running list');
    await page.getByRole('button', { name: 'Finished' }).click();
    await finished.locator('tr[data-session="done"]').waitFor({ timeout: WAIT });
    if (query(page).get('view') !== 'finished') throw new Error(`URL ${page.url()}`);
    const first = await finished.locator('tbody tr').first().getAttribute('data-session');
    if (first !== 'wait-12') throw new Error(`first row ${first}, expected wait-12 (the newest)`);
    await finished.locator('tr[data-session="done"] .status', { hasText: 'TERMINATED' }).waitFor();
    await finished.locator('tr[data-session="patwork"]').waitFor();
  });

  await step('Per page 10: Next reads page 2 (in the URL) with the oldest five, Previous goes back', async () => {
    await page.getByLabel('Per page').selectOption('10');
    // The 15 rows of 25 a page give way to the first 10.
    await finished.locator('tbody tr').nth(10).waitFor({ state: 'detached', timeout: WAIT });
    if (await finished.locator('tbody tr').count() !== 10) throw new Error(`${await finished.locator('tbody tr').count()} rows on page 1`);
    if (await finished.locator('tr[data-session="job"]').count()) throw new Error('job (among the oldest) is on page 1');
    await page.getByRole('button', { name: 'Next' }).click();
    await finished.locator('tr[data-session="job"]').waitFor({ timeout: WAIT });
    const q = query(page);
    if (q.get('page') !== '2' || q.get('per') !== '10') throw new Error(`URL ${page.url()}`);
    await page.getByRole('status').filter({ hasText: 'Page 2' }).waitFor();
    if (!(await page.getByRole('button', { name: 'Next' }).isDisabled())) throw new Error('Next is enabled on the last page');
    await finished.locator('tr[data-session="job"] [data-testid="exit-code"]', { hasText: '3' }).waitFor();
    await shot(page, 'history_finished');
    await finished.locator('tr[data-session="patwork"]').waitFor();
    await page.getByRole('button', { name: 'Previous' }).click();
    await finished.locator('tr[data-session="wait-12"]').waitFor({ timeout: WAIT });
  });

  await step('Columns: Node hidden is in the URL; a reload keeps the view, the page and the columns', async () => {
    await page.getByRole('button', { name: 'Next' }).click();
    await finished.locator('tr[data-session="job"]').waitFor({ timeout: WAIT });
    await page.locator('.col-picker summary').click();
    await page.locator('.col-picker').getByLabel('Node').uncheck();
    await finished.locator('th', { hasText: 'Node' }).waitFor({ state: 'detached', timeout: WAIT });
    const cols = query(page).get('cols') ?? '';
    if (!cols || cols.split(',').includes('node') || !cols.split(',').includes('exit')) throw new Error(`cols=${cols}`);
    await page.reload();
    await finished.locator('tr[data-session="job"]').waitFor({ timeout: WAIT });
    if (await finished.locator('th', { hasText: 'Node' }).count()) throw new Error('Node is back after the reload');
    await finished.locator('th', { hasText: 'Exit code' }).waitFor();
    await page.getByRole('button', { name: 'Finished', pressed: true }).waitFor();
  });

  await step('a failed batch session keeps its page: exit code 3, status history, its log', async () => {
    await finished.locator('tr[data-session="job"] a.session-link').click();
    await page.getByRole('heading', { name: 'job', exact: true }).waitFor({ timeout: WAIT });
    await page.locator('[data-testid="detail-status"]', { hasText: 'ERROR' }).waitFor();
    await page.locator('[data-testid="detail-exit"]', { hasText: '3' }).waitFor();
    const hist = page.locator('ol.timeline li');
    await hist.filter({ hasText: 'PENDING' }).first().waitFor();
    await hist.filter({ hasText: 'batch command failed with exit code 3' }).waitFor();
    await page.locator('.log-line', { hasText: 'hist-LOGLINE' }).waitFor({ timeout: WAIT });
    await page.getByRole('link', { name: 'Finished sessions' }).waitFor();
  });

  await step('a session ended on request: its page shows the last of its log, kept when its container went, and why there is no exit code', async () => {
    await page.goto(`${WEB}sessions?view=finished&page=2&per=10`);
    await finished.locator('tr[data-session="done"] a.session-link').click();
    await page.getByRole('heading', { name: 'done', exact: true }).waitFor({ timeout: WAIT });
    await page.locator('[data-testid="detail-status"]', { hasText: 'TERMINATED' }).waitFor();
    await page.locator('[data-testid="log-kept"]', { hasText: 'kept then' }).waitFor({ timeout: WAIT });
    await page.locator('.log-line', { hasText: 'done-LOGLINE' }).waitFor({ timeout: WAIT });
    // It ended seconds ago: its samples (if its node took one) are kept,
    // so the charts never say they are gone.
    if (await page.getByText('No usage samples are kept for this session any more').count())
      throw new Error('the charts say the samples are gone minutes after the end');
    await page.locator('[data-testid="detail-exit"]', { hasText: 'did not end by itself' }).waitFor();
    await page.locator('ol.timeline li').filter({ hasText: 'TERMINATED' }).waitFor();
    if (await page.locator('p.error[role="alert"]').count()) throw new Error(await page.locator('p.error[role="alert"]').first().textContent());
    await shot(page, 'history_session');
    await page.getByRole('link', { name: 'Finished sessions' }).click();
    await finished.locator('tr[data-session="done"]').waitFor({ timeout: WAIT });
  });

  await step('Statistics: a row per user with nonzero CPU-hours, totals, the CSV download with its header and rows', async () => {
    await nav(page, 'Statistics');
    await page.getByRole('heading', { name: 'Statistics' }).waitFor({ timeout: WAIT });
    const row = page.locator('table.usage-table tbody tr[data-key="pat@example.org"]').first();
    await row.waitFor({ timeout: WAIT });
    const cpu = Number(await row.locator('td[data-label="CPU-hours"]').textContent());
    if (!(cpu > 0)) throw new Error(`pat's CPU-hours ${cpu}`);
    await page.locator('table.usage-table tbody tr[data-key="admin@tessera.local"]').first().waitFor();
    await page.locator('tr.total-row').first().waitFor();
    const [dl] = await Promise.all([page.waitForEvent('download', { timeout: WAIT }), page.getByRole('button', { name: 'Download CSV' }).click()]);
    const file = path.join(WORK, 'usage.csv');
    await dl.saveAs(file);
    const lines = readFileSync(file, 'utf8').trim().split(/\r?\n/);
    if (lines[0] !== 'day,user,cpu_hours,mem_gib_hours,fgpu_hours,sessions_started') throw new Error(`header ${lines[0]}`);
    if (!lines.some((l) => /^\d{4}-\d\d-\d\d,pat@example\.org,\d+\.\d{4},/.test(l)) || lines.length < 3) throw new Error(`rows ${lines.slice(1).join(' | ')}`);
    if (!dl.suggestedFilename().endsWith('.csv')) throw new Error(dl.suggestedFilename());
    await shot(page, 'statistics');
  });

  await step('Statistics: the user filter and per project (in the URL)', async () => {
    await page.getByLabel('User').selectOption('pat@example.org');
    await page.locator('table.usage-table tbody tr[data-key="admin@tessera.local"]').first().waitFor({ state: 'detached', timeout: WAIT });
    if (query(page).get('user') !== 'pat@example.org') throw new Error(page.url());
    await page.getByLabel('Per', { exact: true }).selectOption('project');
    await page.locator('table.usage-table th', { hasText: 'Project' }).waitFor({ timeout: WAIT });
    await page.locator('table.usage-table tbody tr[data-key="pat@example.org"]').first().waitFor();   // pat's personal project
    if (query(page).get('by') !== 'project') throw new Error(page.url());
  });

  await step('Statistics at 400 pixels: no sideways scroll', async () => {
    await page.setViewportSize({ width: 400, height: 800 });
    await page.goto(`${WEB}statistics`);
    await page.locator('table.usage-table tbody tr').first().waitFor({ timeout: WAIT });
    const over = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    if (over > 0) throw new Error(`${over} px wider than the window`);
    await shot(page, 'statistics-narrow');
    await page.setViewportSize({ width: 1280, height: 800 });
  });
} finally {
  await ctx.close();
}

ctx = await browser();
try {
  const page = ctx.pages()[0] ?? await ctx.newPage();
  await step('a user sees only their own: their finished session, their usage, no user filter', async () => {
    await login(page, env('USER_EMAIL'), env('USER_PASSWORD'));
    await page.goto(`${WEB}sessions?view=finished`);
    const finished = page.locator('table.finished');
    await finished.locator('tr[data-session="patwork"]').waitFor({ timeout: WAIT });
    if (await finished.locator('tbody tr').count() !== 1) throw new Error(`${await finished.locator('tbody tr').count()} finished rows`);
    await nav(page, 'Statistics');
    await page.locator('table.usage-table tbody tr[data-key="pat@example.org"]').first().waitFor({ timeout: WAIT });
    if (await page.locator('table.usage-table tbody tr[data-key="admin@tessera.local"]').count()) throw new Error('the admin\'s row shows');
    if (await page.getByLabel('User').count()) throw new Error('a user filter is offered');
    await page.getByText('Your sessions').waitFor();
  });
} finally {
  await ctx.close();
}
console.log(failed ? `# ${failed} failed` : '# all passed');
console.log('# done');
