// The browser view over https (the tls integration area): Chromium loads the
// page from a daemon started with --tls-cert, whose certificate a test CA
// signed; the context skips the CA check (ignoreHTTPSErrors: Chromium's own
// trust store is not the test's business), and the page must render its table of
// models (fetched over the same TLS origin) with no console error or failed
// request. Prints "PASS name" / "FAIL name: why" lines.
//   node tests/js/browser_tls.mjs https://127.0.0.1:PORT MODEL
import { chromium } from 'playwright-core';

const [base, model] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-dev-shm-usage'],
});
const problems = [];
try {
  const context = await browser.newContext({ ignoreHTTPSErrors: true });
  const page = await context.newPage();
  page.on('console', (m) => { if (m.type() === 'error') problems.push(m.text()); });
  page.on('pageerror', (e) => problems.push(String(e)));
  page.on('requestfailed', (r) => problems.push(`${r.url()} ${r.failure()?.errorText}`));
  const res = await page.goto(`${base}/`);
  console.log(res.status() === 200 ? 'PASS the page loads over https' : `FAIL the page loads over https: ${res.status()}`);
  await page.waitForSelector('#models-table[data-state="ready"]', { timeout: 30000 });
  const listed = await page.locator('#models-table').innerText();
  console.log(listed.includes(model) ? `PASS the table lists ${model}`
    : `FAIL the table lists ${model}: ${listed.slice(0, 200)}`);
  console.log(problems.length === 0 ? 'PASS no console error or failed request'
    : `FAIL no console error or failed request: ${problems.join('; ')}`);
} catch (e) {
  console.log(`FAIL the browser view over https: ${e}`);
} finally {
  await browser.close();
}
