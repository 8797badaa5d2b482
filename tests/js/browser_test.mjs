// The browser view in headless Chromium (playwright-core, Debian's /usr/bin/chromium), run by
// tests/integration/t_browser.sh against the suite's daemons:
//   node tests/js/browser_test.mjs --base URL --out DIR [--auth-base URL --key KEY]
// --base is a daemon without an API key, --auth-base one with the key KEY. Prints one line a
// check, "ok NAME" or "FAIL NAME: WHY" (and "note ..."), which the shell counts; writes a PNG
// screenshot of each view into DIR for a person to look at. Every number a plot shows is
// compared with the daemon's own answer to the same request, so a plotting bug fails. The
// Studies panel's checks are in browser_studies.mjs.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

import { studyChecks } from './browser_studies.mjs';

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith('--')) acc.push([a.slice(2), all[i + 1]]);
  return acc;
}, []));
const BASE = args.base;
const OUT = args.out || 'build/screenshots';
const AUTH_BASE = args['auth-base'];
const KEY = args.key;
const TIMEOUT = Number(args.timeout || 60000);
const Z95 = 1.959963984540054;
if (!BASE) {
  console.error('usage: node browser_test.mjs --base URL --out DIR [--auth-base URL --key KEY]');
  process.exit(2);
}
mkdirSync(OUT, { recursive: true });

let failures = 0;
function ok(name) {
  console.log(`ok   ${name}`);
}
function fail(name, why) {
  failures++;
  console.log(`FAIL ${name}: ${String(why).replace(/\s+/g, ' ').slice(0, 400)}`);
}
function check(name, cond, why) {
  if (cond) ok(name);
  else fail(name, why);
  return cond;
}
/* Run one step; an exception fails it (and the steps after it go on). */
async function step(name, fn) {
  try {
    await fn();
  } catch (e) {
    fail(name, e && e.stack ? e.stack.split('\n').slice(0, 3).join(' | ') : e);
  }
}

/* ---- the daemon's own answers (the references) ---- */
async function apiJson(base, method, path, body, headers = {}) {
  const init = { method, headers: { ...headers } };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const res = await fetch(base + path, init);
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 200)}`);
  return text ? JSON.parse(text) : null;
}
const api = (method, path, body) => apiJson(BASE, method, path, body);

function close(a, b, rel = 1e-9) {
  return Math.abs(a - b) <= rel * Math.max(1, Math.abs(a), Math.abs(b));
}
/* The largest mismatch of two arrays ("" when they agree). */
function mismatch(got, want, rel = 1e-9) {
  if (got.length !== want.length) return `length ${got.length}, expected ${want.length}`;
  for (let i = 0; i < got.length; i++) {
    if (!close(got[i], want[i], rel)) return `[${i}] ${got[i]} vs ${want[i]}`;
  }
  return '';
}
const median = (v) => {
  const s = [...v].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

/* ---- data (deterministic) ---- */
function lcg(seed) {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 4294967296;
  };
}
const fix = (v) => Number(v.toFixed(6));
function sineRows() {
  const r = lcg(7);
  const rows = [];
  for (let i = 0; i < 21; i++) {
    const x = fix(i * 0.25);
    rows.push([x, fix(Math.sin(x) + 0.1 * (r() - 0.5))]);
  }
  return rows;
}
function planeRows(n, seed) {
  const r = lcg(seed);
  const rows = [];
  for (let i = 0; i < n; i++) {
    const a = fix(4 * r() - 2);
    const b = fix(4 * r() - 2);
    rows.push([a, b, fix(Math.sin(a) + 0.5 * Math.cos(2 * b) + 0.05 * (r() - 0.5))]);
  }
  return rows;
}
function classRows() {
  const r = lcg(11);
  const rows = [];
  for (let i = 0; i < 40; i++) {
    const x = fix(6 * r());
    const p = 1 / (1 + Math.exp(-3 * (x - 3)));
    rows.push([x, r() < p ? 1 : 0]);
  }
  return rows;
}
/* Three classes along x: mostly class floor(x / 2) on [0, 6), a few labels flipped. */
function threeClassRows() {
  const r = lcg(23);
  const rows = [];
  for (let i = 0; i < 45; i++) {
    const x = fix(6 * r());
    const c = r() < 0.1 ? Math.floor(3 * r()) : Math.min(2, Math.floor(x / 2));
    rows.push([x, c]);
  }
  return rows;
}
function longRows() {
  const r = lcg(5);
  const rows = [];
  for (let i = 0; i < 300; i++) {
    const x = [0, 1, 2, 3].map(() => fix(4 * r() - 2));
    rows.push([...x, fix(x.reduce((s, v, j) => s + Math.sin((j + 1) * v), 0))]);
  }
  return rows;
}
const toCsv = (header, rows) => [header.join(','), ...rows.map((r) => r.join(','))].join('\n') + '\n';

/* ---- the page ---- */

/* A page whose console errors, page errors, failed requests and HTTP errors are
 * collected (problems.list); problems.allow() lets HTTP errors pass while a step
 * makes them on purpose. */
async function openPage(context) {
  const page = await context.newPage();
  const problems = { list: [], allowHttpErrors: false };
  page.on('console', (m) => {
    if (m.type() === 'error' && !problems.allowHttpErrors) problems.list.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.list.push(`page error: ${e.message}`));
  page.on('requestfailed', (r) => {
    const why = r.failure() ? r.failure().errorText : '';
    problems.list.push(`request failed: ${r.method()} ${r.url()} ${why}`);
  });
  page.on('response', (r) => {
    if (r.status() >= 400 && !problems.allowHttpErrors) {
      problems.list.push(`HTTP ${r.status()}: ${r.request().method()} ${r.url()}`);
    }
  });
  page.on('dialog', (d) => d.accept());
  page.setDefaultTimeout(TIMEOUT);
  return { page, problems };
}

async function shot(page, name) {
  await page.screenshot({ path: join(OUT, `${name}.png`), fullPage: true });
}

async function datasets(page, canvasId) {
  return page.evaluate((id) => {
    const chart = Chart.getChart(document.getElementById(id));
    if (!chart) return null;
    return chart.data.datasets.map((d) => ({ label: d.label, data: d.data.map((p) => ({ x: p.x, y: p.y })) }));
  }, canvasId);
}
const byLabel = (sets, label) => sets.find((s) => s.label === label);

/* Fill the fit form and run the fit; the job's final data-status. */
async function fitThroughForm(page, { name, method, likelihood, csv, options = {}, seed }) {
  await page.goto(`${BASE}/#/fit`);
  await page.waitForSelector('#fit-form[data-state="ready"]');
  await page.fill('#fit-name', name);
  await page.selectOption('#fit-method', method);
  if (likelihood) await page.selectOption('#fit-likelihood', likelihood);
  for (const [k, v] of Object.entries(options)) await page.fill(`#opt-${k}`, String(v));
  if (seed !== undefined) await page.fill('#fit-seed', String(seed));
  await page.fill('#fit-csv', csv);
  await page.click('#fit-submit');
}

