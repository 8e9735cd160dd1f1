// The browser half of test_credentials_ui.sh: the Credentials page as a
// user who was made by an admin and has never had a key of their own. Prints
// "ok ..." / "FAIL ..." lines and "# done" at the end; the shell side counts
// them. Waits are on states reached (rows, dialogs, words), never on how fast.
import { createRequire } from 'node:module';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync, chmodSync } from 'node:fs';
import path from 'node:path';

const env = (k) => { if (!process.env[k]) throw new Error(`${k} is not set`); return process.env[k]; };
const require = createRequire(path.join(env('UI_SRC'), 'package.json'));
const { chromium } = require('playwright-core');

const WEB = env('WEB_URL'), EMAIL = env('USER_EMAIL'), PASSWORD = env('USER_PASSWORD');
const SHOTS = env('SHOTS'), WORK = env('WORK_DIR'), ADMIN_KEY = env('ADMIN_ACCESS_KEY');
const TESSERA = env('TESSERA_BIN');
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
// The CLI with a client.conf of its own: {ok, out} (stdout, or the error's words).
const cliWith = (conf, ...args) => {
  try {
    return { ok: true, out: execFileSync(TESSERA, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, TESSERA_CONFIG: conf } }) };
  } catch (e) { return { ok: false, out: String(e.stderr) }; }
};

async function login(page) {
  await page.goto(WEB);
  await page.getByLabel('Email').fill(EMAIL);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: WAIT });
}
const rows = (page) => page.locator('table.keys tbody tr');

