// The Studies panel of the browser view (web/studies.js), called by browser_test.mjs with its
// page and helpers. A study is driven through the API (suggest, complete, one trial reported
// infeasible, one violating its constraint); then the page's list, trials table (the best
// feasible trial marked), running best and posterior are compared with the daemon's answers:
// the posterior's numbers with POST /v1/models/study.NAME/predict at points encoded here,
// independently of the page's own encoding.

const Z95 = 1.959963984540054;

const PARAMS = [
  { name: 'x', type: 'double', bounds: [-2, 3] },
  { name: 'lr', type: 'double', bounds: [0.001, 1], scale: 'log' },
  { name: 'opt', type: 'categorical', values: ['adam', 'sgd'] },
];
/* The objective (minimised) and a constraint c <= 0.8. */
const objective = (p) => (p.x - 0.5) ** 2 + (Math.log10(p.lr) + 2) ** 2 / 4 + (p.opt === 'sgd' ? 0.3 : 0);
const constraint = (p) => (p.x + 2) / 5;

/* The encoding of docs/design/api.md ("Studies"): u in [0, 1] per numeric parameter (on
 * log(value) for scale "log"), one-hot columns per categorical. */
function encoded(p) {
  const logLr = (Math.log(p.lr) - Math.log(0.001)) / (Math.log(1) - Math.log(0.001));
  return [(p.x + 2) / 5, logLr, p.opt === 'adam' ? 1 : 0, p.opt === 'sgd' ? 1 : 0];
}