async function waitJob(page, states, timeout = TIMEOUT) {
  const sel = states.map((s) => `#fit-job[data-status="${s}"]`).join(', ');
  await page.waitForSelector(sel, { timeout });
  return page.getAttribute('#fit-job', 'data-status');
}

async function openModel(page, name, axis) {
  await page.goto(`${BASE}/#/models/${encodeURIComponent(name)}`);
  await page.waitForSelector('#posterior-box[data-state="ready"], #posterior-box[data-state="error"]');
  const st = await page.getAttribute('#posterior-box', 'data-state');
  if (st !== 'ready') throw new Error(`the plot did not draw: ${await page.textContent('#model-error')}`);
  if (axis !== undefined) await page.waitForSelector(`#posterior-box[data-axis="${axis}"][data-state="ready"]`);
}

/* ======================================================================= */

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-dev-shm-usage'],
});
const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
const { page, problems } = await openPage(context);

await step('the page loads', async () => {
  const res = await page.goto(`${BASE}/`);
  check('GET / answers 200 text/html', res.status() === 200 && /text\/html/.test(res.headers()['content-type']),
    `${res.status()} ${res.headers()['content-type']}`);
  await page.waitForSelector('#models-table[data-state="ready"]');
  const chartLoaded = await page.evaluate(() => typeof Chart === 'function' && typeof Chart.getChart === 'function');
  check('the page loads Chart.js from /ui/vendor (the global Chart)', chartLoaded, 'no Chart');
  check('the page loads without console errors or failed requests', problems.list.length === 0,
    problems.list.join('; '));
});

/* ---- a 1-D regression fitted through the form ---- */
const SINE = sineRows();
await step('1-D fit through the form', async () => {
  await fitThroughForm(page, { name: 'ui-sine', method: 'exact', seed: 3, csv: toCsv(['x', 'y'], SINE) });
  const st = await waitJob(page, ['succeeded', 'failed', 'cancelled']);
  const [value, max] = await page.$eval('#fit-progress', (p) => [p.value, p.max]);
  check('1-D fit through the form (CSV pasted, async job) succeeds', st === 'succeeded',
    `job ${st}: ${await page.textContent('#fit-error')}`);
  check('the progress bar reaches done', max >= 1 && value === max, `value ${value} of ${max}`);
  await shot(page, 'fit-succeeded');
});

