// The browser half of test_app_cookie.sh: the admin logs in to the web UI,
// then opens the app link another user sent. Prints "ok ..."/"FAIL ..."
// lines, "# login cookie: VALUE" for the shell side to look for in what
// the app received, and "# done" at the end.
import { createRequire } from 'node:module';
import path from 'node:path';

const env = (k) => { if (!process.env[k]) throw new Error(`${k} is not set`); return process.env[k]; };
const require = createRequire(path.join(env('UI_SRC'), 'package.json'));
const { chromium } = require('playwright-core');

const WEB = env('WEB_URL'), LINK = env('APP_LINK');
const EMAIL = env('ADMIN_EMAIL'), PASSWORD = env('ADMIN_PASSWORD');
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

const ctx = await chromium.launchPersistentContext(env('PROFILE_DIR'), {
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});

try {
  const page = ctx.pages()[0] ?? await ctx.newPage();
  let login;

  await step('the admin logs in to the web UI', async () => {
    await page.goto(WEB);
    await page.getByLabel('Email').fill(EMAIL);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: WAIT });
  });

  await step('the login cookie is HttpOnly and SameSite=Strict, on the web UI\'s host only', async () => {
    login = (await ctx.cookies(WEB)).find((c) => c.name === 'tessera_session');
    if (!login) throw new Error('no tessera_session cookie');
    if (!login.httpOnly) throw new Error('not HttpOnly');
    if (login.sameSite !== 'Strict') throw new Error(`SameSite=${login.sameSite}`);
    if (login.domain !== new URL(WEB).hostname) throw new Error(`its domain is ${login.domain}`);
    console.log(`# login cookie: ${login.value}`);
  });

  const app = await ctx.newPage();
  await step('the admin opens the link to the other user\'s app, which answers', async () => {
    await app.goto(LINK, { timeout: WAIT });
    await app.getByText('listened').waitFor({ timeout: WAIT });
  });

  await step('the browser sends the apps\' address none of the web UI\'s cookies', async () => {
    const names = (await ctx.cookies(LINK)).map((c) => c.name);
    if (names.includes('tessera_session')) throw new Error(`cookies for the app: ${names.join(', ')}`);
  });

  // A server whose apps shared the web UI's address would have the login
  // cookie go there: planted so, the proxy must still keep it from the app.
  await step('with the login cookie planted on the apps\' address, the app still answers', async () => {
    const url = new URL(LINK).origin;
    await ctx.addCookies([
      { name: 'tessera_session', value: login.value, url, httpOnly: true, sameSite: 'Strict' },
      { name: 'theme', value: 'dark', url },
    ]);
    await app.goto(url + '/', { timeout: WAIT });
    await app.getByText('listened').waitFor({ timeout: WAIT });
  });
} catch {
  // reported by step()
} finally {
  await ctx.close();
}
console.log('# done');
process.exit(failed ? 1 : 0);