const ctx = await chromium.launchPersistentContext(env('PROFILE_DIR'), {
  executablePath: '/usr/bin/chromium',
  headless: true,
  acceptDownloads: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  viewport: { width: 1200, height: 760 },
});
try {
  const page = ctx.pages()[0] ?? await ctx.newPage();
  let mainKey = '', made = '', secret = '';

  await step('a user logs in and opens Credentials: one key, the main one this browser signs with', async () => {
    await login(page);
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Credentials' }).click();
    await page.getByRole('heading', { name: 'Credentials', exact: true }).waitFor({ timeout: WAIT });
    await page.locator('table.keys .chip.main-key', { hasText: 'this browser' }).waitFor({ timeout: WAIT });
    if (await rows(page).count() !== 1) throw new Error(`${await rows(page).count()} keys listed`);
    mainKey = (await rows(page).first().getAttribute('data-key')) ?? '';
    if (!/^TK[0-9A-F]{18}$/.test(mainKey)) throw new Error(`main key ${mainKey}`);
    if (await page.locator(`tr[data-key="${ADMIN_KEY}"]`).count()) throw new Error('the admin\'s key is listed');
  });

  await step('Create key shows the new pair once, with the secret', async () => {
    await page.getByLabel('Label').fill('laptop');
    await page.getByRole('button', { name: 'Create key' }).click();
    const dlg = page.getByRole('dialog', { name: 'New API key' });
    await dlg.waitFor({ timeout: WAIT });
    made = (await dlg.locator('code[data-field="access_key"]').textContent()) ?? '';
    secret = (await dlg.locator('code[data-field="secret_key"]').textContent()) ?? '';
    if (!/^TK[0-9A-F]{18}$/.test(made) || !/^[0-9a-f]{40}$/.test(secret)) throw new Error(`pair ${made} ${secret}`);
    await dlg.getByText('the secret is not shown again').waitFor();
    if (!(await dlg.getByLabel('API endpoint').inputValue()).startsWith('http')) throw new Error('no endpoint filled in');
    await shot(page, 'credentials_new_key');
  });

  const conf = path.join(WORK, 'client.conf');
  await step('Download client.conf saves the format tessera login writes, and the CLI signs with it', async () => {
    const dlg = page.getByRole('dialog', { name: 'New API key' });
    const [dl] = await Promise.all([
      page.waitForEvent('download', { timeout: WAIT }),
      dlg.getByRole('button', { name: 'Download client.conf' }).click(),
    ]);
    if (dl.suggestedFilename() !== 'client.conf') throw new Error(`saved as ${dl.suggestedFilename()}`);
    const text = readFileSync(await dl.path(), 'utf8');
    const lines = text.trim().split('\n');
    if (lines.length !== 3 || !/^endpoint = http:\/\/\S+$/.test(lines[0]) || lines[1] !== `access_key = ${made}` ||
        lines[2] !== `secret_key = ${secret}`) throw new Error(`client.conf: ${JSON.stringify(text)}`);
    writeFileSync(conf, text);
    chmodSync(conf, 0o600);
    const r = cliWith(conf, 'session', 'ls');
    if (!r.ok) throw new Error(`tessera session ls with it: ${r.out}`);
    const k = cliWith(conf, 'key', 'ls');
    if (!k.ok || !k.out.includes('laptop')) throw new Error(`tessera key ls with it: ${k.out}`);
  });

  await step('Done closes it; the list shows both keys, and the secret is nowhere on the page', async () => {
    await page.getByRole('dialog', { name: 'New API key' }).getByRole('button', { name: 'Done' }).click();
    await page.getByRole('dialog', { name: 'New API key' }).waitFor({ state: 'hidden' });
    await page.locator(`tr[data-key="${made}"]`, { hasText: 'laptop' }).waitFor({ timeout: WAIT });
    if (await rows(page).count() !== 2) throw new Error(`${await rows(page).count()} keys listed`);
    if ((await page.content()).includes(secret)) throw new Error('the secret is still in the page');
    await page.reload();
    await page.locator(`tr[data-key="${made}"]`).waitFor({ timeout: WAIT });
    if ((await page.content()).includes(secret)) throw new Error('the secret came back after a reload');
    await shot(page, 'credentials_page');
  });

  await step('SSH keys: a public key is added with its ssh-keygen fingerprint, a private one is refused, removal asks first', async () => {
    const keyFile = path.join(WORK, 'id_ui');
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'ui laptop', '-f', keyFile]);
    const fp = execFileSync('ssh-keygen', ['-lf', `${keyFile}.pub`], { encoding: 'utf8' }).split(' ')[1];
    const form = page.getByRole('form', { name: 'Add SSH key' });
    await form.getByLabel('Public key').fill(readFileSync(keyFile, 'utf8'));
    await form.getByRole('button', { name: 'Add key' }).click();
    await page.getByText('that is a private key').waitFor({ timeout: WAIT });
    await form.getByLabel('Public key').fill(readFileSync(`${keyFile}.pub`, 'utf8'));
    await form.getByRole('button', { name: 'Add key' }).click();
    await page.locator('table.ssh-keys-table td code', { hasText: fp }).waitFor({ timeout: WAIT });
    await page.getByRole('status').filter({ hasText: 'added' }).waitFor({ timeout: WAIT });
    await shot(page, 'credentials_ssh_keys');
    await page.getByRole('button', { name: 'Remove SSH key ui laptop' }).click();
    const dlg = page.getByRole('dialog', { name: 'Remove SSH key' });
    await dlg.getByText(fp).waitFor();
    await dlg.getByRole('button', { name: 'Remove' }).click();
    await page.locator('table.ssh-keys-table').waitFor({ state: 'detached', timeout: WAIT });
  });

  await step('Revoke asks first, then the key is gone and the CLI is refused with it', async () => {
    await page.getByRole('button', { name: `Revoke ${made}` }).click();
    const dlg = page.getByRole('dialog', { name: 'Revoke API key' });
    await dlg.getByText(made).waitFor();
    await dlg.getByRole('button', { name: 'Revoke' }).click();
    await dlg.waitFor({ state: 'hidden', timeout: WAIT });
    await page.getByRole('status').filter({ hasText: `API key ${made} revoked` }).waitFor({ timeout: WAIT });
    await page.locator(`tr[data-key="${made}"]`).waitFor({ state: 'detached', timeout: WAIT });
    const r = cliWith(conf, 'session', 'ls');
    if (r.ok || !r.out.includes('unknown access key')) throw new Error(`the revoked key: ${r.out}`);
  });

  await step('revoking the main key warns, signs this browser out, and a new login has a new main key', async () => {
    await page.getByRole('button', { name: `Revoke ${mainKey}` }).click();
    const dlg = page.getByRole('dialog', { name: 'Revoke API key' });
    await dlg.getByText('This is your main key').waitFor();
    await dlg.getByRole('button', { name: 'Revoke' }).click();
    await page.getByRole('button', { name: 'Log in' }).waitFor({ timeout: WAIT });
    await login(page);
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Credentials' }).click();
    await page.locator('table.keys .chip.main-key', { hasText: 'this browser' }).waitFor({ timeout: WAIT });
    const now = await rows(page).first().getAttribute('data-key');
    if (now === mainKey || await rows(page).count() !== 1) throw new Error(`main key still ${now}`);
  });
} catch {
  // the failing step has said why
} finally {
  await ctx.close();
}
if (!failed) console.log('# done');
