// The browser half of test_envq_ui.sh: the Environments page (an admin's
// catalog, a user's own images) and the Queue page. Prints "ok ..." /
// "FAIL ..." lines and "# done" at the end; the shell side counts them.
// Waits are on states reached (rows, dialogs, words), never on how fast.
import { createRequire } from 'node:module';
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';

const env = (k) => { if (!process.env[k]) throw new Error(`${k} is not set`); return process.env[k]; };
const require = createRequire(path.join(env('UI_SRC'), 'package.json'));
const { chromium } = require('playwright-core');

const WEB = env('WEB_URL'), SHOTS = env('SHOTS'), TESSERA = env('TESSERA_BIN');
const TEST_IMAGE = env('TEST_IMAGE'), RM_TAG = env('RM_TAG'), PRIVATE_REF = env('PRIVATE_REF'), NODE = env('NODE');
const CORES = Number(env('CORES'));
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
const shot = (page, name) => page.screenshot({ path: path.join(SHOTS, `${name}.png`) });
// The CLI as the admin or the user: stdout (throws with its error's words).
const cli = (conf, ...args) => {
  try {
    return execFileSync(TESSERA, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, TESSERA_CONFIG: conf } });
  } catch (e) { throw new Error(`tessera ${args.join(' ')}: ${String(e.stderr).trim()}`); }
};
const admin = (...a) => cli(env('ADMIN_CONF'), ...a);
const user = (...a) => cli(env('USER_CONF'), ...a);
// An image's aliases as `tessera image ls --all --json` lists them.
const cliAliases = (ref) => {
  const r = JSON.parse(admin('image', 'ls', '--all', '--json'));
  return ((Array.isArray(r) ? r : r.images).find((i) => i.ref === ref)?.aliases ?? []);
};
// Polls f until it returns true (a state reached), up to WAIT.
async function until(what, f) {
  const end = Date.now() + WAIT;
  for (;;) {
    if (await f()) return;
    if (Date.now() > end) throw new Error(`${what}: not reached`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function login(page, email, password) {
  await page.goto(WEB);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: WAIT });
}
const nav = (page, name) => page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name }).click();

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const actx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await actx.newPage();
  const row = (ref) => page.locator(`table.env-catalog tr[data-ref="${ref}"]`);
  // The catalog's names are canonical (docker.io/library/... for a bare
  // name): the test image's row is the one whose ref ends in its name.
  let testRef = '', rmRef = '';
  const byName = (n) => page.locator(`table.env-catalog tr[data-ref="${n}"], table.env-catalog tr[data-ref$="/${n}"]`);

  await step('an admin opens Environments: the catalog lists the test image with its node and size', async () => {
    await login(page, 'admin@tessera.local', env('ADMIN_PASSWORD'));
    await nav(page, 'Environments');
    await page.getByRole('heading', { name: 'Image catalog' }).waitFor({ timeout: WAIT });
    if (!(await page.getByRole('tab', { name: 'Catalog' }).getAttribute('aria-selected'))?.includes('true'))
      throw new Error('the Catalog tab is not the one shown');
    const r = byName(TEST_IMAGE);
    await r.first().waitFor({ timeout: WAIT });
    testRef = (await r.first().getAttribute('data-ref')) ?? '';
    if (!testRef.endsWith(TEST_IMAGE)) throw new Error(`row ${testRef}`);
    const nodes = await row(testRef).locator('td[data-label="Nodes"]').textContent();
    if (!nodes.includes(NODE)) throw new Error(`its nodes are '${nodes}', not ${NODE}`);
    const size = await row(testRef).locator('td[data-label="Size"]').textContent();
    if (!/^\d+(\.\d+)? (MiB|GiB)$/.test(size.trim()) || size.startsWith('0 ')) throw new Error(`its size is '${size}'`);
    // A private image is its owner's: not in the catalog.
    if (await page.locator(`table.env-catalog tr[data-ref="${PRIVATE_REF}"]`).count()) throw new Error('a private image is in the catalog');
    await page.getByLabel('Filter').fill('tessera-test');
    await shot(page, 'environments_catalog');
    await page.getByLabel('Filter').fill('');
  });

  await step('Alias… sets an alias the CLI launches by; its × asks before removing it', async () => {
    await row(testRef).getByRole('button', { name: `Add an alias for ${testRef}` }).click();
    const dlg = page.getByRole('dialog', { name: `Alias for ${testRef}` });
    await dlg.waitFor({ timeout: WAIT });
    await dlg.getByRole('button', { name: 'Set alias' }).click();
    await dlg.getByText('Give the alias a name').waitFor({ timeout: WAIT });   // empty: said, not sent
    await dlg.getByLabel('Alias').fill('Bad Alias');
    await dlg.getByRole('button', { name: 'Set alias' }).click();
    await dlg.locator('.field-error').waitFor({ timeout: WAIT });              // the server's words
    await dlg.getByLabel('Alias').fill('envq-box');
    await dlg.getByRole('button', { name: 'Set alias' }).click();
    await dlg.waitFor({ state: 'hidden', timeout: WAIT });
    await page.getByRole('status').filter({ hasText: 'Alias envq-box now names' }).waitFor({ timeout: WAIT });
    await row(testRef).locator('.alias-chip', { hasText: 'envq-box' }).waitFor({ timeout: WAIT });
    if (!cliAliases(testRef).includes('envq-box')) throw new Error(`the CLI's aliases: ${cliAliases(testRef)}`);
    await row(testRef).getByRole('button', { name: 'Remove alias envq-box' }).click();
    const c = page.getByRole('dialog', { name: 'Remove alias envq-box?' });
    await c.waitFor({ timeout: WAIT });
    await c.getByRole('button', { name: 'Cancel' }).click();
    await c.waitFor({ state: 'hidden' });
    if (!cliAliases(testRef).includes('envq-box')) throw new Error('Cancel removed it');
    await row(testRef).getByRole('button', { name: 'Remove alias envq-box' }).click();
    await c.getByRole('button', { name: 'Remove alias' }).click();
    await row(testRef).locator('.alias-chip').waitFor({ state: 'detached', timeout: WAIT });
    if (cliAliases(testRef).includes('envq-box')) throw new Error('still an alias');
  });

  await step('Rescan nodes says how many nodes answered; Remove asks, then deletes the throwaway tag', async () => {
    await page.getByRole('button', { name: 'Rescan nodes' }).click();
    await page.getByRole('status').filter({ hasText: /Rescanned: 1 of 1 node answered; \d+ images? in the catalog/ }).waitFor({ timeout: WAIT });
    const r = byName(RM_TAG);
    await r.first().waitFor({ timeout: WAIT });
    rmRef = (await r.first().getAttribute('data-ref')) ?? '';
    await row(rmRef).getByRole('button', { name: `Remove ${rmRef}` }).click();
    const c = page.getByRole('dialog', { name: `Remove ${rmRef}?` });
    await c.waitFor({ timeout: WAIT });
    const words = await c.textContent();
    if (!words.includes(NODE)) throw new Error(`the confirmation does not name the node: ${words}`);
    await shot(page, 'environments_remove_confirm');
    await c.getByRole('button', { name: 'Remove', exact: true }).click();
    await page.getByRole('status').filter({ hasText: `${rmRef} removed from ${NODE}` }).waitFor({ timeout: WAIT });
    await row(rmRef).waitFor({ state: 'detached', timeout: WAIT });
  });

  await step('the My environments tab lists the admin\'s own images only (none here)', async () => {
    await page.getByRole('tab', { name: 'My environments' }).click();
    await page.getByText('No private images yet').waitFor({ timeout: WAIT });
    if (!page.url().endsWith('/environments?tab=mine')) throw new Error(`address ${page.url()}`);
  });

  // ---- the user ----
  const uctx = await browser.newContext({ viewport: { width: 1280, height: 800 }, permissions: ['clipboard-read', 'clipboard-write'] });
  const upage = await uctx.newPage();
  const mine = () => upage.locator(`table.env-mine tr[data-ref="${PRIVATE_REF}"]`);

  await step('a user\'s Environments page is their own images: the converted session\'s image, copy and launch', async () => {
    await login(upage, env('USER_EMAIL'), env('USER_PASSWORD'));
    await nav(upage, 'Environments');
    await upage.getByRole('heading', { name: 'My environments' }).waitFor({ timeout: WAIT });
    if (await upage.getByRole('tab').count()) throw new Error('a user sees the catalog tabs');
    await mine().waitFor({ timeout: WAIT });
    const from = await mine().locator('td[data-label="Made from"]').textContent();
    if (!from.includes('work')) throw new Error(`made from '${from}'`);
    const nodes = await mine().locator('td[data-label="Nodes"]').textContent();
    if (!nodes.includes(NODE)) throw new Error(`nodes '${nodes}'`);
    await mine().getByRole('button', { name: `Copy the name ${PRIVATE_REF}` }).click();
    await mine().locator('.copy-state').filter({ hasText: 'Copied' }).waitFor({ timeout: WAIT });
    const clip = await upage.evaluate(() => navigator.clipboard.readText());
    if (clip !== PRIVATE_REF) throw new Error(`the clipboard has '${clip}'`);
    await shot(upage, 'environments_mine');
  });

  await step('Launch opens the launcher with the image in its Image field, and starts a session from it', async () => {
    await mine().getByRole('button', { name: `Launch a session from ${PRIVATE_REF}` }).click();
    const dlg = upage.getByRole('dialog', { name: 'Start a session' });
    await dlg.waitFor({ timeout: WAIT });
    const typed = await dlg.getByLabel('Image', { exact: true }).inputValue();
    if (typed !== PRIVATE_REF) throw new Error(`the Image field has '${typed}'`);
    if (upage.url().includes('launch=')) throw new Error(`the address keeps ?launch=: ${upage.url()}`);
    await dlg.getByLabel('Name').fill('from-env');
    await dlg.getByRole('spinbutton', { name: 'CPU' }).fill('0.25');
    await dlg.getByRole('spinbutton', { name: 'Memory' }).fill('0.25');
    // The launcher's review step, then Launch.
    await dlg.getByRole('button', { name: 'Review', exact: true }).click();
    await dlg.getByRole('button', { name: 'Launch', exact: true }).click();
    await dlg.waitFor({ state: 'hidden', timeout: WAIT });
    const s = JSON.parse(user('session', 'info', 'from-env', '--json'));
    if (s.image !== PRIVATE_REF) throw new Error(`the session's image is ${s.image}`);
  });
  user('session', 'rm', 'from-env');

  await step('after a conversion, the Ready state offers "Launch from it" and a copy button', async () => {
    user('session', 'create', TEST_IMAGE, '--name', 'work2', '--cpu', '0.25', '--mem', '16m', '--wait');
    await nav(upage, 'Sessions');
    await upage.getByRole('button', { name: 'Convert work2 to image' }).click();
    const dlg = upage.getByRole('dialog', { name: 'Convert to image' });
    await dlg.waitFor({ timeout: WAIT });
    await dlg.getByLabel('Tag').fill('r1');
    await dlg.getByRole('button', { name: 'Convert' }).click();
    await dlg.getByText('Ready:').waitFor({ timeout: 3 * WAIT });
    const ref = (await dlg.locator('code.image-ref').textContent()).trim();
    if (!/^tessera-private\/dana-.*\/work2:r1$/.test(ref)) throw new Error(`ready as '${ref}'`);
    await dlg.getByRole('button', { name: `Copy the name ${ref}` }).click();
    await dlg.locator('.copy-state').filter({ hasText: 'Copied' }).waitFor({ timeout: WAIT });
    if (await upage.evaluate(() => navigator.clipboard.readText()) !== ref) throw new Error('the clipboard');
    await shot(upage, 'commit_ready_launch');
    await dlg.getByRole('button', { name: 'Launch from it' }).click();
    const launch = upage.getByRole('dialog', { name: 'Start a session' });
    await launch.waitFor({ timeout: WAIT });
    const typed = await launch.getByLabel('Image', { exact: true }).inputValue();
    if (typed !== ref) throw new Error(`the Image field has '${typed}'`);
    await launch.getByRole('button', { name: 'Cancel' }).click();
    await launch.waitFor({ state: 'hidden', timeout: WAIT });
    // Closed without launching: the next Start is an ordinary one.
    await upage.getByRole('button', { name: 'Start' }).click();
    await launch.waitFor({ timeout: WAIT });
    if (await launch.getByLabel('Image', { exact: true }).inputValue() !== '') throw new Error('Start kept the image');
    await launch.getByRole('button', { name: 'Cancel' }).click();
    user('session', 'rm', 'work2');
    user('image', 'rm', ref);
  });

  // ---- the queue ----
  await step('the Queue page shows the waiting sessions with position, priority and reason', async () => {
    admin('session', 'create', TEST_IMAGE, '--name', 'hog', '--cpu', String(CORES), '--mem', '16m', '--wait');
    admin('session', 'create', TEST_IMAGE, '--name', 'p1', '--cpu', '1', '--mem', '16m');
    admin('session', 'create', TEST_IMAGE, '--name', 'p2', '--cpu', '1', '--mem', '16m');
    await nav(page, 'Queue');
    await page.getByRole('heading', { name: 'Queue' }).waitFor({ timeout: WAIT });
    const p1 = page.locator('table.queue tr[data-session="p1"]'), p2 = page.locator('table.queue tr[data-session="p2"]');
    await p1.locator('td.queue-pos', { hasText: /^1$/ }).waitFor({ timeout: WAIT });
    await p2.locator('td.queue-pos', { hasText: /^2$/ }).waitFor({ timeout: WAIT });
    await p2.locator('td.queue-reason', { hasText: 'queued behind p1' }).waitFor({ timeout: WAIT });
    const reason = await p1.locator('td.queue-reason').textContent();
    if (!/needs|waiting/.test(reason)) throw new Error(`p1's reason: ${reason}`);
    if ((await p2.locator('td[data-label="Priority"]').textContent()).trim() !== '0') throw new Error('p2 priority');
    await shot(page, 'queue');
  });

  await step('History lists the passes that looked at p2 and why it did not start', async () => {
    await page.locator('table.queue tr[data-session="p2"]').getByRole('button', { name: 'Scheduling history of p2' }).click();
    const dlg = page.getByRole('dialog', { name: 'Scheduling history of p2' });
    await dlg.waitFor({ timeout: WAIT });
    const hrow = dlg.locator('table.queue-history tbody tr', { hasText: 'queued behind p1' });
    await hrow.waitFor({ timeout: WAIT });
    // Passes go on while it waits: the count grows to 2 or more.
    await until('two passes', async () => Number((await hrow.locator('td[data-label="Passes"]').textContent()).trim()) >= 2);
    await dlg.getByText(/\d+ scheduling passes looked at it/).waitFor({ timeout: WAIT });
    await shot(page, 'queue_history');
    await dlg.getByRole('button', { name: 'Close' }).click();
    await dlg.waitFor({ state: 'hidden' });
  });

  await step('the admin moves p2 to the front: priority 1, position 1', async () => {
    await page.locator('table.queue tr[data-session="p2"]').getByRole('button', { name: 'Move p2' }).click();
    const dlg = page.getByRole('dialog', { name: 'Move p2 in the queue' });
    await dlg.waitFor({ timeout: WAIT });
    await dlg.getByLabel('Priority').fill('101');
    await dlg.getByText('A whole number from 0 to 100').waitFor({ timeout: WAIT });
    await dlg.getByRole('button', { name: 'Move to front' }).click();
    await dlg.waitFor({ state: 'hidden', timeout: WAIT });
    await page.getByRole('status').filter({ hasText: 'p2: priority 1 (was 0)' }).waitFor({ timeout: WAIT });
    const p2 = page.locator('table.queue tr[data-session="p2"]');
    await p2.locator('td.queue-pos', { hasText: /^1$/ }).waitFor({ timeout: WAIT });
    await page.locator('table.queue tr[data-session="p1"] td.queue-reason', { hasText: 'queued behind p2' }).waitFor({ timeout: WAIT });
    const q = JSON.parse(admin('queue', 'ls', '--json'));
    if (q.sessions[0].name !== 'p2' || q.sessions[0].priority !== 1) throw new Error(`the CLI's queue: ${JSON.stringify(q.sessions.map((s) => [s.name, s.priority]))}`);
  });

  await step('the admin cancels p2 after its confirmation: it leaves the queue, CANCELLED', async () => {
    await page.locator('table.queue tr[data-session="p2"]').getByRole('button', { name: 'Cancel p2' }).click();
    const c = page.getByRole('dialog', { name: 'Cancel p2?' });
    await c.waitFor({ timeout: WAIT });
    await c.getByRole('button', { name: 'Cancel session' }).click();
    await page.locator('table.queue tr[data-session="p2"]').waitFor({ state: 'detached', timeout: WAIT });
    await page.locator('table.queue tr[data-session="p1"] td.queue-pos', { hasText: /^1$/ }).waitFor({ timeout: WAIT });
    await until('p2 CANCELLED', () => JSON.parse(admin('session', 'info', 'p2', '--json')).status === 'CANCELLED');
  });

  await step('at 400 px the Queue page does not scroll sideways', async () => {
    await page.setViewportSize({ width: 400, height: 800 });
    const wide = await page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth + 1);
    if (wide) throw new Error('the page is wider than 400 px');
    await nav(page, 'Environments');
    await page.getByRole('heading', { name: 'Image catalog' }).waitFor({ timeout: WAIT });
    await page.locator('table.env-catalog tbody tr').first().waitFor({ timeout: WAIT });
    if (await page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth + 1)) throw new Error('Environments is wider than 400 px');
  });
} catch {
  // The failing step said why.
} finally {
  await browser.close();
}
if (!failed) console.log('# done');
process.exit(failed ? 1 : 0);