await step('the models table', async () => {
  await page.goto(`${BASE}/#/models`);
  await page.waitForSelector('#models-table[data-state="ready"] tr[data-model="ui-sine"]');
  const cells = await page.$$eval('tr[data-model="ui-sine"] td', (tds) => tds.map((t) => t.textContent.trim()));
  check('the models table lists ui-sine: exact, gaussian, n 21, d 1, its objective',
    cells[2] === 'exact' && cells[3] === 'gaussian' && cells[4] === '21' && cells[5] === '1'
      && /log_marginal_likelihood = /.test(cells[6]), cells.join(' | '));
});

await step('the 1-D posterior', async () => {
  await page.click('tr[data-model="ui-sine"] a');
  await openModel(page, 'ui-sine');
  const sets = await datasets(page, 'posterior-chart');
  const labels = sets.map((s) => s.label);
  const want = ['95% band (mean ± 1.96 sd) lower', '95% band (mean ± 1.96 sd)', 'mean', 'sample 1', 'sample 2',
    'sample 3', 'training points'];
  check('1-D plot: band edges, mean, 3 samples and the training points (7 series)',
    JSON.stringify(labels) === JSON.stringify(want), labels.join(', '));
  const train = byLabel(sets, 'training points');
  check('1-D plot: the training points are the 21 rows fitted',
    train && !mismatch(train.data.map((p) => p.x), SINE.map((r) => r[0]), 0)
      && !mismatch(train.data.map((p) => p.y), SINE.map((r) => r[1]), 0), 'points differ');
  const mean = byLabel(sets, 'mean').data;
  const idx = [0, 37, 100, 163, 199];
  const X = idx.map((i) => [mean[i].x]);
  const ref = await api('POST', '/v1/models/ui-sine/predict', { X });
  const bad = mismatch(idx.map((i) => mean[i].y), ref.mean);
  check('1-D plot: the mean equals the API\'s predict at 5 grid points', !bad, bad);
  const lo = sets[0].data;
  const hi = sets[1].data;
  const bandVar = idx.map((i) => ((hi[i].y - lo[i].y) / (2 * Z95)) ** 2);
  const badBand = mismatch(bandVar, ref.variance, 1e-6);
  check('1-D plot: the band is mean ± 1.96 sd of the API\'s variance', !badBand
    && idx.every((i, k) => close((hi[i].y + lo[i].y) / 2, ref.mean[k])), badBand);
  const grid = mean.map((p) => [p.x]);
  const s = await api('POST', '/v1/models/ui-sine/sample', { X: grid, version: 1, n_samples: 3, seed: 1 });
  const badS = [1, 2, 3].map((k) => mismatch(byLabel(sets, `sample ${k}`).data.map((p) => p.y), s.samples[k - 1], 1e-12))
    .filter(Boolean).join('; ');
  check('1-D plot: the 3 samples are the API\'s joint samples on the 200-point grid', !badS, badS);
  await shot(page, 'model-1d');
});

