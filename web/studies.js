/* gpserve browser view: studies (the daemon suggests the next experiment).
 *   #/studies          every study: trials made, completed, created
 *   #/studies/NAME     one study: its settings and best trial, the trials (the best feasible
 *                      one highlighted), the objective by trial number with the running best,
 *                      and the posterior of the study's model (study.NAME) along one parameter
 *                      through the best trial
 * Loaded before app.js, which calls window.gpserveStudies(helpers) with its own API and plot
 * helpers and routes #/studies... here. The study's model is fitted on the parameters encoded
 * into [0, 1] (docs/design/api.md, "Studies"); encode() below is that encoding. */
'use strict';

window.gpserveStudies = (h) => {
  const { $, api, el, enc, fmt, showError, clearError, linspace, makeChart, destroyChart,
    lineSet, bandSets, pointSet, pts, COLORS } = h;
  const Z95 = 1.959963984540054;
  const GRID = 200;
  let current = null; /* {study, trials} on show */

  const studyPath = (name) => `/v1/studies/${enc(name)}`;

  /* ------------------------------------------------------------- the list */

  async function renderList(isCurrent) {
    const body = $('studies-body');
    const status = $('studies-status');
    clearError($('studies-error'));
    status.textContent = 'Loading…';
    $('studies-table').dataset.state = 'loading';
    let list;
    try {
      list = (await api('GET', '/v1/studies')).studies || [];
    } catch (e) {
      if (!isCurrent()) return;
      showError($('studies-error'), e);
      status.textContent = '';
      $('studies-table').dataset.state = 'error';
      return;
    }
    if (!isCurrent()) return;
    body.replaceChildren(...list.map((s) => el('tr', {},
      el('td', {}, el('a', { href: `#/studies/${enc(s.name)}`, text: s.name })),
      el('td', { className: 'num', text: s.trials }),
      el('td', { className: 'num', text: s.completed }),
      el('td', { text: s.created_at || '–' }))));
    status.textContent = list.length
      ? `${list.length} stud${list.length === 1 ? 'y' : 'ies'}.`
      : 'No studies yet: POST /v1/studies creates one (README, "Python client").';
    $('studies-table').dataset.state = 'ready';
  }

  /* ------------------------------------------------------ the encoding */

  const isLog = (p) => p.scale === 'log' || p.log_scale === true;

  /* [a, b]: the interval a numeric parameter is encoded on (integers own k ± 0.5). */
  function span(p) {
    let [lo, hi] = p.bounds;
    if (p.type === 'integer') {
      lo -= 0.5;
      hi += 0.5;
    }
    return isLog(p) ? [Math.log(lo), Math.log(hi)] : [lo, hi];
  }

  /* The encoded point (u in [0, 1], one column per double or integer, one-hot per
   * categorical) of a trial's parameters by name. */
  function encode(params, values) {
    const u = [];
    for (const p of params) {
      const v = values[p.name];
      if (p.type === 'categorical') {
        for (const c of p.values) u.push(c === v ? 1 : 0);
      } else {
        const [a, b] = span(p);
        u.push(((isLog(p) ? Math.log(v) : v) - a) / (b - a));
      }
    }
    return u;
  }

  /* ---------------------------------------------------------- one study */

  function objectiveOf(cfg) {
    const o = cfg.objective || {};
    return { name: o.name, maximize: o.goal === 'maximize' };
  }

  function feasible(cfg, t) {
    return t.state === 'completed' && t.metrics
      && (cfg.constraints || []).every((c) => t.metrics[c.name] <= c.max);
  }

  function facts(study) {
    const cfg = study.config || {};
    const o = objectiveOf(cfg);
    const counts = study.trials || {};
    const model = study.model;
    const rows = [
      ['objective', `${o.name} (${o.maximize ? 'maximize' : 'minimize'})`],
      ['parameters', (cfg.parameters || []).map((p) => (p.type === 'categorical'
        ? `${p.name} ∈ {${p.values.join(', ')}}`
        : `${p.name} ∈ [${p.bounds[0]}, ${p.bounds[1]}] ${p.type}${isLog(p) ? ', log' : ''}`)).join('; ')],
      ['constraints', (cfg.constraints || []).map((c) => `${c.name} ≤ ${c.max}`).join('; ') || 'none'],
      ['acquisition', cfg.acquisition ? cfg.acquisition.type || JSON.stringify(cfg.acquisition) : '–'],
      ['trials', Object.entries(counts).map(([k, v]) => `${v} ${k}`).join(', ')],
      ['best trial', study.best_trial
        ? `#${study.best_trial.id}: ${o.name} = ${fmt(study.best_trial.metrics[o.name], 6)}` : 'none yet'],
      ['model', model ? `${model.name} version ${model.version} (${model.trials_included} trials)`
        : 'none yet (fitted once the initial design is complete)'],
    ];
    $('study-facts').replaceChildren(...rows.flatMap(([k, v]) => [el('dt', { text: k }), el('dd', { text: v })]));
  }

  function trialsTable(study, trials) {
    const cfg = study.config || {};
    const params = cfg.parameters || [];
    const metrics = [objectiveOf(cfg).name, ...(cfg.constraints || []).map((c) => c.name)];
    const bestId = study.best_trial ? study.best_trial.id : null;
    $('study-trials-head').replaceChildren(el('tr', {},
      el('th', { scope: 'col', className: 'num', text: 'id' }),
      el('th', { scope: 'col', text: 'state' }),
      ...params.map((p) => el('th', { scope: 'col', className: 'num', text: p.name })),
      ...metrics.map((m) => el('th', { scope: 'col', className: 'num', text: m }))));
    $('study-trials-body').replaceChildren(...trials.map((t) => {
      const best = t.id === bestId;
      const row = el('tr', { className: best ? 'best' : null, 'data-trial': t.id,
        'aria-label': best ? `trial ${t.id}, the best feasible trial` : null },
      el('td', { className: 'num', text: best ? `★ ${t.id}` : t.id }),
      el('td', { text: t.state + (t.reason ? ` (${t.reason})` : '') }),
      ...params.map((p) => el('td', { className: 'num', text: fmt((t.parameters || {})[p.name], 5) })),
      ...metrics.map((m) => el('td', { className: 'num', text: t.metrics ? fmt(t.metrics[m], 5) : '–' })));
      return row;
    }));
  }

  /* The objective of each completed trial by its number, and the best feasible so far. */
  function drawProgress(study, trials) {
    const cfg = study.config || {};
    const o = objectiveOf(cfg);
    const done = trials.filter((t) => t.state === 'completed' && t.metrics);
    const better = (a, b) => (o.maximize ? a > b : a < b);
    const running = [];
    let best = null;
    for (const t of trials) {
      if (feasible(cfg, t) && (best === null || better(t.metrics[o.name], best))) best = t.metrics[o.name];
      if (best !== null) running.push({ x: t.id, y: best });
    }
    const ok = done.filter((t) => feasible(cfg, t));
    const sets = [
      pointSet(`${o.name} of each feasible completed trial`, ok.map((t) => ({ x: t.id, y: t.metrics[o.name] })), COLORS.train),
      lineSet('best feasible so far', running, { stepped: 'before' }),
    ];
    const infeasible = done.filter((t) => !feasible(cfg, t));
    if (infeasible.length) {
      sets.push(pointSet('completed, a constraint violated', infeasible.map((t) => ({ x: t.id, y: t.metrics[o.name] })),
        COLORS.rows));
    }
    makeChart('study-progress-chart', sets, 'trial', o.name);
    $('study-progress-box').dataset.state = 'ready';
  }

  function setupSlice(study) {
    const select = $('study-slice');
    const prev = select.value;
    const numeric = (study.config.parameters || []).filter((p) => p.type !== 'categorical');
    select.replaceChildren(...numeric.map((p) => el('option', { value: p.name, text: p.name })));
    if (numeric.some((p) => p.name === prev)) select.value = prev;
  }

  /* The model's posterior along one parameter, the others held at the best trial's values:
   * mean and mean ± 1.96 sd of the latent function (noise excluded). */
  async function drawPosterior(isCurrent) {
    const { study, trials } = current;
    const note = $('study-plot-note');
    const box = $('study-posterior-box');
    const cfg = study.config || {};
    const params = cfg.parameters || [];
    const p = params.find((q) => q.name === $('study-slice').value);
    const through = study.best_trial || trials.find((t) => t.state === 'completed');
    destroyChart('study-posterior-chart');
    if (!study.model || !p || !through) {
      note.textContent = !p ? 'No numeric parameter to slice along.'
        : 'No model yet: the study\'s model is fitted once its initial design is complete.';
      box.dataset.state = 'empty';
      return;
    }
    const [lo, hi] = p.bounds;
    const xs = isLog(p) ? linspace(Math.log(lo), Math.log(hi), GRID).map(Math.exp) : linspace(lo, hi, GRID);
    const X = xs.map((x) => encode(params, { ...through.parameters, [p.name]: x }));
    box.dataset.state = 'loading';
    box.dataset.param = p.name;
    box.dataset.version = String(study.model.version);
    let ans;
    try {
      ans = await api('POST', `/v1/models/${enc(study.model.name)}/predict`,
        { json: { X, version: study.model.version, include_noise: false } });
    } catch (e) {
      if (!isCurrent()) return;
      showError($('study-error'), e);
      box.dataset.state = 'error';
      return;
    }
    if (!isCurrent()) return;
    const mean = ans.mean.map(Number);
    const sd = ans.variance.map((v) => Math.sqrt(Math.max(0, v)));
    const o = objectiveOf(cfg).name;
    const done = trials.filter((t) => t.state === 'completed' && t.metrics);
    const sets = [
      ...bandSets(xs, mean.map((m, i) => m - Z95 * sd[i]), mean.map((m, i) => m + Z95 * sd[i]), '95% band'),
      lineSet('posterior mean', pts(xs, mean)),
      pointSet('completed trials (other parameters vary)', done.map((t) => ({ x: t.parameters[p.name], y: t.metrics[o] })),
        COLORS.rows),
      pointSet(`trial ${through.id}`, [{ x: through.parameters[p.name], y: through.metrics[o] }], COLORS.train),
    ];
    makeChart('study-posterior-chart', sets, p.name, o, { x: { type: isLog(p) ? 'logarithmic' : 'linear', min: lo, max: hi } });
    const held = params.filter((q) => q !== p).map((q) => `${q.name} = ${fmt(through.parameters[q.name], 5)}`);
    note.textContent = `Slice along ${p.name} through trial ${through.id}${held.length ? ` (${held.join(', ')})` : ''}; `
      + `model ${study.model.name} version ${study.model.version}, ${study.model.trials_included} trials.`;
    $('study-posterior-caption').textContent = 'Posterior mean of the study\'s model and the band mean ± 1.96 sd '
      + 'of the latent function (noise excluded), from POST /v1/models/'
      + `${study.model.name}/predict with the parameters encoded into [0, 1].`;
    box.dataset.state = 'ready';
  }

  async function renderStudy(name, isCurrent) {
    clearError($('study-error'));
    $('study-title').textContent = name;
    $('study-facts').replaceChildren();
    $('study-trials-body').replaceChildren();
    $('study-plot-note').textContent = '';
    $('study-posterior-caption').textContent = '';
    destroyChart('study-progress-chart');
    destroyChart('study-posterior-chart');
    $('study-progress-box').dataset.state = 'loading';
    $('study-posterior-box').dataset.state = 'loading';
    let study;
    let trials;
    try {
      [study, trials] = await Promise.all([api('GET', studyPath(name)),
        api('GET', `${studyPath(name)}/trials`).then((a) => a.trials)]);
    } catch (e) {
      if (!isCurrent()) return;
      showError($('study-error'), e);
      $('study-progress-box').dataset.state = 'error';
      $('study-posterior-box').dataset.state = 'error';
      return;
    }
    if (!isCurrent()) return;
    current = { study, trials };
    facts(study);
    trialsTable(study, trials);
    drawProgress(study, trials);
    setupSlice(study);
    await drawPosterior(isCurrent);
  }

  return {
    renderList,
    renderStudy,
    redrawPosterior: (isCurrent) => (current ? drawPosterior(isCurrent) : undefined),
    encode,
  };
};