export async function studyChecks({ BASE, page, api, check, step, shot, datasets, byLabel, mismatch, TIMEOUT }) {
  const name = 'ui-study';
  let study;
  let trials;
  await step('a study driven through the API', async () => {
    await fetch(`${BASE}/v1/studies/${name}`, { method: 'DELETE' });
    await api('POST', '/v1/studies', {
      name, parameters: PARAMS, objective: { name: 'y', goal: 'minimize' },
      constraints: [{ name: 'c', max: 0.8 }], initial_design: 5, seed: 3,
    });
    for (let i = 0; i < 10; i++) {
      const [t] = (await api('POST', `/v1/studies/${name}/suggestions`, { count: 1, client_id: 'ui' })).trials;
      const body = i === 2 ? { infeasible: true, reason: 'the rig broke' }
        : { metrics: { y: objective(t.parameters), c: constraint(t.parameters) } };
      await api('POST', `/v1/studies/${name}/trials/${t.id}`, body);
    }
    await api('POST', `/v1/studies/${name}/trials`,           /* attached: violates c */
      { parameters: { x: 2.9, lr: 0.01, opt: 'adam' }, metrics: { y: -5, c: 0.98 } });
    const deadline = Date.now() + TIMEOUT;
    for (;;) {
      study = await api('GET', `/v1/studies/${name}`);
      if (study.model && study.model.trials_included >= 5) break;
      if (Date.now() > deadline) throw new Error(`no study model: ${JSON.stringify(study.model)}`);
      await new Promise((r) => setTimeout(r, 250));
    }
    trials = (await api('GET', `/v1/studies/${name}/trials`)).trials;
    check('the study has 11 trials and a best feasible trial', trials.length === 11 && study.best_trial,
      `${trials.length} trials, best ${JSON.stringify(study.best_trial)}`);
  });
  if (!study || !trials) return;

  await step('studies: the list', async () => {
    await page.goto(`${BASE}/#/studies`);
    await page.waitForSelector('#studies-table[data-state="ready"]');
    const link = await page.getAttribute(`#studies-body a[href="#/studies/${name}"]`, 'href');
    check('#/studies lists the study with a link to it', link === `#/studies/${name}`, `${link}`);
    await shot(page, 'studies');
  });

  await step('studies: one study', async () => {
    await page.goto(`${BASE}/#/studies/${name}`);
    await page.waitForSelector('#study-posterior-box[data-state="ready"], #study-posterior-box[data-state="error"], #study-posterior-box[data-state="empty"]');
    const st = await page.getAttribute('#study-posterior-box', 'data-state');
    check('the study\'s posterior draws', st === 'ready', `${st}: ${await page.textContent('#study-error')}`);
    const rows = await page.$$eval('#study-trials-body tr', (trs) => trs.map((tr) => ({
      id: Number(tr.dataset.trial), best: tr.classList.contains('best'), text: tr.textContent })));
    check('the trials table has one row a trial, in id order', rows.map((r) => r.id).join() === trials.map((t) => t.id).join(),
      rows.map((r) => r.id).join());
    const best = rows.filter((r) => r.best).map((r) => r.id);
    check('the best feasible trial (GET best_trial) is the one row marked', best.length === 1 && best[0] === study.best_trial.id,
      `${best} vs ${study.best_trial.id}`);
    check('an infeasible trial shows its reason', rows.some((r) => /infeasible \(the rig broke\)/.test(r.text)), 'no reason shown');

    /* the running best: the best feasible y over the trials so far, by trial number */
    const progress = await datasets(page, 'study-progress-chart');
    const running = byLabel(progress, 'best feasible so far');
    let bestY = null;
    const want = [];
    for (const t of trials) {
      if (t.state === 'completed' && t.metrics.c <= 0.8 && (bestY === null || t.metrics.y < bestY)) bestY = t.metrics.y;
      if (bestY !== null) want.push(bestY);
    }
    check('the running best is the best feasible objective so far (the attached -5 violates c)',
      running && !mismatch(running.data.map((p) => p.y), want), running ? mismatch(running.data.map((p) => p.y), want) : 'none');

    /* the posterior along x through the best trial: the daemon's predict at encoded points */
    await page.selectOption('#study-slice', 'x');
    await page.waitForSelector('#study-posterior-box[data-param="x"][data-state="ready"]');
    const sets = await datasets(page, 'study-posterior-chart');
    const mean = byLabel(sets, 'posterior mean');
    const upper = byLabel(sets, '95% band');
    const xs = mean.data.map((p) => p.x);
    const X = xs.map((x) => encoded({ ...study.best_trial.parameters, x }));
    /* the version the page drew (a refit may have saved a newer one since the GET above) */
    const version = Number(await page.getAttribute('#study-posterior-box', 'data-version'));
    const ref = await api('POST', `/v1/models/${encodeURIComponent(study.model.name)}/predict`,
      { X, version, include_noise: false });
    check('the posterior mean equals predict at the encoded points', !mismatch(mean.data.map((p) => p.y), ref.mean),
      mismatch(mean.data.map((p) => p.y), ref.mean));
    const hi = ref.mean.map((m, i) => m + Z95 * Math.sqrt(ref.variance[i]));
    check('the band is mean ± 1.96 sd of the latent function', !mismatch(upper.data.map((p) => p.y), hi),
      mismatch(upper.data.map((p) => p.y), hi));
    check('the slice spans the parameter\'s bounds', xs[0] === -2 && xs[xs.length - 1] === 3, `${xs[0]} .. ${xs[xs.length - 1]}`);
    await page.selectOption('#study-slice', 'lr');
    await page.waitForSelector('#study-posterior-box[data-param="lr"][data-state="ready"]');
    const lr = byLabel(await datasets(page, 'study-posterior-chart'), 'posterior mean').data.map((p) => p.x);
    check('a log-scaled parameter is sliced on a log grid', Math.abs(lr[0] - 0.001) < 1e-12
      && Math.abs(Math.log(lr[1] / lr[0]) - Math.log(lr[2] / lr[1])) < 1e-9, `${lr.slice(0, 3)}`);
    await shot(page, 'study');
  });
  await fetch(`${BASE}/v1/studies/${name}`, { method: 'DELETE' });
}