/* ---- a 2-D regression: slice and predicted-vs-observed ---- */
const PLANE = planeRows(40, 11);
const PLANE_TEST = planeRows(20, 99);
await step('2-D fit and views', async () => {
  await fitThroughForm(page, { name: 'ui-plane', method: 'exact', seed: 1, csv: toCsv(['a', 'b', 'target'], PLANE) });
  const st = await waitJob(page, ['succeeded', 'failed', 'cancelled']);
  check('2-D fit through the form succeeds', st === 'succeeded', `job ${st}: ${await page.textContent('#fit-error')}`);
  await page.click('#fit-model-link');
  await openModel(page, 'ui-plane', 0);
  const want = ['95% band (mean ± 1.96 sd) lower', '95% band (mean ± 1.96 sd)', 'mean', 'sample 1', 'sample 2',
    'sample 3'];
  for (const [axis, name] of [[0, 'a'], [1, 'b']]) {
    if (axis === 1) {
      await page.selectOption('#model-slice', '1');
      await page.waitForSelector('#posterior-box[data-axis="1"][data-state="ready"]');
    }
    const sets = await datasets(page, 'posterior-chart');
    check(`2-D slice along ${name}: band edges, mean and 3 samples (6 series)`,
      JSON.stringify(sets.map((s) => s.label)) === JSON.stringify(want), sets.map((s) => s.label).join(', '));
    const other = 1 - axis;
    const held = median(PLANE.map((r) => r[other]));
    const mean = byLabel(sets, 'mean').data;
    const idx = [0, 50, 120, 199];
    const X = idx.map((i) => (axis === 0 ? [mean[i].x, held] : [held, mean[i].x]));
    const ref = await api('POST', '/v1/models/ui-plane/predict', { X });
    const bad = mismatch(idx.map((i) => mean[i].y), ref.mean);
    check(`2-D slice along ${name}: the mean is the API's with the other input at its training median`, !bad, bad);
    const xs = PLANE.map((r) => r[axis]);
    const lo = Math.min(...xs);
    const hi = Math.max(...xs);
    check(`2-D slice along ${name}: the grid spans the training range`,
      mean[0].x <= lo && mean[199].x >= hi && mean.length === 200, `${mean[0].x}..${mean[199].x}`);
  }
  await page.fill('#model-rows-csv', toCsv(['a', 'b', 'target'], PLANE_TEST));
  await page.click('#model-rows-use');
  await page.waitForSelector('#pvo-box[data-state="ready"]');
  const pvo = await datasets(page, 'pvo-chart');
  check('predicted vs observed: the identity line, the ± 1.96 sd bars and the rows (3 series)',
    JSON.stringify(pvo.map((s) => s.label)) === JSON.stringify(['y = x', '± 1.96 sd', 'data rows']),
    pvo.map((s) => s.label).join(', '));
  const ref = await api('POST', '/v1/models/ui-plane/predict', { X: PLANE_TEST.map((r) => [r[0], r[1]]) });
  const rowsSet = byLabel(pvo, 'data rows').data;
  const bad = mismatch(rowsSet.map((p) => p.x), PLANE_TEST.map((r) => r[2]), 0)
    || mismatch(rowsSet.map((p) => p.y), ref.mean);
  check('predicted vs observed: 20 rows at (observed y, the API\'s predicted mean)', !bad, bad);
  const bars = byLabel(pvo, '± 1.96 sd').data;
  const badBars = bars.length !== 60 ? `${bars.length} bar points`
    : mismatch(PLANE_TEST.map((_, i) => (bars[3 * i + 1].y - bars[3 * i].y) / (2 * Z95)),
      ref.variance.map(Math.sqrt), 1e-6);
  check('predicted vs observed: each bar is ± 1.96 sd of the API\'s variance', !badBars, badBars);
  await page.$eval('#pvo-figure', (e) => e.scrollIntoView());
  await shot(page, 'model-2d');
});

/* ---- binary classification: the probability curve ---- */
const CLASS = classRows();
await step('classification', async () => {
  await fitThroughForm(page, { name: 'ui-class', method: 'svgp', likelihood: 'bernoulli', seed: 1,
    csv: toCsv(['x', 'label'], CLASS) });
  const st = await waitJob(page, ['succeeded', 'failed', 'cancelled']);
  check('bernoulli svgp fit through the form succeeds', st === 'succeeded',
    `job ${st}: ${await page.textContent('#fit-error')}`);
  await openModel(page, 'ui-class');
  const sets = await datasets(page, 'posterior-chart');
  const want = ['95% band of logistic(f) lower', '95% band of logistic(f)', 'p(y = 1)', 'training points'];
  check('classification plot: the probability curve, its band and the labels (4 series)',
    JSON.stringify(sets.map((s) => s.label)) === JSON.stringify(want), sets.map((s) => s.label).join(', '));
  const prob = byLabel(sets, 'p(y = 1)').data;
  const idx = [0, 60, 140, 199];
  const ref = await api('POST', '/v1/models/ui-class/predict', { X: idx.map((i) => [prob[i].x]) });
  const bad = mismatch(idx.map((i) => prob[i].y), ref.probability);
  check('classification plot: p(y = 1) equals the API\'s probability', !bad, bad);
  check('classification plot: probabilities lie in [0, 1]', prob.every((p) => p.y >= 0 && p.y <= 1), 'out of range');
  await shot(page, 'model-class');
});

