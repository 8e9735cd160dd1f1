// The browser half of test_dashboard_ui.sh. Prints "ok ..." / "FAIL ..."
// lines and "# done" at the end; the shell side counts them. Waits are on
// states reached (rows, words, points), never on how fast.
import { createRequire } from 'node:module';
import { mkdirSync } from 'node:fs';
import path from 'node:path';

const env = (k) => { if (!process.env[k]) throw new Error(`${k} is not set`); return process.env[k]; };
const require = createRequire(path.join(env('UI_SRC'), 'package.json'));
const { chromium } = require('playwright-core');

const WEB = env('WEB_URL'), EMAIL = env('ADMIN_EMAIL'), PASSWORD = env('ADMIN_PASSWORD');
const IMAGE = env('IMAGE'), SHOTS = env('SHOTS'), NODE = env('NODE_ID');
const GPU_DEMO = env('GPU_DEMO'), CPU_DEMO = env('CPU_DEMO');
mkdirSync(SHOTS, { recursive: true });
const WAIT = 60000;
// The launch dialog's Review, then Launch on its review step (the
// launcher shows what it will ask for before it does).
const reviewAndLaunch = async (dlg) => {
  await dlg.getByRole('button', { name: 'Review', exact: true }).click();
  await dlg.getByRole('button', { name: 'Launch', exact: true }).click();
};
const WIDE = { width: 1280, height: 860 }, NARROW = { width: 400, height: 860 };

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
// Screenshots: NAME-light.png and/or NAME-dark.png, the ones
// docs/user-guide.md shows (SCREENSHOT_DIR=docs/images refreshes them).
async function shots(page, name, schemes = ['light', 'dark']) {
  await page.evaluate(() => { document.activeElement?.blur?.(); if (!document.querySelector('dialog[open]')) scrollTo(0, 0); });
  for (const scheme of schemes) {
    await page.emulateMedia({ colorScheme: scheme });
    await page.waitForTimeout(300);   // the charts redraw in the new colours
    await page.screenshot({ path: path.join(SHOTS, `${name}-${scheme}.png`) });
  }
  await page.emulateMedia({ colorScheme: 'light' });
}
async function noSidewaysScroll(page, what) {
  const r = await page.evaluate(() => ({ sw: document.documentElement.scrollWidth, iw: innerWidth }));
  if (r.sw > r.iw) {
    // The innermost element past the window's right edge, to say what to fix.
    const past = await page.evaluate(() => {
      const out = [...document.querySelectorAll('body *')].filter((e) => e.getBoundingClientRect().right > innerWidth + 1);
      const inner = out.filter((e) => !out.some((o) => o !== e && e.contains(o)));
      return inner.slice(0, 3).map((e) => `${e.tagName.toLowerCase()}.${[...e.classList].join('.')} "${(e.textContent ?? '').slice(0, 30)}" to ${Math.round(e.getBoundingClientRect().right)}`).join('; ');
    });
    throw new Error(`${what}: the page is ${r.sw} px wide in a ${r.iw} px window (${past})`);
  }
}
// A call of the API as the logged-in page makes it (its login's CSRF token).
const apiCall = (page, method, url, body) => page.evaluate(async ({ method, url, body }) => {
  const me = await (await fetch('/auth/me', { credentials: 'same-origin' })).json();
  const r = await fetch(url, {
    method, credentials: 'same-origin', body: body === undefined ? undefined : JSON.stringify(body),
    headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': me.csrf_token },
  });
  return { status: r.status, body: await r.text() };
}, { method, url, body });
async function openLaunch(page) {
  // A dialog a failed step left open is closed first (Escape), so that
  // each step reports its own failure.
  if (await page.locator('dialog[open]').count()) {
    await page.keyboard.press('Escape');
    await page.locator('dialog[open]').waitFor({ state: 'detached', timeout: WAIT });
  }
  await page.getByRole('button', { name: 'Start' }).click();
  const dlg = page.getByRole('dialog', { name: 'Start a session' });
  await dlg.waitFor();
  return dlg;
}
async function closeLaunch(page, dlg) {
  await dlg.getByRole('button', { name: 'Cancel', exact: true }).click();
  await dlg.waitFor({ state: 'hidden', timeout: WAIT });
}
// The form's button: Review (Launch is on the review step).
const launchButton = (dlg) => dlg.getByRole('button', { name: 'Review', exact: true });
// A route's handler that a page gone elsewhere meanwhile (its request
// dropped, the route removed) does not turn into an uncaught error that
// ends the whole test.
const quiet = (fn) => async (route) => { try { await fn(route); } catch (e) { if (!/already handled|closed|disposed|Target/i.test(String(e))) console.log(`# route: ${String(e).split('\n')[0]}`); } };
const tileUsed = (page, res) => page.locator(`.res-tile[data-resource="${res}"] .res-used strong`).textContent();

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

  await step('the page has an icon (it was empty)', async () => {
    const r = await page.evaluate(async () => {
      const href = document.querySelector('link[rel="icon"]')?.getAttribute('href') ?? '';
      const img = new Image();
      img.src = href;
      try { await img.decode(); } catch { return { href, w: 0 }; }
      return { href, w: img.naturalWidth };
    });
    if (!r.href.startsWith('data:image/') || !(r.w > 0)) throw new Error(`the icon is '${r.href.slice(0, 40)}' (${r.w} px wide)`);
  });

  await step('the resource panel shows the admin\'s sessions, CPU, memory and GPU', async () => {
    await page.locator('.res-tile[data-resource="sessions"] .res-used').waitFor({ timeout: WAIT });
    const n = await tileUsed(page, 'sessions');
    if (n !== '1') throw new Error(`the Sessions tile says ${n} in use, not 1 (the logger)`);
    const gpu = await tileUsed(page, 'gpu');
    if (!gpu.startsWith('0')) throw new Error(`the GPU tile says ${gpu} in use, not 0`);
    const foot = await page.locator('.res-tile[data-resource="gpu"] .res-foot').textContent();
    if (!foot.includes('2 fGPU free of 2 fGPU')) throw new Error(`the GPU tile does not say the cluster's 2 fGPU are free: ${foot}`);
  });

  await step('the launch dialog estimates that a third 1-fGPU session would wait, and says why', async () => {
    await page.getByRole('button', { name: 'Start' }).click();
    const dlg = page.getByRole('dialog', { name: 'Start a session' });
    await dlg.waitFor();
    await dlg.getByLabel('Image', { exact: true }).fill(IMAGE);
    await dlg.getByLabel('Name').fill('gpu');
    await dlg.getByRole('spinbutton', { name: 'CPU' }).fill('0.25');
    await dlg.getByRole('spinbutton', { name: 'Memory' }).fill('0.25');
    await dlg.getByRole('spinbutton', { name: 'GPU' }).fill('1');
    await dlg.getByRole('spinbutton', { name: 'Sessions' }).fill('1');
    await dlg.locator('.estimate.fits').waitFor({ timeout: WAIT });
    // While the new answer is on its way (held back here), the old one
    // ("Fits now" for 1 session) must not stand for 3: "Checking".
    let release;
    const held = new Promise((r) => { release = r; });
    await page.route('**/api/v1/sessions?dry_run=1', async (route) => { await held; await route.continue().catch(() => {}); });
    await dlg.getByRole('spinbutton', { name: 'Sessions' }).fill('3');
    try {
      await dlg.locator('.estimate.checking', { hasText: 'Checking' }).waitFor({ timeout: WAIT });
      if (await dlg.locator('.estimate.fits').count()) throw new Error('the estimate still says it fits while it re-checks');
    } finally {
      release();
      await page.unroute('**/api/v1/sessions?dry_run=1');
    }
    await dlg.locator('.estimate.waits').waitFor({ timeout: WAIT });
    const words = await dlg.locator('.estimate').textContent();
    if (!words.includes('2 of the 3 would start now') || !words.includes('GPU'))
      throw new Error(`the estimate says: ${words}`);
    const hint = await dlg.locator('.field.slider', { has: page.getByRole('spinbutton', { name: 'GPU' }) }).locator('.hint').textContent();
    if (!hint.includes('one node')) throw new Error(`the GPU slider does not say what limits it: ${hint}`);
    await page.setViewportSize({ width: 1280, height: 1000 });
    await shots(page, 'launch_estimate', ['light']);
    await page.setViewportSize(WIDE);
    await reviewAndLaunch(dlg);
    await dlg.waitFor({ state: 'hidden', timeout: WAIT });
  });

  await step('the resource panel changes when the sessions start', async () => {
    // Three hold (the logger and two 1-fGPU sessions), the third waits: a
    // PENDING session holds nothing, and is said apart ("+ 1 fGPU waiting"),
    // never counted as used (3 fGPU against a 2-fGPU cluster).
    await page.waitForFunction(() => document.querySelector('.res-tile[data-resource="sessions"] .res-used strong')?.textContent === '3',
      null, { timeout: WAIT });
    await page.waitForFunction(() => document.querySelector('.res-tile[data-resource="gpu"] .res-used strong')?.textContent === '2 fGPU',
      null, { timeout: WAIT });
    const foot = await page.locator('.res-tile[data-resource="gpu"] .res-foot').textContent();
    if (!foot.includes('0 fGPU free')) throw new Error(`the GPU tile does not say the cluster is full: ${foot}`);
    if (!foot.includes('+ 1 fGPU waiting')) throw new Error(`the GPU tile does not say 1 fGPU waits: ${foot}`);
    // No limit: the full bar is the cluster's share, not a fault in red.
    const fill = await page.locator('.res-tile[data-resource="gpu"] .res-fill').evaluate((e) => ({
      cls: e.className, bg: getComputedStyle(e).backgroundColor,
      danger: (() => { const p = document.createElement('span'); p.style.color = 'var(--danger)'; document.body.append(p); const c = getComputedStyle(p).color; p.remove(); return c; })(),
    }));
    if (/\b(crit|warn)\b/.test(fill.cls) || fill.bg === fill.danger) throw new Error(`the no-limit GPU bar is drawn as a fault: ${fill.cls} ${fill.bg}`);
  });

  await step('an admin\'s tiles show everyone\'s sessions, as the list does', async () => {
    // The list as GET /v1/sessions has it (no event stream), with another
    // user's RUNNING session of 0.5 fGPU and 1 CPU added: the tiles count it.
    const before = Number((await tileUsed(page, 'gpu')).split(' ')[0]);
    await page.route('**/api/v1/events', (route) => route.fulfill({ status: 404, body: 'no stream in this check' }));
    await page.route('**/api/v1/sessions', quiet(async (route) => {
      if (route.request().method() !== 'GET') return route.continue();
      const resp = await route.fetch();
      const body = await resp.json();
      const t = body.sessions[0];
      body.sessions.push({ ...t, id: 'f'.repeat(32), name: 'someone-elses', owner: 'other@tessera.test', status: 'RUNNING',
        resources: { cpu: 1, mem: 2 ** 30, fgpu: 0.5 }, cluster_size: 1, containers: [] });
      await route.fulfill({ response: resp, json: body });
    }));
    try {
      await page.reload();
      await page.locator('tr[data-session="someone-elses"]').waitFor({ timeout: WAIT });
      const want = `${before + 0.5} fGPU`;
      await page.waitForFunction((w) => document.querySelector('.res-tile[data-resource="gpu"] .res-used strong')?.textContent === w, want, { timeout: WAIT })
        .catch(async () => { throw new Error(`the GPU tile says ${await tileUsed(page, 'gpu')}, not ${want} with the other user's session`); });
      const title = await page.locator('#res-title').textContent();
      if (!/everyone/i.test(title)) throw new Error(`the panel is titled '${title}'`);
    } finally {
      await page.unroute('**/api/v1/sessions');
      await page.unroute('**/api/v1/events');
      await page.reload();
      await page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: WAIT });
    }
  });

  let pendingName;
  await step('a PENDING row says Cancel, not Terminate, and its dialog says what happens', async () => {
    // The two that fit may still show PENDING for a moment (their start
    // is under way on a loaded machine): wait until one row is left so.
    await page.waitForFunction(() => [...document.querySelectorAll('tr[data-session] .status')]
      .filter((e) => e.textContent === 'PENDING').length === 1, null, { timeout: WAIT });
    const row = page.locator('tr[data-session]').filter({ has: page.locator('.status', { hasText: 'PENDING' }) });
    await row.waitFor({ timeout: WAIT });
    pendingName = await row.getAttribute('data-session');
    if (await row.getByRole('button', { name: 'Terminate' }).count()) throw new Error('the PENDING row has a Terminate button');
    await shots(page, 'sessions_list', ['light']);
    await row.getByRole('button', { name: 'Cancel' }).click();
    const dlg = page.getByRole('dialog', { name: 'Cancel session' });
    await dlg.waitFor();
    const text = await dlg.textContent();
    if (!text.includes('has not started yet') || !text.includes('leaves the queue')) throw new Error(`the dialog says: ${text}`);
    await dlg.getByRole('button', { name: 'Cancel session' }).click();
    await page.locator(`tr[data-session="${pendingName}"]`).waitFor({ state: 'detached', timeout: WAIT });
  });

  await step('a RUNNING row still says Terminate, its three buttons side by side', async () => {
    const row = page.locator('tr[data-session="logger"]');
    await row.getByRole('button', { name: 'Terminate' }).waitFor({ timeout: WAIT });
    // Stacked, Apps, Convert to image and Terminate made the row 100 px tall.
    const tops = await row.locator('.row-actions .btn').evaluateAll((bs) => bs.map((b) => Math.round(b.getBoundingClientRect().top)));
    if (tops.length !== 3 || new Set(tops).size !== 1) throw new Error(`the row's buttons are at tops ${tops.join(', ')}`);
  });

  await step('the app launcher puts the focus on the first app, not on "Open port"', async () => {
    await page.locator('tr[data-session="logger"]').getByRole('button', { name: 'Apps of logger' }).click();
    const dlg = page.getByRole('dialog', { name: 'Apps of logger' });
    await dlg.locator('.app-button').first().waitFor({ timeout: WAIT });
    await page.waitForFunction(() => document.activeElement?.classList.contains('app-button'), null, { timeout: WAIT })
      .catch(async () => { throw new Error(`the focus is on ${await page.evaluate(() => document.activeElement?.outerHTML.slice(0, 80))}`); });
  });

  await step('the terminal\'s tab is named after its session, not "Tessera terminal" for every one', async () => {
    const dlg = page.getByRole('dialog', { name: 'Apps of logger' });
    try {
      const [tab] = await Promise.all([
        ctx.waitForEvent('page', { timeout: WAIT }),
        dlg.getByRole('button', { name: 'Terminal', exact: true }).click(),
      ]);
      await tab.waitForURL((u) => u.protocol === 'http:' || u.protocol === 'https:', { timeout: WAIT });
      await tab.waitForFunction(() => document.querySelector('.xterm'), null, { timeout: WAIT });
      const title = await tab.title();
      await tab.close();
      if (title !== 'logger · Tessera terminal') throw new Error(`the tab's title is '${title}'`);
    } finally {
      if (await dlg.count()) { await page.keyboard.press('Escape'); await dlg.waitFor({ state: 'hidden', timeout: WAIT }); }
    }
  });

  // ---- The launch dialog (issue 28, item 6). ----
  await step('reopened, the launch dialog asks for 1 session again, not the last launch\'s 3', async () => {
    const dlg = await openLaunch(page);
    const n = await dlg.getByRole('spinbutton', { name: 'Sessions' }).inputValue();
    if (n !== '1') throw new Error(`Sessions shows ${n} after a launch of 3`);
    await closeLaunch(page, dlg);
  });

  await step('at 1280x800, with folders listed, the launch dialog\'s Launch button is in sight, whatever the body scrolls', async () => {
    for (let i = 1; i <= 8; i++) {
      const r = await apiCall(page, 'POST', '/api/v1/folders', { name: `ui-folder-${i}` });
      if (r.status !== 201 && r.status !== 409) throw new Error(`making folder ${i} answered ${r.status}: ${r.body}`);
    }
    await page.setViewportSize({ width: 1280, height: 800 });
    const dlg = await openLaunch(page);
    await dlg.getByRole('group', { name: 'Environment' }).waitFor({ timeout: WAIT });
    await dlg.getByText('ui-folder-8').first().waitFor({ timeout: WAIT });
    for (const where of ['top', 'bottom']) {
      if (where === 'bottom') await dlg.evaluate((d) => d.querySelectorAll('*').forEach((e) => { if (e.scrollHeight > e.clientHeight) e.scrollTop = e.scrollHeight; }));
      for (const name of ['Review', 'Cancel']) {
        const btn = dlg.getByRole('button', { name, exact: true });
        const box = await btn.boundingBox();
        if (!box || box.y < 0 || box.x < 0 || box.y + box.height > 800 || box.x + box.width > 1280)
          throw new Error(`${name} is at ${JSON.stringify(box)} in a 1280x800 window (body at its ${where})`);
        // On top there, not hidden under or clipped by the scrolled body.
        const hit = await btn.evaluate((b) => {
          const r = b.getBoundingClientRect();
          const e = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
          return !!e && (e === b || b.contains(e));
        });
        if (!hit) throw new Error(`${name} is covered or clipped (body at its ${where})`);
      }
    }
    await closeLaunch(page, dlg);
    await page.setViewportSize(WIDE);
  });

  const pickEnv = async (dlg, title) => {
    const envs = dlg.getByRole('group', { name: 'Environment' });
    await envs.locator('label.env').filter({ has: page.locator('.env-title', { hasText: new RegExp(`^${title}$`) }) }).click({ timeout: WAIT });
  };
  await step('the GPU field starts at the chosen image\'s minimum: 0.5 fGPU for one that needs it, 0 for one that needs none', async () => {
    const dlg = await openLaunch(page);
    const gpu = dlg.getByRole('spinbutton', { name: 'GPU' });
    await pickEnv(dlg, 'GPU minimum');
    await page.waitForFunction((el) => el.value === '0.5', await gpu.elementHandle(), { timeout: WAIT }).catch(async () => {
      throw new Error(`GPU shows ${await gpu.inputValue()} for ${GPU_DEMO}, whose minimum is 0.5 fGPU`);
    });
    await pickEnv(dlg, 'CPU only');
    await page.waitForFunction((el) => el.value === '0', await gpu.elementHandle(), { timeout: WAIT }).catch(async () => {
      throw new Error(`GPU shows ${await gpu.inputValue()} for ${CPU_DEMO}, which needs no GPU`);
    });
    await closeLaunch(page, dlg);
  });

  await step('a request below the image\'s minimum turns Launch off, with the reason next to the field, as it is typed', async () => {
    const dlg = await openLaunch(page);
    await pickEnv(dlg, 'GPU minimum');
    const launchBtn = launchButton(dlg);
    const field = (label) => dlg.locator('.field.slider', { has: page.getByRole('spinbutton', { name: label, exact: true }) });
    await dlg.getByRole('spinbutton', { name: 'GPU' }).waitFor();
    for (const [label, bad, good, words] of [
      ['CPU', '0.25', '0.5', 'at least 0.5 CPU'],
      ['Memory', '0.125', '0.25', 'at least 256 MiB'],
      ['GPU', '0.2', '0.5', 'at least 0.5 fGPU'],
    ]) {
      await dlg.getByRole('spinbutton', { name: label, exact: true }).fill(bad);
      if (!await launchBtn.isDisabled()) throw new Error(`Launch is on with ${label} ${bad}, below ${GPU_DEMO}'s minimum`);
      const err = field(label).locator('.field-error');
      await err.waitFor({ timeout: WAIT });
      const text = await err.textContent();
      if (!text.includes(words)) throw new Error(`the ${label} field says '${text}', not '${words}'`);
      await dlg.getByRole('spinbutton', { name: label, exact: true }).fill(good);
      await err.waitFor({ state: 'detached', timeout: WAIT });
    }
    if (await launchBtn.isDisabled()) throw new Error('Launch stays off once the request meets the minimum');
    await closeLaunch(page, dlg);
  });

  await step('environments whose titles begin alike (Python, PyTorch) get different badges', async () => {
    await page.route('**/api/v1/images', quiet(async (route) => {
      const resp = await route.fetch();
      const body = await resp.json();
      const base = body.images.find((i) => i.frameworks.length > 0) ?? body.images[0];
      body.images.push({ ...base, ref: 'ui-badge/python:3.11', name: 'ui-badge/python', tag: '3.11', family: 'ui-badge-python', title: 'Python', aliases: [],
        frameworks: [{ name: 'python', version: '3.11.2' }], status: 'ready', visibility: 'public' });
      body.images.push({ ...base, ref: 'ui-badge/python-ml:3.11-torch1.13', name: 'ui-badge/python-ml', tag: '3.11-torch1.13', family: 'ui-badge-torch', title: 'PyTorch', aliases: [],
        frameworks: [{ name: 'python', version: '3.11.2' }, { name: 'torch', version: '1.13.1' }], status: 'ready', visibility: 'public' });
      await route.fulfill({ response: resp, json: body });
    }));
    try {
      const dlg = await openLaunch(page);
      const envs = dlg.getByRole('group', { name: 'Environment' });
      await envs.locator('label.env', { hasText: 'PyTorch' }).first().waitFor({ timeout: WAIT });
      const badges = await envs.locator('.env-badge').allTextContents();
      const dup = badges.filter((b, i) => badges.findIndex((x) => x.toLowerCase() === b.toLowerCase()) !== i);
      if (dup.length) throw new Error(`badges repeat: ${badges.join(', ')}`);
      // The versions shown are the labels' (packages'), and the dialog says so.
      await envs.locator('label.env', { hasText: 'PyTorch' }).first().click();
      const note = await dlg.getByRole('group', { name: 'Version' }).locator('.version-note').textContent();
      if (!note.includes('labels')) throw new Error(`the versions' note says '${note}'`);
      await closeLaunch(page, dlg);
    } finally {
      await page.unroute('**/api/v1/images');
    }
  });

  await step('an empty catalog shows what to do, not a bare Image field', async () => {
    await page.route('**/api/v1/images', (route) => route.fulfill({ json: { images: [] } }));
    try {
      const dlg = await openLaunch(page);
      const empty = dlg.locator('[data-testid="env-empty"]');
      await empty.waitFor({ timeout: WAIT });
      const text = await empty.textContent();
      if (!text.includes('No environments yet') || !text.includes('tessera image build')) throw new Error(`the empty state says '${text}'`);
      // Nothing chosen behind it: Launch waits for a name typed.
      if (!await launchButton(dlg).isDisabled()) throw new Error('Launch is on in an empty dialog (an earlier choice left behind)');
      await shots(page, 'launch_empty', ['light']);
      await closeLaunch(page, dlg);
    } finally {
      await page.unroute('**/api/v1/images');
    }
  });

  await step('the Image field\'s placeholder names no image that does not exist', async () => {
    const catalog = await page.evaluate(async () => (await (await fetch('/api/v1/images', { credentials: 'same-origin' })).json()).images);
    const refs = new Set(catalog.flatMap((i) => [i.ref, ...(i.aliases ?? [])]));
    // With environments on offer, and with a catalog of unlabelled images
    // only (no environment: the placeholder is what guides then).
    for (const onlyUnlabelled of [false, true]) {
      if (onlyUnlabelled) {
        await page.route('**/api/v1/images', async (route) => {
          const resp = await route.fetch();
          const body = await resp.json();
          body.images = body.images.filter((i) => i.frameworks.length === 0 && i.family === i.name);
          await route.fulfill({ response: resp, json: body });
        });
      }
      const dlg = await openLaunch(page);
      const image = dlg.getByLabel('Image', { exact: true });
      if (!onlyUnlabelled) await dlg.getByRole('group', { name: 'Environment' }).waitFor({ timeout: WAIT });
      else await page.waitForTimeout(300);   // the routed catalog in place
      const ph = (await image.getAttribute('placeholder')) ?? '';
      const named = ph.match(/[A-Za-z0-9][\w.\-/]*:[\w.\-]+/g) ?? [];
      const missing = named.filter((n) => !refs.has(n));
      if (missing.length) throw new Error(`the placeholder '${ph}' names ${missing.join(', ')}, which no node has`);
      await closeLaunch(page, dlg);
      if (onlyUnlabelled) await page.unroute('**/api/v1/images');
    }
  });

  const waitEnded = (name) => page.evaluate(async (name) => {
    for (let i = 0; i < 20; i++) {
      const s = await (await fetch(`/api/v1/sessions/${name}?wait=1&timeout_s=30`, { credentials: 'same-origin' })).json();
      if (['TERMINATED', 'ERROR', 'CANCELLED'].includes(s.status)) {
        const log = await (await fetch(`/api/v1/sessions/${name}/logs`, { credentials: 'same-origin' })).text();
        return { ...s, log };
      }
    }
    return { status: 'still not ended' };
  }, name);
  const fillSmall = async (dlg, name) => {
    await dlg.getByLabel('Image', { exact: true }).fill(IMAGE);
    await dlg.getByLabel('Name').fill(name);
    await dlg.getByRole('spinbutton', { name: 'CPU' }).fill('0.25');
    await dlg.getByRole('spinbutton', { name: 'Memory' }).fill('0.25');
    await dlg.getByRole('spinbutton', { name: 'GPU' }).fill('0');
  };

  await step('a batch session from the dialog needs a command, runs it and ends TERMINATED', async () => {
    const dlg = await openLaunch(page);
    await fillSmall(dlg, 'batch1');
    await dlg.getByRole('radio', { name: 'Batch' }).check();
    const launchBtn = launchButton(dlg);
    if (!await launchBtn.isDisabled()) throw new Error('Launch is on for a batch session without a command');
    const err = await dlg.locator('.field', { has: page.getByLabel('Startup command') }).locator('.field-error').textContent();
    if (!err.includes('startup command')) throw new Error(`the command field says '${err}'`);
    await dlg.getByLabel('Startup command').fill('echo batch-says-$((6*7)); echo "uid=$(id -u)"');
    await dlg.locator('.estimate.fits').waitFor({ timeout: WAIT });
    await reviewAndLaunch(dlg);
    await dlg.waitFor({ state: 'hidden', timeout: WAIT });
    const s = await waitEnded('batch1');
    if (s.status !== 'TERMINATED' || s.type !== 'batch' || s.exit_code !== 0 || s.root)
      throw new Error(`batch1 is ${s.status}, type ${s.type}, exit code ${s.exit_code}, root ${s.root}`);
    if (!s.log.includes('batch-says-42') || !s.log.includes('uid=1000')) throw new Error(`batch1's log: ${s.log.slice(0, 200)}`);
  });

  await step('root is off, with the reason, where the policy forbids it', async () => {
    const dlg = await openLaunch(page);
    const root = dlg.getByRole('checkbox', { name: 'Run as root' });
    await page.waitForFunction((el) => el.disabled, await root.elementHandle(), { timeout: WAIT });
    const why = await dlg.locator('.root-option .hint').textContent();
    if (!why.includes('policy does not allow')) throw new Error(`the root option says '${why}'`);
    await closeLaunch(page, dlg);
  });

  await step('with a policy that allows root, a batch session as root runs as uid 0 and ends', async () => {
    const r = await apiCall(page, 'PUT', `/api/v1/config/${encodeURIComponent(`policy.${EMAIL}`)}`, { value: { allow_root: true } });
    if (r.status !== 200) throw new Error(`setting the admin's policy answered ${r.status}: ${r.body}`);
    const dlg = await openLaunch(page);
    const root = dlg.getByRole('checkbox', { name: 'Run as root' });
    await page.waitForFunction((el) => !el.disabled, await root.elementHandle(), { timeout: WAIT });
    await fillSmall(dlg, 'rootjob');
    await dlg.getByRole('radio', { name: 'Batch' }).check();
    await dlg.getByLabel('Startup command').fill('echo "uid=$(id -u)"');
    await root.check();
    await dlg.locator('.estimate.fits').waitFor({ timeout: WAIT });
    await reviewAndLaunch(dlg);
    await dlg.waitFor({ state: 'hidden', timeout: WAIT });
    const s = await waitEnded('rootjob');
    if (s.status !== 'TERMINATED' || !s.root || s.exit_code !== 0) throw new Error(`rootjob is ${s.status}, root ${s.root}, exit code ${s.exit_code}`);
    if (!s.log.includes('uid=0')) throw new Error(`rootjob's log: ${s.log.slice(0, 200)}`);
  });

  await step('a root launch the server refuses (403: the policy changed meanwhile) shows its words by Launch, and root turns off', async () => {
    const dlg = await openLaunch(page);
    const root = dlg.getByRole('checkbox', { name: 'Run as root' });
    await page.waitForFunction((el) => !el.disabled, await root.elementHandle(), { timeout: WAIT });
    await fillSmall(dlg, 'rootjob2');
    await dlg.getByLabel('Startup command').fill('sleep 1');
    await root.check();
    const r = await apiCall(page, 'PUT', `/api/v1/config/${encodeURIComponent(`policy.${EMAIL}`)}`, { value: null });
    if (r.status !== 200) throw new Error(`removing the admin's policy answered ${r.status}: ${r.body}`);
    await reviewAndLaunch(dlg);
    const alert = dlg.locator('.launch-foot').getByRole('alert');
    await alert.waitFor({ timeout: WAIT });
    const text = await alert.textContent();
    if (!text.includes('Cannot launch') || !text.includes('root')) throw new Error(`the dialog says '${text}'`);
    const box = await alert.boundingBox();
    const vp = page.viewportSize();
    if (!box || box.y < 0 || box.y + box.height > vp.height) throw new Error(`the error is out of sight at ${JSON.stringify(box)}`);
    await page.waitForFunction((el) => el.disabled && !el.checked, await root.elementHandle(), { timeout: WAIT });
    const st = await page.evaluate(async () => (await fetch('/api/v1/sessions/rootjob2', { credentials: 'same-origin' })).status);
    if (st !== 404) throw new Error(`rootjob2 exists (GET answered ${st})`);
    await closeLaunch(page, dlg);
  });

  await step('the status filter is kept in the URL and survives a reload', async () => {
    await page.locator('.filters').getByLabel('Status').selectOption('RUNNING');
    await page.waitForURL(/status=RUNNING/);
    await page.reload();
    await page.locator('tr[data-session]').first().waitFor({ timeout: WAIT });
    if (await page.locator('.filters').getByLabel('Status').inputValue() !== 'RUNNING') throw new Error('the filter is gone after a reload');
    const st = await page.$$eval('tr[data-session] .status', (els) => els.map((e) => e.textContent));
    if (st.some((s) => s !== 'RUNNING')) throw new Error(`rows shown: ${st.join(', ')}`);
    await page.locator('.filters').getByLabel('Sort by').selectOption('name');
    await page.waitForURL(/sort=name/);
    const names = await page.$$eval('tr[data-session]', (els) => els.map((e) => e.getAttribute('data-session')));
    if (names.join() !== [...names].sort().join()) throw new Error(`not sorted by name: ${names.join(', ')}`);
    await page.locator('.filters').getByLabel('Status').selectOption('');
  });

  let loggerId;
  await step('a click on a row opens the session\'s page, with its own URL', async () => {
    await page.locator('tr[data-session="logger"] td[data-label="Configuration"]').click();
    await page.waitForURL(/\/sessions\/[0-9a-f]+$/);
    loggerId = page.url().split('/').pop();
    await page.getByRole('heading', { name: 'logger', level: 1 }).waitFor({ timeout: WAIT });
    const hist = await page.locator('ol.timeline li').allTextContents();
    for (const want of ['PENDING', 'SCHEDULED', 'RUNNING'])
      if (!hist.some((h) => h.includes(want))) throw new Error(`the status history has no ${want}: ${hist.join(' | ')}`);
    const cfg = await page.locator('dl.props').textContent();
    if (!cfg.includes(IMAGE) || !cfg.includes(NODE)) throw new Error(`the configuration does not name the image and node: ${cfg}`);
    // Where its start's time went, from the status history: the total,
    // then the queue, the dispatch and the node's create, start and app
    // port, in seconds.
    const took = (await page.locator('[data-testid="start-breakdown"]').textContent()).trim();
    if (!/^\d+\.\d\d s: queue \d+\.\d\d s · dispatch \d+\.\d\d s · .*create \d+\.\d\d s · start \d+\.\d\d s · app port \d+\.\d\d s$/.test(took))
      throw new Error(`the start's breakdown reads "${took}"`);
  });

  await step('the session\'s page follows its log and finds a line', async () => {
    await page.locator('.log-box .log-line', { hasText: 'marker-LOGLINE' }).first().waitFor({ timeout: WAIT });
    const before = Number(await page.locator('.log-box').getAttribute('data-lines'));
    await page.waitForFunction((n) => Number(document.querySelector('.log-box')?.getAttribute('data-lines')) > n, before, { timeout: WAIT });
    // The search trims its words: "tick 2 marker" finds tick 2 alone,
    // however many lines the logger wrote by now (tick 20, 21, ...).
    await page.getByLabel('Search the log').fill('tick 2 marker');
    await page.locator('.log-box mark', { hasText: 'tick 2 marker' }).first().waitFor({ timeout: WAIT });
    const lines = await page.locator('.log-box .log-line').allTextContents();
    if (lines.some((l) => !l.includes('tick 2 marker'))) throw new Error(`the search shows other lines: ${lines.slice(0, 3).join(' | ')}`);
    await page.getByLabel('Search the log').fill('');
  });

  // Live usage: the plot must have points wherever the manager serves
  // GET /v1/sessions/{ref}/stats. Only a manager without the route (404
  // "no such route") may do without, and the page must say so; any other
  // answer (a 404 from the route itself included) fails.
  await step('the session\'s page plots its live usage (points on the CPU chart)', async () => {
    const probe = await page.evaluate(async (id) => {
      const r = await fetch(`/api/v1/sessions/${id}/stats`, { credentials: 'same-origin' });
      return { status: r.status, body: await r.text() };
    }, loggerId);
    const cpuChart = page.locator('figure.chart', { hasText: 'CPU' }).locator('.chart-box');
    if (probe.status === 200) {
      await page.waitForFunction(() => {
        const box = document.querySelector('figure.chart .chart-box');
        return box && Number(box.getAttribute('data-points')) > 0 && box.querySelector('canvas');
      }, null, { timeout: 90000 });
      const n = Number(await cpuChart.getAttribute('data-points'));
      if (!(n > 0)) throw new Error(`the CPU chart has ${n} points`);
    } else if (probe.status === 404 && probe.body.includes('no such route')) {
      await page.locator('.charts[data-stats="unavailable"]').waitFor({ timeout: WAIT });
      console.log(`# stats route absent (404: ${probe.body.slice(0, 120)}): the page says so; the points are checked where the route exists`);
    } else {
      throw new Error(`GET stats answered ${probe.status}: ${probe.body.slice(0, 200)}`);
    }
    await shots(page, 'session_detail', ['dark']);
  });

  // The memory chart's y-axis labels ("250 MiB" with the logger's 256 MiB
  // limit) are drawn on the canvas: their ink, found pixel by pixel left
  // of the plot, must lie inside the chart, off its left edge (a label
  // too wide for its axis starts left of the canvas: "50 MiB" is left).
  await step('the memory chart\'s y-axis labels are whole, inside the chart', async () => {
    await page.waitForFunction(() => {
      const fig = [...document.querySelectorAll('figure.chart')].find((f) => f.querySelector('figcaption')?.textContent === 'Memory');
      return fig && Number(fig.querySelector('.chart-box')?.getAttribute('data-points')) > 0 && fig.querySelector('canvas') && fig.querySelector('.u-over');
    }, null, { timeout: 90000 });
    await page.waitForTimeout(300);   // drawn
    const r = await page.evaluate(() => {
      const fig = [...document.querySelectorAll('figure.chart')].find((f) => f.querySelector('figcaption')?.textContent === 'Memory');
      const cv = fig.querySelector('canvas'), over = fig.querySelector('.u-over');
      const cr = cv.getBoundingClientRect(), or = over.getBoundingClientRect();
      const k = cv.width / cr.width;
      const x1 = Math.floor((or.left - cr.left) * k), y0 = Math.ceil((or.top - cr.top) * k), y1 = Math.floor((or.bottom - cr.top) * k);
      const px = cv.getContext('2d').getImageData(0, y0, Math.max(1, x1), Math.max(1, y1 - y0)).data;
      let left = Infinity, right = -1, n = 0;
      for (let y = 0; y < y1 - y0; y++) {
        for (let x = 0; x < x1; x++) {
          if (px[(y * x1 + x) * 4 + 3] > 0) { n++; left = Math.min(left, x); right = Math.max(right, x); }
        }
      }
      return { k, axisWidth: x1, left, right, n };
    });
    if (r.n === 0) throw new Error('no label is drawn left of the plot');
    if (r.left < 2 * r.k) throw new Error(`the labels' ink starts at x=${r.left} of the canvas: cut at its left edge (axis ${r.axisWidth} px wide)`);
  });

  await step('the charts\' legends have no empty time row ("Time: --")', async () => {
    const rows = await page.locator('.u-legend .u-series').evaluateAll((tr) => tr.filter((e) => e.getBoundingClientRect().height > 0).map((e) => e.textContent));
    if (!rows.length) throw new Error('no legend row is shown');
    const time = rows.filter((t) => /^\s*Time/.test(t));
    if (time.length) throw new Error(`a legend shows '${time[0]}'`);
  });

  await step('the session\'s page survives a reload, and Back returns to the list', async () => {
    await page.reload();
    await page.getByRole('heading', { name: 'logger', level: 1 }).waitFor({ timeout: WAIT });
    await page.goBack();
    await page.getByRole('heading', { name: 'Sessions', level: 1 }).waitFor({ timeout: WAIT });
    await page.locator('tr[data-session="logger"]').waitFor({ timeout: WAIT });
  });

  await step('a session\'s GPUs are numbered from 0, as gpu-info in it numbers them', async () => {
    // A session given the node's GPU 1: inside it, that is GPU 0.
    const gpuId = await page.evaluate(async () => (await (await fetch('/api/v1/sessions', { credentials: 'same-origin' })).json())
      .sessions.find((s) => s.status === 'RUNNING' && s.resources.fgpu > 0)?.id);
    if (!gpuId) throw new Error('no RUNNING session with a GPU to look at');
    await page.route(`**/api/v1/sessions/${gpuId}`, quiet(async (route) => {
      const resp = await route.fetch();
      const body = await resp.json();
      body.gpus = (body.gpus ?? []).map((g) => ({ ...g, index: 1 }));
      await route.fulfill({ response: resp, json: body });
    }));
    try {
      await page.goto(new URL(`/sessions/${gpuId}`, WEB).href);
      const li = page.locator('dl.props li[data-gpu="0"]');
      await li.waitFor({ timeout: WAIT });
      const text = await li.textContent();
      if (!text.startsWith('GPU 0 (the node\'s GPU 1)')) throw new Error(`the GPU is listed as '${text}'`);
    } finally {
      await page.unroute(`**/api/v1/sessions/${gpuId}`);
    }
    await page.goto(new URL(`/sessions/${loggerId}`, WEB).href);
    await page.getByRole('heading', { name: 'logger', level: 1 }).waitFor({ timeout: WAIT });
  });

  await step('the Nodes page drains a node with a confirmation that its sessions keep running, then undrains it', async () => {
    await page.getByRole('link', { name: 'Nodes' }).click();
    const card = page.locator(`article[data-node="${NODE}"]`);
    await card.waitFor({ timeout: WAIT });
    const gpuText = await card.locator('[data-gpu="0"]').textContent();
    if (!gpuText.includes('2 fGPU of 2 fGPU allocated')) throw new Error(`GPU 0 does not show its allocation: ${gpuText}`);
    // Its memory once ("8 GiB (8 GiB)" repeated the model's name), and bars one can see (7 px were a hairline).
    const nameLine = await card.locator('[data-gpu="0"] .gpu-name').textContent();
    if ((nameLine.match(/\d+ GiB/g) ?? []).length !== 1) throw new Error(`the GPU's line reads '${nameLine}'`);
    const h = await card.locator('.bar-track').first().evaluate((e) => e.getBoundingClientRect().height);
    if (h < 10) throw new Error(`the bars are ${h} px tall`);
    const sessionsText = await card.locator('ul.node-sessions').textContent();
    if (!sessionsText.includes('logger')) throw new Error(`the node's sessions do not list logger: ${sessionsText}`);
    await shots(page, 'nodes', ['dark']);
    await card.getByRole('button', { name: `Drain ${NODE}` }).click();
    const dlg = page.getByRole('dialog', { name: 'Drain node' });
    await dlg.waitFor();
    const text = await dlg.textContent();
    if (!/keeps? running/.test(text)) throw new Error(`the confirmation does not say the sessions keep running: ${text}`);
    await dlg.getByRole('button', { name: 'Drain' }).click();
    await card.locator('.drained-badge').waitFor({ timeout: WAIT });
    const st = await page.evaluate(async () => (await (await fetch('/api/v1/sessions/logger', { credentials: 'same-origin' })).json()).status);
    if (st !== 'RUNNING') throw new Error(`logger is ${st} after the drain`);
    await card.getByRole('button', { name: `Undrain ${NODE}` }).click();
    const dlg2 = page.getByRole('dialog', { name: 'Undrain node' });
    await dlg2.getByRole('button', { name: 'Undrain' }).click();
    await card.locator('.drained-badge').waitFor({ state: 'detached', timeout: WAIT });
  });

  await step('the Admin page\'s user actions are a table cell, and its selects show their whole text', async () => {
    await page.getByRole('link', { name: 'Admin' }).click();
    const cell = page.locator('table.users tbody tr').first().locator('td[data-label="Actions"]');
    await cell.waitFor({ timeout: WAIT });
    const d = await cell.evaluate((e) => getComputedStyle(e).display);
    if (d !== 'table-cell') throw new Error(`the actions cell is display:${d}`);
    const form = page.getByRole('form', { name: 'Scheduler and GPU settings' });
    for (const label of ['Queue policy', 'Node selector']) {
      const r = await form.getByLabel(label).evaluate((sel) => {
        const cs = getComputedStyle(sel);
        const c = document.createElement('canvas').getContext('2d');
        c.font = `${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
        const text = sel.options[sel.selectedIndex]?.text ?? '';
        // Room for the text: the box less its padding and the arrow (about 24 px).
        const room = sel.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight) - 24;
        return { text, need: c.measureText(text).width, room };
      });
      if (r.need > r.room) throw new Error(`${label} shows '${r.text}' (${Math.round(r.need)} px) in ${Math.round(r.room)} px`);
    }
  });

  await step('the settings refuse a bad value in the server\'s words, and save a good one', async () => {
    const form = page.getByRole('form', { name: 'Scheduler and GPU settings' });
    await form.getByLabel('fGPU quantum').fill('0.3');
    await form.getByRole('button', { name: 'Save settings' }).click();
    await form.getByRole('alert').filter({ hasText: 'fgpu_quantum must divide 1' }).waitFor({ timeout: WAIT });
    await form.getByLabel('fGPU quantum').fill('0.05');
    await form.getByLabel('Queue policy').selectOption('drf');
    await form.getByRole('button', { name: 'Save settings' }).click();
    await form.getByRole('status').filter({ hasText: 'Saved' }).waitFor({ timeout: WAIT });
    const cfg = await page.evaluate(async () => (await fetch('/api/v1/config', { credentials: 'same-origin' })).json());
    if (cfg.queue_policy !== 'drf' || cfg.fgpu_quantum !== 0.05) throw new Error(`the settings are ${JSON.stringify(cfg)}`);
  });

  await step('the cluster settings show what is in force, refuse a bad value in words and save a good one', async () => {
    const form = page.getByRole('form', { name: 'Cluster settings' });
    const hosts = form.getByLabel('Storage hosts');
    // In force: said in words under the field, not a greyed placeholder that reads as an example.
    if (await hosts.getAttribute('placeholder')) throw new Error(`the field has placeholder '${await hosts.getAttribute('placeholder')}'`);
    const inForce = await form.locator('.field', { has: page.getByLabel('Storage hosts') }).locator('[data-testid="in-force"]').textContent();
    if (!/^In force: local:\//.test(inForce)) throw new Error(`the storage hosts field says '${inForce}'`);
    await hosts.fill('local:relative/path');
    await form.getByRole('button', { name: 'Save cluster settings' }).click();
    await form.getByRole('alert').filter({ hasText: 'storage_hosts' }).waitFor({ timeout: WAIT });
    await hosts.fill('');
    await form.getByLabel('Session log files').fill('7');
    await form.getByRole('button', { name: 'Save cluster settings' }).click();
    await form.getByRole('status').filter({ hasText: 'Saved' }).waitFor({ timeout: WAIT });
    const cfg = await page.evaluate(async () => (await fetch('/api/v1/config', { credentials: 'same-origin' })).json());
    if (cfg.log_max_files !== 7 || cfg.storage_hosts !== null) throw new Error(`the settings are ${JSON.stringify(cfg)}`);
  });

  await step('a default policy is set from the Policies table; a bad one is refused in words', async () => {
    await page.getByRole('button', { name: 'Edit the policy of default' }).click();
    const dlg = page.getByRole('dialog', { name: 'Policy: default' });
    await dlg.getByLabel('Max sessions').fill('-1');
    await dlg.getByRole('button', { name: 'Save policy' }).click();
    await dlg.getByRole('alert').filter({ hasText: 'max_sessions' }).waitFor({ timeout: WAIT });
    await dlg.getByLabel('Max sessions').fill('8');
    await dlg.getByLabel('Max memory').fill('16g');
    await dlg.getByRole('button', { name: 'Save policy' }).click();
    await dlg.waitFor({ state: 'hidden', timeout: WAIT });
    // The table is read again after the save: wait for it, not for how fast.
    await page.locator('tr[data-policy="default"]', { hasText: 'max sessions 8' }).waitFor({ timeout: WAIT }).catch(() => {});
    const row = await page.locator('tr[data-policy="default"]').textContent();
    if (!row.includes('max sessions 8') || !row.includes('max memory 16g')) throw new Error(`the default policy row says: ${row}`);
    await shots(page, 'admin_settings', ['light']);
  });

  await step('removing a policy asks first; Cancel keeps it', async () => {
    await page.getByRole('button', { name: 'Remove the policy of default' }).click();
    const dlg = page.getByRole('dialog', { name: 'Remove policy' });
    await dlg.waitFor({ timeout: WAIT });
    const text = await dlg.textContent();
    if (!text.includes('max sessions 8')) throw new Error(`the confirmation says: ${text}`);
    await dlg.getByRole('button', { name: 'Cancel' }).click();
    await dlg.waitFor({ state: 'hidden', timeout: WAIT });
    const cfg = await page.evaluate(async () => (await fetch('/api/v1/config', { credentials: 'same-origin' })).json());
    if (!cfg.policies?.default) throw new Error('the default policy is gone after Cancel');
  });

  await step('the Data page\'s open folder and directory are in the address: a reload keeps them', async () => {
    const mk = await apiCall(page, 'POST', '/api/v1/folders/ui-folder-1/mkdir', { path: 'results' });
    await page.getByRole('link', { name: 'Data' }).click();
    await page.getByRole('button', { name: 'Browse ui-folder-1' }).click();
    await page.waitForURL(/\/data\/ui-folder-1$/);
    if (mk.status < 300) {
      await page.getByRole('button', { name: 'Open directory results' }).click();
      await page.waitForURL(/\/data\/ui-folder-1\?path=results$/);
    }
    await page.reload();
    await page.getByRole('button', { name: '← All folders' }).waitFor({ timeout: WAIT });
    if (mk.status < 300) await page.locator('nav.breadcrumb', { hasText: 'results' }).waitFor({ timeout: WAIT });
    await page.goBack();
    await page.locator('tr[data-folder="ui-folder-1"]').waitFor({ timeout: WAIT });
  });

  // 400 pixels: every page fits; the screenshots of the narrow layout.
  await page.setViewportSize(NARROW);
  for (const [name, url, ready, schemes] of [
    ['sessions', '/sessions', 'tr[data-session="logger"]', ['light']],
    ['session_detail', `/sessions/${loggerId}`, '.log-box', ['dark']],
    ['nodes', '/nodes', 'article.node', []],
    ['admin', '/admin', 'tr[data-policy="default"]', []],
    ['data', '/data', 'main h2', []],
  ]) {
    await step(`at 400 pixels the ${name.replace('_', ' ')} page has no sideways scroll`, async () => {
      await page.goto(new URL(url, WEB).href);
      await page.locator(ready).first().waitFor({ timeout: WAIT });
      await page.waitForTimeout(500);   // charts and meters in place
      await noSidewaysScroll(page, name);
      await shots(page, `${name}_narrow`, schemes);
    });
  }
  // A long email in a narrow column: a line may break before its '@'
  // only, never inside a word; cut short, the title has it all.
  await step('at 400 pixels a long email in the users table breaks before its @ only, never mid-word', async () => {
    const email = 'maximiliane.alexandra.longname@research-and-development.example.org';
    const made = await apiCall(page, 'POST', '/api/v1/users', { email, password: 'long-email-pw-1' });
    if (made.status !== 201) throw new Error(`creating ${email} answered ${made.status}: ${made.body}`);
    await page.goto(new URL('/admin', WEB).href);
    const cell = page.locator('td[data-label="Email"]', { hasText: 'maximiliane' });
    await cell.waitFor({ timeout: WAIT });
    const r = await cell.evaluate((td) => {
      // Each character's line, by the top of its box.
      const walker = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
      const chars = [];
      for (let t = walker.nextNode(); t; t = walker.nextNode()) {
        for (let i = 0; i < t.data.length; i++) {
          const range = document.createRange();
          range.setStart(t, i); range.setEnd(t, i + 1);
          const rect = range.getClientRects()[0];
          if (rect) chars.push({ c: t.data[i], top: Math.round(rect.top) });
        }
      }
      const text = chars.map((c) => c.c).join('');
      const breaks = [];
      for (let i = 1; i < chars.length; i++) if (chars[i].top > chars[i - 1].top + 2) breaks.push(i);
      const titled = td.querySelector('[title]')?.getAttribute('title') ?? td.getAttribute('title');
      return { text, breaks, titled, width: td.getBoundingClientRect().width };
    });
    if (r.text !== email) throw new Error(`the cell holds '${r.text}'`);
    const bad = r.breaks.filter((i) => r.text[i] !== '@');
    if (bad.length) throw new Error(`the email breaks mid-word: ${r.breaks.map((i) => `'${r.text.slice(0, i)}' | '${r.text.slice(i)}'`).join('; ')}`);
    if (r.titled !== email) throw new Error(`the email's title is '${r.titled}'`);
  });

  await step('at 400 pixels an image name breaks after a / or before a : only, never mid-token', async () => {
    await page.goto(new URL('/sessions', WEB).href);
    const cell = page.locator('tr[data-session="logger"] td[data-label="Image"]');
    await cell.waitFor({ timeout: WAIT });
    // Squeezed to 6 characters' width, so that it must break somewhere.
    await cell.evaluate((td) => { td.querySelector('.name-ref').style.width = '6ch'; });
    const r = await cell.evaluate((td) => {
      const walker = document.createTreeWalker(td.querySelector('.name-ref'), NodeFilter.SHOW_TEXT);
      const chars = [];
      for (let t = walker.nextNode(); t; t = walker.nextNode()) {
        for (let i = 0; i < t.data.length; i++) {
          const range = document.createRange();
          range.setStart(t, i); range.setEnd(t, i + 1);
          const rect = range.getClientRects()[0];
          if (rect) chars.push({ c: t.data[i], top: Math.round(rect.top) });
        }
      }
      const text = chars.map((c) => c.c).join('');
      const breaks = [];
      for (let i = 1; i < chars.length; i++) if (chars[i].top > chars[i - 1].top + 2) breaks.push(i);
      return { text, breaks };
    });
    const bad = r.breaks.filter((i) => r.text[i - 1] !== '/' && r.text[i] !== ':' && r.text[i] !== '@');
    if (bad.length) throw new Error(`'${r.text}' breaks mid-token: ${bad.map((i) => `${r.text.slice(0, i)}|${r.text.slice(i)}`).join('; ')}`);
  });

  await step('at 400 pixels the launch dialog has no sideways scroll', async () => {
    await page.goto(new URL('/sessions', WEB).href);
    await page.getByRole('button', { name: 'Start' }).click();
    await page.getByRole('dialog', { name: 'Start a session' }).waitFor();
    await page.waitForTimeout(500);
    await noSidewaysScroll(page, 'launch dialog');
    
  });
} catch (e) {
  failed++;
  console.log(`FAIL the test stopped: ${String(e.message).split('\n')[0]}`);
} finally {
  await ctx.close();
}
console.log('# done');
process.exit(failed ? 1 : 0);
