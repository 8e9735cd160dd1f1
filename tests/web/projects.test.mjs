// The browser half of test_projects_ui.sh. Prints "ok ..." / "FAIL ..."
// lines and "# done" at the end; the shell side counts them. Waits are on
// states reached (rows, words), never on how fast.
import { createRequire } from 'node:module';
import { mkdirSync } from 'node:fs';
import path from 'node:path';

const env = (k) => { if (!process.env[k]) throw new Error(`${k} is not set`); return process.env[k]; };
const require = createRequire(path.join(env('UI_SRC'), 'package.json'));
const { chromium } = require('playwright-core');

const WEB = env('WEB_URL'), EMAIL = env('ADMIN_EMAIL'), PASSWORD = env('ADMIN_PASSWORD');
const BOB = env('BOB_EMAIL'), BOB_PASSWORD = env('BOB_PASSWORD');
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
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${String(e.message).split('\n')[0]}`);
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
async function login(page, email, password) {
  await page.goto(WEB);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: WAIT });
}
// The session names the list shows now.
const rowNames = (page) => page.locator('tr[data-session]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-session')));
// Waits until the list shows exactly these sessions (in any order).
async function waitRows(page, names) {
  const want = [...names].sort().join(',');
  await page.waitForFunction((want) => [...document.querySelectorAll('tr[data-session]')]
    .map((r) => r.getAttribute('data-session')).sort().join(',') === want, want, { timeout: WAIT })
    .catch(async () => { throw new Error(`the list shows ${(await rowNames(page)).join(', ') || 'nothing'}, not ${want}`); });
}
const switcher = (page) => page.getByRole('combobox', { name: 'Project', exact: true });
// A dialog a failed step left open is closed first (Escape), so that
// each step reports its own failure.
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
const apiCall = (page, method, url, body) => page.evaluate(async ({ method, url, body }) => {
  const me = await (await fetch('/auth/me', { credentials: 'same-origin' })).json();
  const r = await fetch(url, {
    method, credentials: 'same-origin', body: body === undefined ? undefined : JSON.stringify(body),
    headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': me.csrf_token },
  });
  return { status: r.status, body: await r.text() };
}, { method, url, body });

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
  await login(page, EMAIL, PASSWORD);

  // ---- The project switcher. ----
  await step('the switcher offers All projects and vision; All shows every session', async () => {
    await switcher(page).waitFor({ timeout: WAIT });
    const options = await switcher(page).locator('option').allTextContents();
    if (options[0] !== 'All projects' || !options.includes('vision'))
      throw new Error(`the switcher offers ${options.join(' | ')}`);
    await waitRows(page, ['adminbox', 'lowjob']);
  });

  await step('choosing vision filters the list to its sessions and goes into the URL', async () => {
    await switcher(page).selectOption('vision');
    await waitRows(page, ['lowjob']);
    const q = new URL(page.url()).searchParams.get('project');
    if (q !== 'vision') throw new Error(`the URL is ${page.url()}`);
  });

  await step('the project\'s quota shows beside the admin\'s resources: 1 fGPU of 1, the rest no limit', async () => {
    const panel = page.locator('.res-panel.project[data-project="vision"]');
    await panel.waitFor({ timeout: WAIT });
    const gpu = panel.locator('.res-tile[data-project-resource="gpu"]');
    await page.waitForFunction(() => document.querySelector('.res-panel.project .res-tile[data-project-resource="gpu"] .res-used')?.textContent?.replace(/\s+/g, ' ').trim() === '1 fGPU / 1 fGPU',
      null, { timeout: WAIT }).catch(async () => { throw new Error(`the project's GPU tile says ${await gpu.locator('.res-used').textContent()}`); });
    const cpu = await panel.locator('.res-tile[data-project-resource="cpu"] .res-used').textContent();
    if (!cpu.includes('no limit')) throw new Error(`the project's CPU tile says ${cpu}`);
    // The admin's own tiles are still there, and still the only ones named so.
    if (await page.locator('.res-tile[data-resource="gpu"]').count() !== 1) throw new Error('the admin\'s own GPU tile is not shown once');
    await shots(page, 'projects_switcher');
  });

  await step('reloaded, the page keeps the project', async () => {
    await page.reload();
    await waitRows(page, ['lowjob']);
    if (await switcher(page).inputValue() !== 'vision') throw new Error(`the switcher shows ${await switcher(page).inputValue()}`);
  });

  await step('the launch dialog starts in the chosen project; preemptible follows the type', async () => {
    const dlg = await openLaunch(page);
    const project = dlg.getByRole('combobox', { name: 'Project', exact: true });
    await project.waitFor({ timeout: WAIT });
    if (await project.inputValue() !== 'vision') throw new Error(`its project is ${await project.inputValue()}`);
    const quota = await dlg.locator('.field', { has: page.getByRole('combobox', { name: 'Project', exact: true }) }).locator('.hint').textContent();
    if (!quota.includes('1 fGPU (1 fGPU in use)')) throw new Error(`the project's hint says ${quota}`);
    const pre = dlg.getByRole('checkbox', { name: 'Preemptible' });
    if (await pre.isChecked()) throw new Error('an interactive session starts preemptible');
    await dlg.getByRole('radio', { name: 'Batch' }).check();
    if (!await pre.isChecked()) throw new Error('a batch session starts not preemptible');
    await dlg.getByRole('radio', { name: 'Interactive' }).check();
    const prio = dlg.getByRole('spinbutton', { name: 'Priority' });
    if (await prio.inputValue() !== '0') throw new Error(`the priority starts at ${await prio.inputValue()}`);
    await prio.fill('101');
    await dlg.locator('.field-error', { hasText: 'from 0 to 100' }).waitFor({ timeout: WAIT });
    if (!await dlg.getByRole('button', { name: 'Review', exact: true }).isDisabled()) throw new Error('Launch is on with priority 101');
    await dlg.getByRole('button', { name: 'Cancel', exact: true }).click();
    await dlg.waitFor({ state: 'hidden', timeout: WAIT });
  });

  await step('All projects shows every session again', async () => {
    await closeDialogs(page);
    await switcher(page).selectOption('');
    await waitRows(page, ['adminbox', 'lowjob']);
    if (new URL(page.url()).searchParams.has('project')) throw new Error(`the URL is ${page.url()}`);
  });

  // ---- Preemption. ----
  // Every status the lowjob row shows, as the page renders it: PREEMPTED
  // may last less than a second (the container's removal).
  await page.evaluate(() => {
    const seen = (window.__lowjobSeen = []);
    const look = () => {
      const row = document.querySelector('tr[data-session="lowjob"]');
      const st = row?.querySelector('.status')?.textContent;
      const info = row?.querySelector('.status + .info')?.textContent ?? '';
      const last = seen[seen.length - 1];
      if (st && (!last || last.status !== st || last.info !== info)) seen.push({ status: st, info });
    };
    look();
    new MutationObserver(look).observe(document.body, { subtree: true, childList: true, characterData: true });
  });

  await step('a priority-50 session launched from the dialog preempts bob\'s: its row goes PREEMPTED or PENDING "requeued after preemption"', async () => {
    const dlg = await openLaunch(page);
    await dlg.getByLabel('Image', { exact: true }).fill(IMAGE);
    await dlg.getByLabel('Name').fill('urgent');
    await dlg.getByRole('spinbutton', { name: 'CPU' }).fill('0.25');
    await dlg.getByRole('spinbutton', { name: 'Memory' }).fill('0.25');
    await dlg.getByRole('spinbutton', { name: 'GPU' }).fill('1');
    await dlg.getByLabel('Startup command').fill('sleep 3600');
    await dlg.getByRole('spinbutton', { name: 'Priority' }).fill('50');
    await reviewAndLaunch(dlg);
    await dlg.waitFor({ state: 'hidden', timeout: WAIT });
    await page.waitForFunction(() => {
      const row = document.querySelector('tr[data-session="lowjob"]');
      const st = row?.querySelector('.status')?.textContent;
      const info = row?.querySelector('.status + .info')?.textContent ?? '';
      const note = row?.querySelector('.preempt-note')?.textContent ?? '';
      return st === 'PREEMPTED' || (st === 'PENDING' && (info + note).includes('requeued after preemption'));
    }, null, { timeout: WAIT });
    if (await page.locator('tr[data-session="lowjob"] .status', { hasText: 'PREEMPTED' }).count()) await shots(page, 'projects_preempted', ['light']);
  });

  await step('the urgent session runs on the GPU', async () => {
    await page.locator('tr[data-session="urgent"] .status', { hasText: 'RUNNING' }).waitFor({ timeout: WAIT });
  });

  await step('bob\'s row is PENDING, "requeued after preemption", with Cancel', async () => {
    const row = page.locator('tr[data-session="lowjob"]');
    await row.locator('.status', { hasText: 'PENDING' }).waitFor({ timeout: WAIT });
    // The reason it waits (the scheduler's), and why it is back in the queue.
    const info = (await row.locator('td[data-label="Status"]').textContent()) ?? '';
    if (!info.includes('requeued after preemption 1')) throw new Error(`its status cell says ${info}`);
    await row.getByRole('button', { name: 'Cancel' }).waitFor({ timeout: WAIT });
    await shots(page, 'projects_requeued');
  });

  await step('the PREEMPTED row, when the page showed it, had its own colour and said by what', async () => {
    const seen = await page.evaluate(() => window.__lowjobSeen);
    const p = seen.find((s) => s.status === 'PREEMPTED');
    if (!p) {
      // Its container went within one event of the stream: the history
      // (next step) says it all the same.
      console.log(`# PREEMPTED went too quickly to render (the row showed ${seen.map((s) => s.status).join(' → ')}); checked in its history`);
      return;
    }
    if (!p.info.includes('preempted by')) throw new Error(`the PREEMPTED row says ${p.info}`);
  });

  await step('bob\'s session page: its history says PREEMPTED by what, then PENDING; priority, preemptible and the count show', async () => {
    await page.locator('tr[data-session="lowjob"] a.session-link').click();
    await page.getByRole('heading', { name: 'lowjob' }).waitFor({ timeout: WAIT });
    const history = page.locator('ol.timeline');
    await history.locator('li', { has: page.locator('.status', { hasText: 'PREEMPTED' }) }).waitFor({ timeout: WAIT });
    const line = await history.locator('li', { has: page.locator('.status', { hasText: 'PREEMPTED' }) }).first().textContent();
    if (!line.includes('preempted by') || !line.includes('urgent')) throw new Error(`the PREEMPTED line says ${line}`);
    const after = await history.locator('li', { has: page.locator('.status', { hasText: 'PENDING' }) }).last().textContent();
    if (!after.includes('requeued after preemption')) throw new Error(`the last PENDING line says ${after}`);
    const colour = await history.locator('.st-preempted').first().evaluate((e) => getComputedStyle(e).color);
    const pending = await history.locator('.st-pending').first().evaluate((e) => getComputedStyle(e).color);
    if (colour === pending) throw new Error('PREEMPTED has the colour of PENDING');
    for (const [id, want] of [['detail-project', 'vision'], ['detail-priority', '0'], ['detail-preemptible', 'yes'], ['detail-preemptions', 'preempted 1 time']]) {
      const t = (await page.getByTestId(id).textContent()).trim();
      if (!t.includes(want)) throw new Error(`${id} says ${t}, not ${want}`);
    }
    await shots(page, 'projects_preempted_detail');
  });

  await step('once the urgent session ends, bob\'s runs again', async () => {
    await page.getByRole('link', { name: 'Sessions' }).first().click();
    const row = page.locator('tr[data-session="urgent"]');
    await row.getByRole('button', { name: 'Terminate' }).click();
    const dlg = page.getByRole('dialog', { name: 'Terminate session' });
    await dlg.getByRole('button', { name: 'Terminate' }).click();
    await page.locator('tr[data-session="lowjob"] .status', { hasText: 'RUNNING' }).waitFor({ timeout: WAIT });
  });

  // ---- The Admin page. ----
  await step('the Admin page lists vision with its quota and member', async () => {
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Admin' }).click();
    const row = page.locator('tr[data-project="vision"]');
    await row.waitFor({ timeout: WAIT });
    const text = await row.textContent();
    if (!text.includes('1 fGPU') || !text.includes('Vision team')) throw new Error(`its row says ${text}`);
    await row.getByRole('button', { name: 'Members of vision' }).click();
    const dlg = page.getByRole('dialog', { name: 'Members of vision' });
    await dlg.locator(`tr[data-member="${BOB}"]`).waitFor({ timeout: WAIT });
    await dlg.getByRole('button', { name: 'Close' }).click();
    await dlg.waitFor({ state: 'hidden', timeout: WAIT });
  });

  await step('a project made on the Admin page, with a quota and bob as its manager', async () => {
    const form = page.getByRole('form', { name: 'Create a project' });
    await form.getByLabel('Project name').fill('nlp');
    await form.getByLabel('Description').fill('Language models');
    await form.getByLabel('Max fGPU').fill('0.5');
    await form.getByLabel('Max memory').fill('16g');
    await form.getByLabel('Weight').fill('2');
    await form.getByRole('button', { name: 'Create project' }).click();
    const row = page.locator('tr[data-project="nlp"]');
    await row.waitFor({ timeout: WAIT });
    await row.getByRole('button', { name: 'Members of nlp' }).click();
    const dlg = page.getByRole('dialog', { name: 'Members of nlp' });
    await dlg.getByLabel('Member email').fill(BOB);
    await dlg.getByLabel('Role').selectOption('manager');
    await dlg.getByRole('button', { name: 'Add member' }).click();
    await dlg.locator(`tr[data-member="${BOB}"]`, { hasText: 'manager' }).waitFor({ timeout: WAIT });
    await dlg.getByRole('button', { name: 'Close' }).click();
    const r = await apiCall(page, 'GET', '/api/v1/projects/nlp');
    const p = JSON.parse(r.body).project;
    if (p.quota.fgpu !== 0.5 || p.quota.mem !== 16 * 2 ** 30 || p.weight !== 2 || p.quota.cpu !== null)
      throw new Error(`the server has ${r.body}`);
    if (!p.members.some((m) => m.email === BOB && m.role === 'manager')) throw new Error(`its members: ${JSON.stringify(p.members)}`);
  });

  await step('a project\'s quota changed in its Edit dialog: a limit emptied is no limit', async () => {
    await page.locator('tr[data-project="nlp"]').getByRole('button', { name: 'Edit project nlp' }).click();
    const dlg = page.getByRole('dialog', { name: 'Edit project nlp' });
    const fgpu = dlg.getByLabel('Max fGPU');
    if (await fgpu.inputValue() !== '0.5') throw new Error(`Max fGPU starts at ${await fgpu.inputValue()}`);
    await fgpu.fill('');
    await dlg.getByLabel('Max sessions').fill('3');
    await dlg.getByRole('button', { name: 'Save project' }).click();
    await dlg.waitFor({ state: 'hidden', timeout: WAIT });
    await page.locator('tr[data-project="nlp"]', { hasText: '3 sessions' }).waitFor({ timeout: WAIT });
    const p = JSON.parse((await apiCall(page, 'GET', '/api/v1/projects/nlp')).body).project;
    if (p.quota.fgpu !== null || p.quota.sessions !== 3 || p.quota.mem !== 16 * 2 ** 30) throw new Error(`the server has ${JSON.stringify(p.quota)}`);
  });

  await step('the fair share table lists vision with its share and rank, and bob under it', async () => {
    const row = page.locator('tr[data-fairshare="vision"]');
    await row.waitFor({ timeout: WAIT });
    const cells = await row.locator('td').allTextContents();
    if (!cells.some((c) => /%$/.test(c.trim()))) throw new Error(`its cells: ${cells.join(' | ')}`);
    await row.getByRole('button', { name: 'Show the users of vision' }).click();
    await page.locator(`tr[data-fairshare-user="${BOB}"]`).waitFor({ timeout: WAIT });
    await page.locator('section[aria-labelledby="projects-title"]').scrollIntoViewIfNeeded();
    await page.screenshot({ path: path.join(SHOTS, 'projects_admin-light.png'), fullPage: true });
    // The user guide's: the two sections alone.
    for (const id of ['projects', 'fairshare'])
      await page.locator(`section[aria-labelledby="${id}-title"]`).screenshot({ path: path.join(SHOTS, `projects_admin_${id}-light.png`) });
  });

  await step('a removal the server refuses shows its words', async () => {
    const row = page.locator('tr[data-project="vision"]');
    await row.getByRole('button', { name: 'Remove project vision' }).click();
    const dlg = page.getByRole('dialog', { name: 'Remove project' });
    await dlg.getByRole('button', { name: 'Remove project' }).click();
    const alert = page.locator('section[aria-labelledby="projects-title"] [role=alert]');
    await alert.waitFor({ timeout: WAIT });
    const text = await alert.textContent();
    if (!text.includes('Cannot remove vision')) throw new Error(`it says ${text}`);
    await row.waitFor({ timeout: WAIT });
  });

  // ---- The Nodes page: the node's group. ----
  await step('the Nodes page shows the node\'s group and sets it', async () => {
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Nodes' }).click();
    const card = page.locator(`article[data-node="${NODE}"]`);
    await card.getByTestId('node-group').filter({ hasText: 'group default' }).waitFor({ timeout: WAIT });
    for (const g of ['train', 'default']) {
      await card.getByRole('button', { name: `Set the resource group of ${NODE}` }).click();
      const dlg = page.getByRole('dialog', { name: `Resource group of ${NODE}` });
      await dlg.getByLabel('Resource group').fill(g);
      await dlg.getByRole('button', { name: 'Set group' }).click();
      await dlg.waitFor({ state: 'hidden', timeout: WAIT });
      await card.getByTestId('node-group').filter({ hasText: `group ${g}` }).waitFor({ timeout: WAIT });
      if (g === 'train') await shots(page, 'projects_node_group', ['light']);
    }
  });

  await step('at 400 pixels the sessions page with a project and the Admin page have no sideways scroll', async () => {
    await page.setViewportSize({ width: 400, height: 860 });
    try {
      for (const [name, url, ready] of [
        ['projects_sessions_narrow', '/sessions?project=vision', '.res-panel.project .res-tile'],
        ['projects_admin_narrow', '/admin', 'tr[data-fairshare="vision"]'],
      ]) {
        await page.goto(new URL(url, WEB).href);
        await page.locator(ready).first().waitFor({ timeout: WAIT });
        const r = await page.evaluate(() => ({ sw: document.documentElement.scrollWidth, iw: innerWidth }));
        if (r.sw > r.iw) throw new Error(`${url}: the page is ${r.sw} px wide in a ${r.iw} px window`);
        await shots(page, name, ['light']);
      }
    } finally {
      await page.setViewportSize(WIDE);
    }
  });

  // ---- bob's view. ----
  await step('bob sees his projects in the switcher, his sessions only, and vision\'s quota', async () => {
    const bctx = await chromium.launch({ executablePath: launchOpts.executablePath, headless: true, args: launchOpts.args });
    try {
      const bpage = await bctx.newPage({ viewport: WIDE });
      await login(bpage, BOB, BOB_PASSWORD);
      await switcher(bpage).waitFor({ timeout: WAIT });
      const options = await switcher(bpage).locator('option').allTextContents();
      for (const want of ['All projects', 'vision', 'nlp', `${BOB} (personal)`])
        if (!options.includes(want)) throw new Error(`bob's switcher offers ${options.join(' | ')}`);
      await waitRows(bpage, ['lowjob']);
      await switcher(bpage).selectOption('vision');
      await bpage.locator('.res-panel.project[data-project="vision"]').waitFor({ timeout: WAIT });
      await waitRows(bpage, ['lowjob']);
      await switcher(bpage).selectOption(BOB);
      await bpage.locator('p.empty', { hasText: `No sessions in project ${BOB}` }).waitFor({ timeout: WAIT });
      await waitRows(bpage, []);
    } finally {
      await bctx.close();
    }
  });
} catch (e) {
  failed++;
  console.log(`FAIL the browser test stopped: ${String(e.message).split('\n')[0]}`);
} finally {
  await ctx.close();
}
console.log('# done');
process.exit(failed ? 1 : 0);