/* ---- several classes (softmax): one probability line a class ---- */
const CLASSES3 = threeClassRows();
const CLASSES3_TEST = threeClassRows().slice(0, 15).map(([x, c]) => [fix(x + 0.05), c]);
await step('softmax', async () => {
  const methods = await api('GET', '/v1/methods');
  const svgp = (methods.methods || methods).find((m) => m.name === 'svgp');
  if (!svgp || !(svgp.likelihoods || []).includes('softmax')) {
    console.log('note skipped: the softmax class-probability plot: svgp does not list softmax in /v1/methods');
    return;
  }
  await fitThroughForm(page, { name: 'ui-softmax', method: 'svgp', likelihood: 'softmax', seed: 1,
    csv: toCsv(['x', 'label'], CLASSES3) });
  const st = await waitJob(page, ['succeeded', 'failed', 'cancelled']);
  check('softmax svgp fit through the form succeeds', st === 'succeeded',
    `job ${st}: ${await page.textContent('#fit-error')}`);
  await openModel(page, 'ui-softmax');
  const facts = await page.$$eval('#model-facts dd', (dds) => dds.map((d) => d.textContent));
  check('softmax model panel: the likelihood reads "softmax, 3 classes"', facts.includes('softmax, 3 classes'),
    facts.slice(0, 4).join(' | '));
  const sets = await datasets(page, 'posterior-chart');
  const want = ['p(y = 0)', 'p(y = 1)', 'p(y = 2)', 'training labels'];
  check('softmax plot: one probability line a class and the training labels (4 series)',
    JSON.stringify(sets.map((s) => s.label)) === JSON.stringify(want), sets.map((s) => s.label).join(', '));
  const idx = [0, 45, 110, 199];
  const grid = byLabel(sets, 'p(y = 0)').data;
  const ref = await api('POST', '/v1/models/ui-softmax/predict', { X: idx.map((i) => [grid[i].x]) });
  const badP = [0, 1, 2].map((c) => mismatch(idx.map((i) => byLabel(sets, `p(y = ${c})`).data[i].y),
    ref.probabilities.map((row) => row[c]))).filter(Boolean).join('; ');
  check('softmax plot: each class\'s line is the API\'s probabilities column', !badP && ref.probabilities.length === 4,
    badP || `${ref.probabilities.length} rows`);
  const sums = grid.map((_, i) => [0, 1, 2].reduce((acc, c) => acc + byLabel(sets, `p(y = ${c})`).data[i].y, 0));
  check('softmax plot: the probabilities lie in [0, 1] and sum to 1 at every x',
    sets.slice(0, 3).every((s) => s.data.every((p) => p.y >= 0 && p.y <= 1)) && sums.every((v) => close(v, 1, 1e-9)),
    `sums ${Math.min(...sums)}..${Math.max(...sums)}`);
  const marks = await page.evaluate(() => {
    const d = Chart.getChart(document.getElementById('posterior-chart')).data.datasets.at(-1);
    return { classes: d.gpClasses, colors: d.pointBackgroundColor, ys: d.data.map((p) => p.y),
      xs: d.data.map((p) => p.x), line: Chart.getChart(document.getElementById('posterior-chart'))
        .data.datasets.slice(0, 3).map((s) => s.borderColor) };
  });
  check('softmax plot: the training labels are the 45 rows fitted, each in its class\'s line colour',
    !mismatch(marks.xs, CLASSES3.map((r) => r[0]), 0) && JSON.stringify(marks.classes) === JSON.stringify(CLASSES3.map((r) => r[1]))
      && marks.classes.every((c, i) => marks.colors[i] === marks.line[c]) && marks.ys.every((y) => y === 1),
    JSON.stringify(marks).slice(0, 200));
  await page.fill('#model-rows-csv', toCsv(['x', 'label'], CLASSES3_TEST));
  await page.click('#model-rows-use');
  await page.waitForSelector('#pvo-box[data-state="ready"]');
  const pvo = await datasets(page, 'pvo-chart');
  const refT = await api('POST', '/v1/models/ui-softmax/predict', { X: CLASSES3_TEST.map((r) => [r[0]]) });
  const rowsSet = byLabel(pvo, 'data rows');
  const badT = !rowsSet ? 'no data rows' : mismatch(rowsSet.data.map((p) => p.x), CLASSES3_TEST.map((r) => r[1]), 0)
    || mismatch(rowsSet.data.map((p) => p.y), CLASSES3_TEST.map((r, i) => refT.probabilities[i][r[1]]));
  check('softmax rows: each row at (its class, the API\'s probability of that class)', !badT, badT);
  const right = CLASSES3_TEST.filter((r, i) => {
    const row = refT.probabilities[i];
    return row.indexOf(Math.max(...row)) === r[1];
  }).length;
  const cap = await page.textContent('#pvo-caption');
  check('softmax rows: the caption gives the accuracy and log loss', cap.includes(`(${right} of 15)`)
    && /log loss [0-9.]+/.test(cap), cap);
  await shot(page, 'model-softmax');
});

/* ---- the validation report: its numbers and the calibration plot (web/validation.js) ---- */
await step('validation', async () => {
  const model = await api('GET', '/v1/models/ui-sine');
  check('ui-sine has a validation report by default', !!model.validation && model.validation.default === true,
    JSON.stringify(model.validation || null).slice(0, 120));
  if (!model.validation) return;
  await openModel(page, 'ui-sine');
  await page.waitForSelector('#calibration-figure:not([hidden])');
  const facts = await page.$$eval('#calibration-facts dt, #calibration-facts dd', (n) => n.map((d) => d.textContent));
  const nlpd = facts[facts.indexOf('Validation NLPD') + 1] || '';
  check('validation facts: the NLPD is the model JSON\'s', nlpd.startsWith(String(Number(model.validation.nlpd.toPrecision(4)))),
    `${nlpd} vs ${model.validation.nlpd}`);
  const sets = await datasets(page, 'calibration-chart');
  const cov = byLabel(sets || [], 'held-out coverage');
  const diag = byLabel(sets || [], 'perfect calibration');
  const bad = !cov ? 'no coverage series' : mismatch(cov.data.map((p) => p.x), model.validation.calibration.map((c) => c.level), 0)
    || mismatch(cov.data.map((p) => p.y), model.validation.calibration.map((c) => c.coverage), 0);
  check('calibration plot: the 11 levels against the report\'s coverage, and the diagonal', !bad && diag
    && diag.data.length === 2 && diag.data[1].x === 1 && diag.data[1].y === 1, bad || 'no diagonal');
  await shot(page, 'model-validation');
  /* classes: the reliability diagram, bernoulli (p(y = 1)) and softmax (the top label) */
  const reliability = async (name, caption) => {
    const m = await api('GET', `/v1/models/${name}`);
    check(`${name} has a validation report with a reliability table`, !!(m.validation && m.validation.reliability
      && m.validation.reliability.length), JSON.stringify(m.validation || null).slice(0, 160));
    if (!m.validation || !m.validation.reliability) return;
    await openModel(page, name);
    await page.waitForSelector('#calibration-figure:not([hidden])');
    const rs = byLabel(await datasets(page, 'calibration-chart') || [], 'held-out rows by predicted probability');
    const badR = !rs ? 'no reliability series'
      : mismatch(rs.data.map((p) => p.x), m.validation.reliability.map((b) => b.mean_predicted), 0)
      || mismatch(rs.data.map((p) => p.y), m.validation.reliability.map((b) => b.observed), 0);
    check(`${name}: reliability diagram, each bin at (mean prediction, observed share)`, !badR, badR);
    const cap = await page.textContent('#calibration-caption');
    check(`${name}: the diagram's caption says what it shows`, cap.startsWith(caption), cap);
    const facts = await page.$$eval('#calibration-facts dt, #calibration-facts dd', (n) => n.map((d) => d.textContent));
    const ll = facts[facts.indexOf('Validation log loss') + 1] || '';
    check(`${name}: the log loss is the model JSON's`, ll.startsWith(String(Number(m.validation.log_loss.toPrecision(4)))),
      `${ll} vs ${m.validation.log_loss}`);
    await shot(page, `model-validation-${name}`);
  };
  await reliability('ui-class', 'Reliability: ');
  const sm = await api('GET', '/v1/models/ui-softmax').catch(() => null);
  if (sm) await reliability('ui-softmax', 'Reliability (top label): ');
  /* counts: the calibration plot of count intervals, and the count NLPD */
  const countRows = CLASS.map(([x], i) => [x, Math.floor(Math.exp(0.3 * x) + (i % 3) / 2)]);
  await apiJson(BASE, 'DELETE', '/v1/models/ui-count').catch(() => null);
  await api('POST', '/v1/models', { name: 'ui-count', method: 'svgp', likelihood: 'poisson', seed: 1,
    options: { inducing: 10, max_iterations: 60 }, validation: { folds: 3 },
    X: countRows.map(([x]) => [x]), y: countRows.map(([, c]) => c) });
  const cnt = await api('GET', '/v1/models/ui-count');
  await openModel(page, 'ui-count');
  await page.waitForSelector('#calibration-figure:not([hidden])');
  const cf = await page.$$eval('#calibration-facts dt, #calibration-facts dd', (n) => n.map((d) => d.textContent));
  const cn = cf[cf.indexOf('Validation NLPD') + 1] || '';
  check('count model: the validation NLPD is the model JSON\'s', !!cnt.validation
    && cn.startsWith(String(Number(cnt.validation.nlpd.toPrecision(4)))), `${cn} vs ${cnt.validation && cnt.validation.nlpd}`);
  const ccov = byLabel(await datasets(page, 'calibration-chart') || [], 'held-out coverage');
  const badC = !ccov || !cnt.validation ? 'no coverage series'
    : mismatch(ccov.data.map((p) => p.y), cnt.validation.calibration.map((c) => c.coverage), 0);
  check('count model: the calibration plot is the report\'s coverage of count intervals', !badC, badC);
  await shot(page, 'model-validation-count');
});

/* ---- a long fit cancelled from the form ---- */
await step('cancel', async () => {
  await fitThroughForm(page, { name: 'ui-long', method: 'msrfr', seed: 1, csv: toCsv(['a', 'b', 'c', 'd', 'y'], longRows()),
    options: { iterations: 1000000, particles: 20, features: 100 } });
  await waitJob(page, ['running']);
  await page.waitForFunction(() => document.getElementById('fit-progress').value > 0);
  const max = await page.$eval('#fit-progress', (p) => p.max);
  /* (msrfr is not validated by default: the budget is its fit's alone) */
  check('a running job feeds the progress bar (max = the 1000000 iterations)', max === 1000000, `max ${max}`);
  await shot(page, 'fit-running');
  await page.click('#fit-cancel');
  const st = await waitJob(page, ['succeeded', 'failed', 'cancelled']);
  check('Cancel stops the long msrfr fit: the job shows cancelled', st === 'cancelled', `job ${st}`);
  const res = await fetch(`${BASE}/v1/models/ui-long`);
  check('the cancelled fit stored no model', res.status === 404, `GET /v1/models/ui-long: ${res.status}`);
  await shot(page, 'fit-cancelled');
});

/* ---- errors reach the user ---- */
await step('errors shown', async () => {
  problems.allowHttpErrors = true;
  await fitThroughForm(page, { name: 'ui-bad', method: 'exact', csv: 'x,y\n0,1\n1,2\n2,oops\n' });
  await page.waitForSelector('#fit-error:not([hidden])');
  const text = await page.textContent('#fit-error');
  check('a refused fit shows the daemon\'s error (422 invalid_data naming the cell)',
    /422 invalid_data/.test(text) && /y\[2\]/.test(text), text);
  await page.goto(`${BASE}/#/models/no-such-model`);
  await page.waitForSelector('#model-error:not([hidden])');
  const t2 = await page.textContent('#model-error');
  check('an unknown model shows 404 not_found', /404 not_found/.test(t2), t2);
  problems.allowHttpErrors = false;
});

/* ---- aliases: promote the version viewed, roll back ---- */
await step('aliases', async () => {
  const fit = { name: 'ui-alias', method: 'exact', X: [[0], [1], [2], [3]], y: [0, 1, 0, 1] };
  await apiJson(BASE, 'DELETE', '/v1/models/ui-alias').catch(() => null);
  await api('POST', '/v1/models', fit);
  await api('POST', '/v1/models', fit);
  await page.goto(`${BASE}/#/models/ui-alias/versions/1`);
  await page.waitForSelector('#posterior-box[data-state="ready"]');
  await page.waitForSelector('#model-aliases-empty:not([hidden])');
  check('a model without aliases says so', true);
  const promote = await page.textContent('#alias-promote');
  check('the promote button names the version viewed and "champion" (the default)',
    promote === 'Promote version 1 to champion', promote);
  check('roll back is disabled while the alias does not exist', await page.isDisabled('#alias-rollback'), 'enabled');
  await page.click('#alias-promote');
  await page.waitForSelector('#model-aliases-body tr');
  const row = await page.$$eval('#model-aliases-body td', (tds) => tds.map((t) => t.textContent.trim()));
  check('promote: the table shows champion -> 1', row[0] === 'champion' && row[1] === '1', row.join(' | '));
  check('promote: the daemon has champion -> 1',
    (await api('GET', '/v1/models/ui-alias/aliases/champion')).version === 1, 'not 1');
  await page.goto(`${BASE}/#/models/ui-alias/versions/2`);
  await page.waitForSelector('#posterior-box[data-state="ready"]');
  await page.waitForSelector('#model-aliases-body tr');
  await page.click('#alias-promote');
  await page.waitForFunction(() => {
    const td = document.querySelectorAll('#model-aliases-body td');
    return td.length && td[1].textContent.trim() === '2';
  });
  const labels = await page.$$eval('#model-version option', (os) => os.map((o) => o.textContent));
  check('the version list names the alias', labels.includes('2 (latest, champion)'), labels.join(' | '));
  const back = await page.textContent('#alias-rollback');
  check('roll back offers the previous target (1)', back === 'Roll champion back to version 1', back);
  await page.click('#alias-rollback');
  await page.waitForFunction(() => {
    const td = document.querySelectorAll('#model-aliases-body td');
    return td.length && td[1].textContent.trim() === '1';
  });
  const after = await api('GET', '/v1/models/ui-alias/aliases/champion');
  check('roll back: the daemon has champion -> 1 again, 2 as its previous target',
    after.version === 1 && after.previous_version === 2, JSON.stringify(after));
  await shot(page, 'aliases');
  await api('DELETE', '/v1/models/ui-alias');
});

/* ---- delete from the table ---- */
await step('delete', async () => {
  await page.goto(`${BASE}/#/models`);
  await page.waitForSelector('#models-table[data-state="ready"] tr[data-model="ui-plane"]');
  await shot(page, 'models');
  await page.click('tr[data-model="ui-plane"] button');
  await page.waitForSelector('tr[data-model="ui-plane"]', { state: 'detached' });
  const res = await fetch(`${BASE}/v1/models/ui-plane`);
  check('Delete (confirmed) removes the model from the table and the daemon', res.status === 404, `${res.status}`);
});

/* ---- the Studies panel (browser_studies.mjs) ---- */
await studyChecks({ BASE, page, api, check, step, shot, datasets, byLabel, mismatch, TIMEOUT });

check('no console errors, page errors or failed requests in the whole session', problems.list.length === 0,
  problems.list.join('; '));
await context.close();

/* ---- behind an API key: the browser's Basic credentials ---- */
if (AUTH_BASE && KEY) {
  await step('auth', async () => {
    /* The browser's answer to a 401 is its own (headless Chromium ends the
     * navigation with net::ERR_INVALID_AUTH_CREDENTIALS): the daemon's 401
     * is read from the response event. */
    async function refused(credentials) {
      const ctx = await browser.newContext(credentials ? { httpCredentials: credentials } : {});
      const p = await ctx.newPage();
      const seen = p.waitForResponse((r) => r.url() === `${AUTH_BASE}/`);
      await p.goto(`${AUTH_BASE}/`).catch(() => null);
      const r = await seen;
      const out = { status: r.status(), challenge: (await r.allHeaders())['www-authenticate'] || '' };
      await ctx.close();
      return out;
    }
    const r0 = await refused(null);
    check('behind a key: / without credentials is 401 with a Basic challenge',
      r0.status === 401 && /^Basic realm="gpserve"/.test(r0.challenge), `${r0.status} ${r0.challenge}`);
    const r1 = await refused({ username: 'me', password: `${KEY}x` });
    check('behind a key: a wrong password is 401', r1.status === 401, `${r1.status}`);

    const good = await browser.newContext({ viewport: { width: 1280, height: 800 },
      httpCredentials: { username: 'me', password: KEY } });
    const { page: p2, problems: pr2 } = await openPage(good);
    const r2 = await p2.goto(`${AUTH_BASE}/`);
    check('behind a key: the key as the Basic password opens /', r2.status() === 200, `${r2.status()}`);
    await p2.waitForSelector('#models-table[data-state="ready"]');
    await p2.goto(`${AUTH_BASE}/#/fit`);
    await p2.waitForSelector('#fit-form[data-state="ready"]');
    await p2.fill('#fit-name', 'ui-key');
    await p2.fill('#fit-csv', toCsv(['x', 'y'], SINE));
    await p2.click('#fit-submit');
    await p2.waitForSelector('#fit-job[data-status="succeeded"], #fit-job[data-status="failed"]');
    await p2.click('#fit-model-link');
    await p2.waitForSelector('#posterior-box[data-state="ready"], #posterior-box[data-state="error"]');
    const st = await p2.getAttribute('#posterior-box', 'data-state');
    check('behind a key: the page\'s own API calls carry the credentials (fit, job, predict, sample)',
      st === 'ready', `plot ${st}: ${await p2.textContent('#model-error')}`);
    await shot(p2, 'auth-model');
    check('behind a key: no console errors or failed requests', pr2.list.length === 0, pr2.list.join('; '));
    await good.close();
  });
}

await browser.close();
console.log(`browser checks done (${failures} failed)`);
