/* gpserve browser view: one page, five views chosen by the URL's hash
 *   #/models                      every model with its latest version and fit diagnostics
 *   #/fit                         a fit form; the fit runs as an async job with a progress bar
 *   #/models/NAME[/versions/V]    one model: facts, aliases (promote the version viewed,
 *                                 roll an alias back), posterior plot, predicted-vs-observed
 *   #/studies, #/studies/NAME     studies and one study's trials (web/studies.js)
 * Plain JavaScript, no build step; plots by Chart.js (web/vendor/, the global `Chart`).
 * Every request goes to the daemon that served the page, so the browser sends the
 * credentials it was asked for on `/` (HTTP Basic, the API key as the password)
 * with these requests too: nothing here handles keys. */
'use strict';

(() => {
  const GRID_POINTS = 200;
  const N_SAMPLES = 3;
  const SAMPLE_SEED = 1;
  const Z95 = 1.959963984540054; /* the 0.975 quantile of the standard normal */
  const POLL_MS = 250;
  const ROWS_KEY = 'gpserve.rows:'; /* sessionStorage: training rows of fits made here */
  const ROWS_MAX_CHARS = 4e6;

  const $ = (id) => document.getElementById(id);
  const enc = encodeURIComponent;
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  /* ------------------------------------------------------------------ the API */

  class ApiError extends Error {
    constructor(status, code, message, field) {
      super(message);
      this.status = status;
      this.code = code;
      this.field = field || '';
    }
    describe() {
      const where = this.field ? ` (field ${this.field})` : '';
      const status = this.status ? `${this.status} ` : '';
      return `${status}${this.code}: ${this.message}${where}`;
    }
  }

  /* One request; the parsed JSON answer, or an ApiError carrying the daemon's
   * {"error": {"code", "message", "field"}}. */
  async function api(method, path, opts = {}) {
    const init = { method, headers: { Accept: 'application/json' } };
    if (opts.json !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(opts.json);
    } else if (opts.csv !== undefined) {
      init.headers['Content-Type'] = 'text/csv';
      init.body = opts.csv;
    }
    let res;
    try {
      res = await fetch(path, init);
    } catch (e) {
      throw new ApiError(0, 'network', `the daemon did not answer ${method} ${path}: ${e.message}`);
    }
    const text = await res.text();
    let body = null;
    if (text) {
      try {
        body = JSON.parse(text);
      } catch (e) {
        body = null;
      }
    }
    if (!res.ok) {
      const err = body && body.error ? body.error : {};
      throw new ApiError(res.status, err.code || `http_${res.status}`,
        err.message || `${method} ${path} answered ${res.status} ${res.statusText}`, err.field);
    }
    return body;
  }

  const modelPath = (name) => `/v1/models/${enc(name)}`;

  /* ------------------------------------------------------------ small helpers */

  function fmt(x, digits = 4) {
    if (x === null || x === undefined) return '–';
    if (typeof x !== 'number') return String(x);
    if (!Number.isFinite(x)) return String(x);
    if (x === 0) return '0';
    const a = Math.abs(x);
    if (a >= 1e5 || a < 1e-3) return x.toExponential(digits - 1);
    return String(Number(x.toPrecision(digits)));
  }

  function fmtSeconds(s) {
    if (typeof s !== 'number') return '–';
    if (s < 1) return `${fmt(s * 1000, 3)} ms`;
    if (s < 120) return `${fmt(s, 3)} s`;
    return `${fmt(s / 60, 3)} min`;
  }

  function el(tag, attrs = {}, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'text') e.textContent = v;
      else if (k === 'className') e.className = v;
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }

  function showError(box, err) {
    const text = err instanceof ApiError ? err.describe() : (err && err.message) || String(err);
    box.textContent = text;
    box.hidden = false;
  }

  function clearError(box) {
    box.textContent = '';
    box.hidden = true;
  }

  function median(values) {
    const s = [...values].sort((a, b) => a - b);
    const m = s.length >> 1;
    return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
  }

  function linspace(lo, hi, n) {
    const out = new Array(n);
    for (let i = 0; i < n; i++) out[i] = lo + ((hi - lo) * i) / (n - 1);
    return out;
  }

  /* The first output of a value (a model of several outputs answers rows). */
  const first = (v) => (Array.isArray(v) ? v[0] : v);
  /* Output o of a value. */
  const outputOf = (o) => (v) => (Array.isArray(v) ? v[o] : v);
  const logistic = (f) => 1 / (1 + Math.exp(-f));

  /* ---------------------------------------------------------------- CSV rows */

  /* RFC 4180 records: commas, LF or CRLF, quoted fields with "" for a quote and
   * line breaks inside quotes, a UTF-8 byte order mark skipped; blank lines left out. */
  function csvRecords(text) {
    if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    const records = [];
    let row = [];
    let field = '';
    let quoted = false;
    let i = 0;
    const endRow = () => {
      row.push(field);
      if (!(row.length === 1 && row[0].trim() === '')) records.push(row);
      row = [];
      field = '';
    };
    while (i < text.length) {
      const c = text[i];
      if (quoted) {
        if (c === '"') {
          if (text[i + 1] === '"') {
            field += '"';
            i += 2;
            continue;
          }
          quoted = false;
        } else {
          field += c;
        }
        i++;
        continue;
      }
      if (c === '"') quoted = true;
      else if (c === ',') {
        row.push(field);
        field = '';
      } else if (c === '\n' || c === '\r') {
        endRow();
        if (c === '\r' && text[i + 1] === '\n') i++;
      } else field += c;
      i++;
    }
    if (quoted) throw new Error('a quoted field is not closed');
    if (field !== '' || row.length > 0) endRow();
    return records;
  }

  /* A header row and numeric rows -> {names, X, y}: y is the target column (the
   * last, or `target`: a header name or a 0-based index), X the others in order. */
  function csvTable(text, target = '') {
    const records = csvRecords(text);
    if (records.length < 2) throw new Error('a header row and at least one row of numbers are needed');
    const header = records[0].map((h) => h.trim());
    const width = header.length;
    if (width < 2) throw new Error('at least two columns are needed: the inputs, then y');
    let t = width - 1;
    const tg = String(target).trim();
    if (tg !== '') {
      t = /^[0-9]+$/.test(tg) ? Number(tg) : header.indexOf(tg);
      if (t < 0 || t >= width) throw new Error(`no column '${tg}' in the header`);
    }
    const X = [];
    const y = [];
    for (let r = 1; r < records.length; r++) {
      const rec = records[r];
      if (rec.length !== width) throw new Error(`row ${r + 1} has ${rec.length} fields; the header has ${width}`);
      const nums = rec.map((s, c) => {
        const v = s.trim() === '' ? NaN : Number(s);
        if (!Number.isFinite(v)) throw new Error(`row ${r + 1}, column ${c + 1} ('${s}') is not a number`);
        return v;
      });
      y.push(nums[t]);
      X.push(nums.filter((_, c) => c !== t));
    }
    return { names: header.filter((_, c) => c !== t), target: header[t], X, y };
  }

  function describeRows(rows) {
    const d = rows.X.length ? rows.X[0].length : 0;
    return `${rows.X.length} rows, ${d} input${d === 1 ? '' : 's'} (${rows.names.join(', ')}) and y = ${rows.target}`;
  }

  /* Training rows of a fit made from this page, kept for this tab: the daemon
   * does not answer a model's training data. Keyed by name and creation time, so
   * a model fitted elsewhere under the same name never shows these rows. */
  const rowsKey = (model) => `${ROWS_KEY}${model.name}:${model.version}:${model.created_at}`;

  function keepTrainingRows(model, rows) {
    try {
      const text = JSON.stringify(rows);
      if (text.length > ROWS_MAX_CHARS) return false;
      sessionStorage.setItem(rowsKey(model), text);
      return true;
    } catch (e) {
      return false; /* storage full or off: the view says the points are unknown */
    }
  }

  function trainingRows(model) {
    try {
      const text = sessionStorage.getItem(rowsKey(model));
      return text ? JSON.parse(text) : null;
    } catch (e) {
      return null;
    }
  }

  /* ---------------------------------------------------------------- routing */

  const views = { models: $('view-models'), fit: $('view-fit'), model: $('view-model'),
    studies: $('view-studies'), study: $('view-study') };
  const state = {
    methods: null,      /* GET /v1/methods, once */
    job: null,          /* the fit job of the form: {id, status} */
    model: null,        /* the model on show */
    aliases: [],        /* its aliases (GET .../aliases), for the alias controls */
    latestVersion: 0,   /* its latest version */
    rows: new Map(),    /* data rows uploaded per model name */
    charts: {},         /* canvas id -> Chart */
    renderToken: 0,     /* drops the answers of a render overtaken by another */
  };

  function parseHash() {
    const parts = (location.hash || '#/models').replace(/^#\/?/, '').split('/').map(decodeURIComponent);
    if (parts[0] === 'fit') return { view: 'fit' };
    if (parts[0] === 'studies') return parts[1] ? { view: 'study', name: parts[1] } : { view: 'studies' };
    if (parts[0] === 'models' && parts[1]) {
      const v = parts[2] === 'versions' && /^[0-9]+$/.test(parts[3] || '') ? Number(parts[3]) : 0;
      return { view: 'model', name: parts[1], version: v };
    }
    return { view: 'models' };
  }

  function route() {
    const r = parseHash();
    for (const [k, sec] of Object.entries(views)) sec.hidden = k !== r.view;
    $('nav-models').toggleAttribute('aria-current', false);
    $('nav-fit').toggleAttribute('aria-current', false);
    $('nav-studies').toggleAttribute('aria-current', false);
    const nav = { fit: 'nav-fit', studies: 'nav-studies', study: 'nav-studies' }[r.view] || 'nav-models';
    $(nav).setAttribute('aria-current', 'page');
    const token = ++state.renderToken;
    const isCurrent = () => token === state.renderToken;
    if (r.view === 'studies') {
      document.title = 'Studies · gpserve';
      studies.renderList(isCurrent);
    } else if (r.view === 'study') {
      document.title = `${r.name} · study · gpserve`;
      studies.renderStudy(r.name, isCurrent);
    } else if (r.view === 'models') {
      document.title = 'Models · gpserve';
      renderModels();
    } else if (r.view === 'fit') {
      document.title = 'Fit · gpserve';
      renderFit();
    } else {
      document.title = `${r.name} · gpserve`;
      renderModel(r.name, r.version);
    }
  }

  /* ------------------------------------------------------------ models view */

  async function renderModels() {
    const token = state.renderToken;
    const body = $('models-body');
    const status = $('models-status');
    const errBox = $('models-error');
    clearError(errBox);
    status.textContent = 'Loading…';
    $('models-table').dataset.state = 'loading';
    let list;
    try {
      list = await api('GET', '/v1/models');
    } catch (e) {
      if (token !== state.renderToken) return;
      showError(errBox, e);
      status.textContent = '';
      $('models-table').dataset.state = 'error';
      return;
    }
    /* The list has name, version, method, n and d; the likelihood, the
     * diagnostics and the versions are in each model's own answer. */
    const details = await Promise.all(list.models.map((m) =>
      api('GET', modelPath(m.name)).catch((e) => ({ ...m, loadError: e }))));
    if (token !== state.renderToken) return;
    body.replaceChildren(...details.map(modelRow));
    status.textContent = details.length
      ? `${details.length} model${details.length === 1 ? '' : 's'}.`
      : 'No models yet: fit one.';
    $('models-table').dataset.state = 'ready';
    const failed = details.filter((m) => m.loadError);
    if (failed.length) showError(errBox, failed[0].loadError);
  }

  function modelRow(m) {
    const diag = m.diagnostics || {};
    const versions = Array.isArray(m.versions) ? m.versions.length : 1;
    const link = el('a', { href: `#/models/${enc(m.name)}`, text: m.name });
    const del = el('button', { type: 'button', className: 'danger', text: 'Delete',
      'aria-label': `Delete model ${m.name}` });
    del.addEventListener('click', () => deleteModel(m.name, versions));
    const objective = diag.objective_name ? `${diag.objective_name} = ${fmt(diag.objective, 6)}` : '–';
    const num = (v) => el('td', { className: 'num', text: v });
    return el('tr', { 'data-model': m.name },
      el('td', {}, link),
      el('td', { text: versions > 1 ? `${m.version} (of ${versions})` : String(m.version) }),
      el('td', { text: m.method }),
      el('td', { text: m.likelihood || '–' }),
      num(String(m.n_train)),
      num(String(m.input_dim)),
      el('td', { text: objective }),
      num(diag.iterations === undefined ? '–' : String(diag.iterations)),
      el('td', { text: diag.converged === undefined ? '–' : diag.converged ? 'yes' : 'no' }),
      num(fmtSeconds(diag.fit_seconds)),
      el('td', { text: (m.created_at || '').replace('T', ' ').replace('Z', ' UTC') }),
      el('td', {}, del));
  }

  async function deleteModel(name, versions) {
    const what = versions > 1 ? `all ${versions} versions of model '${name}'` : `model '${name}'`;
    if (!window.confirm(`Delete ${what}? This cannot be undone.`)) return;
    try {
      await api('DELETE', modelPath(name));
    } catch (e) {
      showError($('models-error'), e);
      return;
    }
    state.rows.delete(name);
    renderModels();
  }

  $('models-refresh').addEventListener('click', () => renderModels());

  /* --------------------------------------------------------------- fit view */

  async function loadMethods() {
    if (!state.methods) state.methods = (await api('GET', '/v1/methods')).methods;
    return state.methods;
  }

  async function renderFit() {
    const errBox = $('fit-error');
    if (state.methods) return;
    try {
      const methods = await loadMethods();
      const select = $('fit-method');
      select.replaceChildren(...methods.map((m) => el('option', { value: m.name, text: m.name })));
      select.value = methods.some((m) => m.name === 'exact') ? 'exact' : methods[0].name;
      methodChanged();
      $('fit-form').dataset.state = 'ready';
    } catch (e) {
      showError(errBox, e);
    }
  }

  const currentMethod = () => state.methods.find((m) => m.name === $('fit-method').value);

  function methodChanged() {
    const m = currentMethod();
    $('fit-method-summary').textContent = m.summary || '';
    const lik = $('fit-likelihood');
    lik.replaceChildren(...m.likelihoods.map((l) => el('option', { value: l, text: l })));
    lik.disabled = m.likelihoods.length < 2;
    const leaves = m.kernels.filter((k) => k !== 'sum' && k !== 'product');
    $('fit-kernel').replaceChildren(el('option', { value: '', text: 'method default' }),
      ...leaves.map((k) => el('option', { value: k, text: k })));
    $('fit-options-fields').replaceChildren(...m.options.map(optionField));
  }

  /* One input per option of the method, from its type, bounds, choices and
   * keywords; empty means the method's default. */
  function optionField(opt) {
    const id = `opt-${opt.name}`;
    const dflt = opt.default === null || opt.default === undefined ? 'none' : JSON.stringify(opt.default);
    let input;
    if (opt.type === 'boolean' || (opt.type === 'string' && Array.isArray(opt.choices))) {
      const values = opt.type === 'boolean' ? ['true', 'false'] : opt.choices;
      input = el('select', { id },
        el('option', { value: '', text: `default (${String(opt.default)})` }),
        ...values.map((v) => el('option', { value: v, text: v })));
    } else if (opt.type === 'object') {
      input = el('textarea', { id, rows: 2, spellcheck: 'false', placeholder: 'JSON object (default: none)' });
    } else if ((opt.type === 'integer' || opt.type === 'number') && !Array.isArray(opt.keywords)) {
      input = el('input', { id, type: 'number', step: opt.type === 'integer' ? 1 : 'any',
        min: opt.min ?? undefined, max: opt.max ?? undefined, placeholder: `default ${dflt}` });
    } else {
      const kw = Array.isArray(opt.keywords) ? ` or ${opt.keywords.join(', ')}` : '';
      input = el('input', { id, type: 'text', autocomplete: 'off', placeholder: `default ${dflt}${kw}` });
    }
    input.dataset.option = opt.name;
    input.dataset.type = opt.type;
    const help = opt.help ? el('small', { id: `${id}-help`, text: opt.help, title: opt.help }) : null;
    if (help) input.setAttribute('aria-describedby', help.id);
    return el('div', { className: 'field option' }, el('label', { for: id, text: opt.name }), input, help);
  }

  /* The options the user set, typed as the method declares them. */
  function collectOptions() {
    const out = {};
    for (const input of $('fit-options-fields').querySelectorAll('[data-option]')) {
      const raw = input.value.trim();
      input.removeAttribute('aria-invalid');
      if (raw === '') continue;
      const name = input.dataset.option;
      const type = input.dataset.type;
      let v = raw;
      if (type === 'boolean') v = raw === 'true';
      else if (type === 'object') {
        try {
          v = JSON.parse(raw);
        } catch (e) {
          input.setAttribute('aria-invalid', 'true');
          throw new Error(`options.${name}: not JSON (${e.message})`);
        }
      } else if (type === 'integer' || type === 'number') {
        const n = Number(raw);
        if (raw !== '' && Number.isFinite(n)) v = n; /* else a keyword such as "auto" */
      }
      out[name] = v;
    }
    return out;
  }

  async function csvText() {
    const file = $('fit-file').files[0];
    if (file) return file.text();
    return $('fit-csv').value;
  }

  async function summarizeFitData() {
    const summary = $('fit-data-summary');
    let text;
    try {
      text = await csvText();
    } catch (e) {
      summary.textContent = `The file cannot be read: ${e.message}`;
      return;
    }
    if (!text.trim()) {
      summary.textContent = '';
      return;
    }
    try {
      summary.textContent = describeRows(csvTable(text, $('fit-target').value));
    } catch (e) {
      summary.textContent = `Not read here (${e.message}); the daemon will say what it finds.`;
    }
  }

  let summaryTimer = 0; /* the pending summary of the pasted CSV */

  function setJobUi(running) {
    $('fit-submit').disabled = running;
    $('fit-cancel').disabled = !running;
  }

  function showJob(job) {
    const box = $('fit-job');
    const bar = $('fit-progress');
    const p = job.progress || {};
    box.hidden = false;
    box.dataset.status = job.status;
    const max = Math.max(1, p.max_iterations || 1);
    bar.max = max;
    const done = job.status === 'succeeded';
    bar.value = done ? max : Math.min(max, p.iteration || 0);
    const parts = [job.status];
    if (job.status === 'running' || job.status === 'queued') {
      const pct = p.max_iterations ? ` (${fmt((100 * (p.iteration || 0)) / p.max_iterations, 2)}%)` : '';
      parts.push(`iteration ${p.iteration || 0} of ${p.max_iterations || '?'}${pct}`);
      if (p.objective !== null && p.objective !== undefined) parts.push(`objective ${fmt(p.objective, 6)}`);
      if (p.elapsed_seconds !== undefined) parts.push(fmtSeconds(p.elapsed_seconds));
    }
    const status = $('fit-status');
    status.replaceChildren(parts.join(' · '));
    if (done && job.model) {
      const m = job.model;
      status.append(' · ', el('a', { href: `#/models/${enc(m.name)}/versions/${m.version}`,
        id: 'fit-model-link', text: `view ${m.name} version ${m.version}` }));
    }
    if (job.status === 'failed' && job.error) {
      showError($('fit-error'), new ApiError(0, job.error.code, job.error.message, job.error.field));
    }
  }

  async function submitFit(ev) {
    ev.preventDefault();
    const errBox = $('fit-error');
    clearError(errBox);
    /* The previous job's outcome goes at once (before anything is awaited). */
    $('fit-job').hidden = true;
    delete $('fit-job').dataset.status;
    if (!state.methods) {
      showError(errBox, new Error('the methods are not loaded yet'));
      return;
    }
    const nameInput = $('fit-name');
    const name = nameInput.value.trim();
    nameInput.removeAttribute('aria-invalid');
    if (!/^[A-Za-z0-9._-]{1,64}$/.test(name)) {
      nameInput.setAttribute('aria-invalid', 'true');
      nameInput.focus();
      showError(errBox, new Error('name: 1 to 64 letters, digits, ".", "_" or "-"'));
      return;
    }
    let options;
    let text;
    try {
      options = collectOptions();
      text = await csvText();
    } catch (e) {
      showError(errBox, e);
      return;
    }
    if (!text.trim()) {
      showError(errBox, new Error('give the training data: choose a CSV file or paste CSV text'));
      return;
    }
    let rows = null;
    clearTimeout(summaryTimer);
    try {
      rows = csvTable(text, $('fit-target').value);
      $('fit-data-summary').textContent = describeRows(rows);
    } catch (e) {
      rows = null; /* the daemon's parser decides; only the plot's points are lost */
      $('fit-data-summary').textContent = `Not read here (${e.message}); the daemon will say what it finds.`;
    }
    const q = [['name', name], ['method', $('fit-method').value], ['async', 'true'],
      ['likelihood', $('fit-likelihood').value]];
    if ($('fit-kernel').value) q.push(['kernel', JSON.stringify({ type: $('fit-kernel').value })]);
    if ($('fit-seed').value.trim()) q.push(['seed', $('fit-seed').value.trim()]);
    if ($('fit-target').value.trim()) q.push(['target', $('fit-target').value.trim()]);
    if (Object.keys(options).length) q.push(['options', JSON.stringify(options)]);
    const query = q.map(([k, v]) => `${enc(k)}=${enc(v)}`).join('&');

    setJobUi(true);
    showJob({ status: 'submitting', progress: {} });
    let answer;
    try {
      answer = await api('POST', `/v1/models?${query}`, { csv: text });
    } catch (e) {
      setJobUi(false);
      showJob({ status: 'failed', progress: {} });
      showError(errBox, e);
      return;
    }
    let job;
    if (answer && answer.job) {
      state.job = { id: answer.job };
      job = await pollJob(answer.job);
    } else {
      job = { status: 'succeeded', model: answer, progress: {} }; /* a synchronous answer */
    }
    state.job = null;
    setJobUi(false);
    if (job && job.status === 'succeeded' && job.model && rows) keepTrainingRows(job.model, rows);
    if (job) showJob(job);
  }

  async function pollJob(id) {
    for (;;) {
      let job;
      try {
        job = await api('GET', `/v1/jobs/${enc(id)}`);
      } catch (e) {
        showError($('fit-error'), e);
        return null;
      }
      if (['succeeded', 'failed', 'cancelled'].includes(job.status)) return job;
      showJob(job);
      await sleep(POLL_MS);
    }
  }

  async function cancelFit() {
    if (!state.job) return;
    $('fit-cancel').disabled = true;
    try {
      await api('DELETE', `/v1/jobs/${enc(state.job.id)}`);
    } catch (e) {
      if (e.status !== 409) showError($('fit-error'), e); /* 409: it has just ended */
    }
  }

  $('fit-method').addEventListener('change', methodChanged);
  $('fit-form').addEventListener('submit', submitFit);
  $('fit-cancel').addEventListener('click', cancelFit);
  $('fit-file').addEventListener('change', summarizeFitData);
  /* Summarised while typing, so that the line does not appear (moving the
   * buttons under the pointer) only when the text area loses focus. */
  $('fit-csv').addEventListener('input', () => {
    clearTimeout(summaryTimer);
    summaryTimer = setTimeout(summarizeFitData, 250);
  });
  $('fit-target').addEventListener('change', summarizeFitData);

  /* ------------------------------------------------------------- model view */

  async function renderModel(name, version) {
    const token = state.renderToken;
    const errBox = $('model-error');
    clearError(errBox);
    $('model-title').textContent = name;
    $('model-facts').replaceChildren();
    $('model-json').textContent = '';
    $('model-plot-note').textContent = '';
    $('posterior-caption').textContent = '';
    setPlotState('posterior-box', 'loading');
    destroyChart('posterior-chart');
    destroyChart('pvo-chart');
    $('pvo-figure').hidden = true;
    $('calibration-figure').hidden = true;
    if (!state.model || state.model.name !== name) {
      $('model-rows-csv').value = ''; /* another model's rows stay with it (state.rows) */
      $('model-rows-file').value = '';
    }
    state.model = null;
    let latest;
    let model;
    try {
      latest = await api('GET', modelPath(name));
      model = version && version !== latest.version
        ? await api('GET', `${modelPath(name)}/versions/${version}`) : latest;
    } catch (e) {
      if (token !== state.renderToken) return;
      showError(errBox, e);
      setPlotState('posterior-box', 'error');
      return;
    }
    if (token !== state.renderToken) return;
    state.model = model;
    const vs = $('model-version');
    vs.replaceChildren(...(latest.versions || [latest.version]).slice().reverse()
      .map((v) => el('option', { value: v, text: versionLabel(v, latest.version, []) })));
    state.latestVersion = latest.version;
    vs.value = String(model.version);
    renderFacts(model, latest);
    validation.render(model);
    await renderAliases(token);
    if (token !== state.renderToken) return; /* another render began meanwhile (state.model is null or another's) */
    setupSlice(model);
    const rows = state.rows.get(name);
    $('model-rows-summary').textContent = rows ? describeRows(rows) : '';
    $('model-noise-wrap').hidden = (model.likelihood || 'gaussian') !== 'gaussian';
    await drawAll(token);
  }

  function renderFacts(m, latest) {
    const d = m.diagnostics || {};
    const facts = [
      ['Version', `${m.version}${latest.versions ? ` of ${latest.versions.length}` : ''}`],
      ['Method', m.method],
      ['Likelihood', likelihoodText(m)],
      ['Training rows (n)', m.n_train],
      ['Inputs (d)', m.input_dim],
      ['Objective', d.objective_name ? `${d.objective_name} = ${fmt(d.objective, 8)}` : '–'],
      ['Iterations', d.iterations],
      ['Evaluations', d.evaluations],
      ['Restarts', d.restarts],
      ['Converged', d.converged === undefined ? '–' : d.converged ? 'yes' : 'no'],
      ['Fit time', fmtSeconds(d.fit_seconds)],
      ['Jitter', fmt(d.jitter)],
      ['Noise variance', m.noise_variance_original === undefined ? '–' : fmt(m.noise_variance_original, 6)],
      ['Kernel', kernelText(m.kernel)],
      ['Mean', meanText(m.mean, m.feature_names)],
      /* a MAP fit (priors or bounds stated in the kernel): the prior's share */
      ...(d.log_prior === undefined ? [] : [
        ['Priors', d.priors === 'default' ? 'default preset' : 'stated in the kernel'],
        ['Log prior', fmt(d.log_prior, 8)],
        ['Objective with prior', fmt(d.objective_with_prior, 8)],
      ]),
      ['Warnings', m.warnings && m.warnings.length ? m.warnings.map((w) => w.message).join('; ') : 'none'],
      ['Created', m.created_at],
    ];
    $('model-facts').replaceChildren(...facts.flatMap(([k, v]) =>
      [el('dt', { text: k }), el('dd', { text: v === undefined ? '–' : String(v) })]));
    const extra = { kernel: m.kernel, mean: m.mean, hyperparameters: m.hyperparameters,
      method_info: m.method_info, warnings: m.warnings, standardization: m.standardization,
      online: m.online };
    $('model-json').textContent = JSON.stringify(extra, null, 2);
  }

  /* ------------------------------------------------------------ aliases */

  /* "3 (latest, champion)": a version with what names it besides its number. */
  function versionLabel(v, latestVersion, aliases) {
    const names = aliases.filter((a) => a.version === v).map((a) => a.alias);
    if (v === latestVersion) names.unshift('latest');
    return names.length ? `${v} (${names.join(', ')})` : String(v);
  }

  /* The model's aliases (GET .../aliases: each with its previous target, which
   * the store keeps on every move, so a roll back works from any browser and
   * after a reload) in a table, and the controls for the alias named in the
   * field. */
  async function renderAliases(token) {
    const m = state.model;
    clearError($('alias-error'));
    let list = [];
    try {
      list = (await api('GET', `${modelPath(m.name)}/aliases`)).aliases;
    } catch (e) {
      if (token === state.renderToken) showError($('alias-error'), e);
    }
    if (token !== state.renderToken) return;
    state.aliases = list;
    for (const o of $('model-version').options) o.textContent = versionLabel(Number(o.value), state.latestVersion, list);
    $('model-aliases-body').replaceChildren(...list.map((a) => el('tr', {},
      el('td', { text: a.alias }),
      el('td', {}, el('a', { href: `#/models/${enc(m.name)}/versions/${a.version}`, text: String(a.version) })),
      el('td', { text: a.previous_version ? String(a.previous_version) : '–' }),
      el('td', { text: `${a.updated_at}${a.updated_by ? ` by ${a.updated_by}` : ''}` }))));
    $('model-aliases').hidden = list.length === 0;
    $('model-aliases-empty').hidden = list.length !== 0;
    aliasControls();
  }

  /* The buttons for the alias in the field: promote points it at the version
   * viewed; roll back points it at its previous target. */
  function aliasControls() {
    const m = state.model;
    const name = $('alias-name').value.trim();
    const valid = /^[A-Za-z][A-Za-z0-9_.-]{0,63}$/.test(name);
    const a = (state.aliases || []).find((x) => x.alias === name);
    const promote = $('alias-promote');
    promote.textContent = `Promote version ${m ? m.version : ''} to ${name || '…'}`;
    promote.disabled = !m || !valid || (a && a.version === m.version);
    const back = $('alias-rollback');
    back.textContent = a && a.previous_version
      ? `Roll ${name} back to version ${a.previous_version}` : 'Roll back';
    back.disabled = !valid || !a || !a.previous_version;
  }

  /* PUT the alias in the field at version, then show the list again. */
  async function pointAlias(version, what) {
    const m = state.model;
    const name = $('alias-name').value.trim();
    clearError($('alias-error'));
    $('alias-status').textContent = '';
    try {
      await api('PUT', `${modelPath(m.name)}/aliases/${enc(name)}`, { json: { version } });
    } catch (e) {
      showError($('alias-error'), e);
      return;
    }
    $('alias-status').textContent = `${name} ${what} version ${version}.`;
    await renderAliases(state.renderToken);
  }

  /* The likelihood, with a softmax model's number of classes. */
  function likelihoodText(m) {
    if (m.likelihood === 'softmax') return `softmax, ${m.classes} classes`;
    return m.likelihood || 'gaussian';
  }

  function kernelText(k) {
    if (!k) return '–';
    if (k.terms) return `${k.type}(${k.terms.map(kernelText).join(', ')})`;
    return k.type;
  }

  /* The mean function in the caller's units: "zero" when the model has none,
   * else y = c0 + c1 x0 + ... from its coefficients_original (names: the
   * inputs' feature_names, else x0, x1, ...). */
  function meanText(mean, names) {
    if (!mean) return 'zero';
    const c = mean.coefficients_original || [];
    const terms = c.slice(1).map((v, j) => `${fmt(v, 4)} ${(names && names[j]) || `x${j}`}`);
    return `${mean.type}: ${[fmt(c[0], 4), ...terms].join(' + ')}`;
  }

  /* The inputs' names: the model's own (feature_names, kept by the fit), else
   * the training CSV's header when known, else x0, x1, ... */
  function inputNames(model) {
    const own = model.feature_names;
    if (Array.isArray(own) && own.length === model.input_dim) return own;
    const rows = trainingRows(model) || state.rows.get(model.name);
    if (rows && rows.names.length === model.input_dim) return rows.names;
    return Array.from({ length: model.input_dim }, (_, j) => `x${j}`);
  }

  function setupSlice(model) {
    const wrap = $('model-slice-wrap');
    const select = $('model-slice');
    const prev = select.value;
    wrap.hidden = model.input_dim < 2;
    const names = inputNames(model);
    select.replaceChildren(...names.map((n, j) => el('option', { value: j, text: n })));
    if (prev !== '' && Number(prev) < model.input_dim) select.value = prev;
  }

  function setPlotState(boxId, s) {
    $(boxId).dataset.state = s;
  }

  function destroyChart(id) {
    if (state.charts[id]) {
      state.charts[id].destroy();
      delete state.charts[id];
    }
  }

  async function drawAll(token) {
    await drawPosterior(token);
    if (token === state.renderToken) await drawPvo(token);
  }

  async function predict(model, X, extra = {}) {
    return api('POST', `${modelPath(model.name)}/predict`, { json: { X, version: model.version, ...extra } });
  }

  /* The rows that tell where the data lie: the training rows when this tab
   * fitted the model, else the uploaded rows. */
  function referenceRows(model) {
    const t = trainingRows(model);
    if (t && t.X.length && t.X[0].length === model.input_dim) return { rows: t, what: 'training rows' };
    const u = state.rows.get(model.name);
    if (u && u.X.length && u.X[0].length === model.input_dim) return { rows: u, what: 'uploaded rows' };
    return null;
  }

  /* The x range along input j and the point the other inputs are held at:
   * the reference rows' range (5% wider) and medians, else the model's
   * standardisation (mean ± 3 scales, means). */
  function sliceFrame(model, j) {
    const d = model.input_dim;
    const ref = referenceRows(model);
    if (ref) {
      const col = (c) => ref.rows.X.map((r) => r[c]);
      const xs = col(j);
      let lo = Math.min(...xs);
      let hi = Math.max(...xs);
      const pad = hi > lo ? 0.05 * (hi - lo) : 1;
      lo -= pad;
      hi += pad;
      const base = Array.from({ length: d }, (_, c) => median(col(c)));
      return { lo, hi, base, held: `medians of the ${ref.what}` };
    }
    const st = model.standardization || {};
    const mean = Array.isArray(st.x_mean) && st.x_mean.length === d ? st.x_mean : new Array(d).fill(0);
    const scale = Array.isArray(st.x_scale) && st.x_scale.length === d ? st.x_scale : new Array(d).fill(1);
    return { lo: mean[j] - 3 * scale[j], hi: mean[j] + 3 * scale[j], base: mean.slice(),
      held: 'the training means (from the model\'s standardisation)' };
  }

  const COLORS = {
    mean: '#1f4e79',
    band: 'rgba(31, 78, 121, 0.17)',
    bandEdge: 'rgba(31, 78, 121, 0.35)',
    samples: ['#d9822b', '#2a9d8f', '#8e5ea2'],
    train: '#c0392b',
    rows: '#444444',
    /* one colour a class (softmax): Tableau 10, again from the start past 10 */
    classes: ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1', '#ff9da7',
      '#9c755f', '#bab0ac'],
  };
  const classColor = (c) => COLORS.classes[c % COLORS.classes.length];

  const pts = (xs, ys) => xs.map((x, i) => ({ x, y: ys[i] }));

  function lineSet(label, data, extra = {}) {
    return { label, data, borderColor: COLORS.mean, backgroundColor: COLORS.mean, borderWidth: 2,
      pointRadius: 0, pointHoverRadius: 3, fill: false, tension: 0, ...extra };
  }

  function bandSets(xs, lo, hi, what) {
    return [
      lineSet(`${what} lower`, pts(xs, lo), { borderColor: COLORS.bandEdge, borderWidth: 1, order: 3,
        gpLegend: false }),
      lineSet(what, pts(xs, hi), { borderColor: COLORS.bandEdge, backgroundColor: COLORS.band,
        borderWidth: 1, fill: '-1', order: 3 }),
    ];
  }

  function pointSet(label, data, color) {
    return { label, data, showLine: false, borderColor: color, backgroundColor: color, pointRadius: 3.5,
      pointHoverRadius: 5, order: 0 };
  }

  function makeChart(id, datasets, xTitle, yTitle, extraScales = {}) {
    destroyChart(id);
    const chart = new Chart($(id), {
      type: 'line',
      data: { datasets },
      options: {
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        interaction: { mode: 'nearest', intersect: false },
        scales: {
          x: { type: 'linear', title: { display: true, text: xTitle }, ...extraScales.x },
          y: { type: 'linear', title: { display: true, text: yTitle }, ...extraScales.y },
        },
        plugins: {
          legend: {
            position: 'bottom',
            labels: { filter: (item, data) => data.datasets[item.datasetIndex].gpLegend !== false },
          },
          tooltip: {
            callbacks: {
              label: (c) => `${c.dataset.label}: (${fmt(c.parsed.x)}, ${fmt(c.parsed.y)})`,
            },
          },
        },
      },
    });
    state.charts[id] = chart;
    return chart;
  }

  /* The posterior along one input: for one input the whole function, for
   * several a slice with the other inputs held at their medians. */
  async function drawPosterior(token) {
    const model = state.model;
    const note = $('model-plot-note');
    const d = model.input_dim;
    const j = d > 1 ? Number($('model-slice').value || 0) : 0;
    const names = inputNames(model);
    const frame = sliceFrame(model, j);
    const xs = linspace(frame.lo, frame.hi, GRID_POINTS);
    const X = xs.map((x) => {
      const row = frame.base.slice();
      row[j] = x;
      return row;
    });
    const lik = model.likelihood || 'gaussian';
    setPlotState('posterior-box', 'loading');
    $('posterior-box').dataset.axis = String(j);
    try {
      let datasets;
      let yTitle;
      let caption;
      let answers = null;
      if (lik === 'bernoulli') {
        ({ datasets, caption } = await bernoulliSets(model, X, xs));
        yTitle = 'p(y = 1)';
      } else if (lik === 'softmax') {
        ({ datasets, caption } = await softmaxSets(model, X, xs));
        yTitle = 'p(y = c)';
      } else {
        ({ datasets, caption, answers } = await regressionSets(model, X, xs, lik));
        yTitle = lik === 'gaussian' ? 'y' : 'y (count)';
        if (Array.isArray(model.outputs) && model.outputs.length > 1) yTitle = model.outputs[0];
      }
      if (token !== state.renderToken) return;
      drawOutputs(model, answers, xs, lik, frame, names[j]);
      if (!datasets) {
        note.textContent = caption;
        setPlotState('posterior-box', 'empty');
        destroyChart('posterior-chart');
        return;
      }
      if (d === 1) {
        const train = trainingRows(model);
        if (train && lik === 'softmax') datasets.push(labelSet('training labels', train));
        else if (train) datasets.push(pointSet('training points', pts(train.X.map((r) => r[0]), train.y), COLORS.train));
        const up = state.rows.get(model.name);
        if (up && up.X.length && up.X[0].length === 1 && lik === 'softmax') {
          datasets.push({ ...labelSet('uploaded rows', up), pointStyle: 'triangle' });
        } else if (up && up.X.length && up.X[0].length === 1) {
          datasets.push(pointSet('uploaded rows', pts(up.X.map((r) => r[0]), up.y), COLORS.rows));
        }
        note.textContent = train ? '' : 'The daemon does not give out training data: the training points show '
          + 'for fits made from this tab. Upload rows below to show them.';
      } else {
        const held = names.map((n, c) => (c === j ? null : `${n} = ${fmt(frame.base[c])}`)).filter(Boolean);
        note.textContent = `Slice along ${names[j]}; the other inputs held at ${frame.held}: ${held.join(', ')}.`;
      }
      makeChart('posterior-chart', datasets, names[j], yTitle, { x: { min: frame.lo, max: frame.hi, ticks: { includeBounds: false } } });
      $('posterior-caption').textContent = caption;
      setPlotState('posterior-box', 'ready');
    } catch (e) {
      if (token !== state.renderToken) return;
      destroyChart('posterior-chart');
      showError($('model-error'), e);
      setPlotState('posterior-box', 'error');
    }
  }

  /* Mean, the 95% band mean ± 1.96 sd, and joint posterior samples. */
  async function regressionSets(model, X, xs, lik) {
    const gaussian = lik === 'gaussian';
    const noise = gaussian && $('model-noise').checked;
    const [p, s] = await Promise.all([
      predict(model, X, gaussian ? { include_noise: noise } : {}),
      api('POST', `${modelPath(model.name)}/sample`,
        { json: { X, version: model.version, n_samples: N_SAMPLES, seed: SAMPLE_SEED } }),
    ]);
    if (p.mean === null || p.mean === undefined) {
      return { datasets: null, caption: `The model predicts nothing yet (${p.state || 'no mean'}).` };
    }
    const datasets = outputSets(p, s, xs, lik, first);
    const caption = gaussian
      ? `Posterior mean, the band mean ± 1.96 sd of ${noise ? 'an observation (noise included)' : 'the latent function'}, `
        + `and ${N_SAMPLES} joint draws of the latent function (seed ${SAMPLE_SEED}).`
      : `Mean count, the band mean ± 1.96 sd of a count, and ${N_SAMPLES} joint draws of the rate (seed ${SAMPLE_SEED}).`;
    return { datasets, caption, answers: { p, s } };
  }

  /* The datasets of one output (pick: its value out of a row) of a predict
   * answer p and a sample answer s. */
  function outputSets(p, s, xs, lik, pick) {
    const gaussian = lik === 'gaussian';
    const mean = p.mean.map(pick);
    const sd = p.variance.map((v) => Math.sqrt(Math.max(0, pick(v))));
    let lo = mean.map((m, i) => m - Z95 * sd[i]);
    const hi = mean.map((m, i) => m + Z95 * sd[i]);
    if (!gaussian) lo = lo.map((v) => Math.max(0, v)); /* counts */
    /* Samples are of the latent f: for counts, the rate it implies. */
    const link = lik === 'poisson' ? Math.exp : lik === 'poisson_sq' ? (f) => f * f : (f) => f;
    const samples = s.samples.map((draw, k) => lineSet(gaussian ? `sample ${k + 1}` : `rate sample ${k + 1}`,
      pts(xs, draw.map((v) => link(pick(v)))),
      { borderColor: COLORS.samples[k % 3], backgroundColor: COLORS.samples[k % 3], borderWidth: 1.2, order: 2 }));
    return [
      ...bandSets(xs, lo, hi, '95% band (mean ± 1.96 sd)'),
      lineSet('mean', pts(xs, mean), { order: 1 }),
      ...samples,
    ];
  }

  /* A model of several outputs: one small plot per output, named, from the
   * same prediction and draws as the main plot (which shows the first). */
  function drawOutputs(model, answers, xs, lik, frame, xTitle) {
    const box = $('output-plots');
    for (const id of Object.keys(state.charts)) if (id.startsWith('output-chart-')) destroyChart(id);
    box.replaceChildren();
    const names = Array.isArray(model.outputs) ? model.outputs : [];
    box.hidden = names.length < 2 || !answers;
    if (box.hidden) return;
    names.forEach((name, o) => {
      const id = `output-chart-${o}`;
      const canvas = el('canvas', { id, role: 'img', 'aria-label': `Posterior of output ${name}` });
      box.append(el('figure', { className: 'plot' }, el('div', { className: 'plot-box small' }, canvas),
        el('figcaption', { text: `output ${o + 1} of ${names.length}: ${name}` })));
      makeChart(id, outputSets(answers.p, answers.s, xs, lik, outputOf(o)), xTitle, name,
        { x: { min: frame.lo, max: frame.hi, ticks: { includeBounds: false } } });
    });
  }

  /* Binary classification: p(y = 1), and the 95% band of logistic(f). */
  async function bernoulliSets(model, X, xs) {
    const p = await predict(model, X);
    const prob = (p.probability || p.mean).map(first);
    const lm = p.latent_mean.map(first);
    const ls = p.latent_variance.map((v) => Math.sqrt(Math.max(0, first(v))));
    const lo = lm.map((m, i) => logistic(m - Z95 * ls[i]));
    const hi = lm.map((m, i) => logistic(m + Z95 * ls[i]));
    return {
      datasets: [
        ...bandSets(xs, lo, hi, '95% band of logistic(f)'),
        lineSet('p(y = 1)', pts(xs, prob), { order: 1 }),
      ],
      caption: 'The probability of y = 1 (integrated over the latent posterior) and logistic of the latent '
        + 'mean ± 1.96 sd.',
    };
  }

  /* Several classes (softmax): one line a class of p(y = c), the class
   * probabilities integrated over the latent posterior (they sum to 1). */
  async function softmaxSets(model, X, xs) {
    const p = await predict(model, X);
    const probs = p.probabilities;
    if (!Array.isArray(probs) || !probs.length) {
      return { datasets: null, caption: `The model predicts nothing yet (${p.state || 'no probabilities'}).` };
    }
    const C = probs[0].length;
    const datasets = Array.from({ length: C }, (_, c) => lineSet(`p(y = ${c})`, pts(xs, probs.map((row) => row[c])),
      { borderColor: classColor(c), backgroundColor: classColor(c), order: 1 }));
    return {
      datasets,
      caption: `The probability of each of the ${C} classes (integrated over the latent posterior; they sum to 1 `
        + 'at every x).',
    };
  }

  /* Points (xs, ys) each in the colour of its class (softmax labels). */
  function classPointSet(label, xs, ys, classes) {
    const colors = classes.map((c) => classColor(c));
    return { ...pointSet(label, pts(xs, ys), COLORS.rows), pointBackgroundColor: colors,
      pointBorderColor: colors, gpClasses: classes.slice() };
  }

  /* Training labels of a 1-D softmax model: at height 1 (the observed
   * p(y = label) of a one-hot label), each in its class's colour. */
  const labelSet = (label, rows) => classPointSet(label, rows.X.map((r) => r[0]), rows.y.map(() => 1), rows.y);

  /* A softmax model's uploaded rows: the probability the model gives each
   * row's observed class, against that class; accuracy and log loss. */
  async function drawClassPvo(model, rows, token) {
    const p = await predict(model, rows.X);
    if (token !== state.renderToken) return;
    if (!Array.isArray(p.probabilities)) throw new Error('the model predicts nothing yet');
    const C = p.probabilities[0].length;
    const bad = rows.y.findIndex((c) => !Number.isInteger(c) || c < 0 || c >= C);
    if (bad >= 0) throw new Error(`row ${bad + 1}: the label ${rows.y[bad]} is not a class 0..${C - 1}`);
    let right = 0;
    let loss = 0;
    const given = rows.y.map((c, i) => {
      const row = p.probabilities[i];
      if (row.indexOf(Math.max(...row)) === c) right++;
      loss -= Math.log(Math.max(row[c], 1e-300));
      return row[c];
    });
    makeChart('pvo-chart', [classPointSet('data rows', rows.y, given, rows.y)], 'observed class', 'p(observed class)',
      { x: { min: -0.5, max: C - 0.5, afterBuildTicks: (axis) => {
        axis.ticks = Array.from({ length: C }, (_, c) => ({ value: c }));
      } }, y: { min: 0, max: 1 } });
    const n = rows.y.length;
    $('pvo-caption').textContent = `${n} rows · accuracy ${fmt((100 * right) / n, 3)}% (${right} of ${n}) · `
      + `log loss ${fmt(loss / n)}.`;
    setPlotState('pvo-box', 'ready');
  }

  /* Predicted against observed for the uploaded rows, with ± 1.96 sd bars. */
  async function drawPvo(token) {
    const model = state.model;
    const rows = state.rows.get(model.name);
    const fig = $('pvo-figure');
    if (!rows) {
      fig.hidden = true;
      destroyChart('pvo-chart');
      return;
    }
    fig.hidden = false;
    setPlotState('pvo-box', 'loading');
    try {
      if (rows.X[0].length !== model.input_dim) {
        throw new Error(`the data rows have ${rows.X[0].length} inputs; the model takes ${model.input_dim}`);
      }
      if (model.likelihood === 'softmax') {
        await drawClassPvo(model, rows, token);
        return;
      }
      const gaussian = (model.likelihood || 'gaussian') === 'gaussian';
      const p = await predict(model, rows.X, gaussian ? { include_noise: true } : {});
      if (token !== state.renderToken) return;
      if (p.mean === null || p.mean === undefined) throw new Error('the model predicts nothing yet');
      const mean = p.mean.map(first);
      const sd = p.variance.map((v) => Math.sqrt(Math.max(0, first(v))));
      const obs = rows.y;
      const bars = [];
      let covered = 0;
      let sq = 0;
      obs.forEach((o, i) => {
        bars.push({ x: o, y: mean[i] - Z95 * sd[i] }, { x: o, y: mean[i] + Z95 * sd[i] }, { x: o, y: null });
        if (Math.abs(o - mean[i]) <= Z95 * sd[i]) covered++;
        sq += (o - mean[i]) ** 2;
      });
      /* One range on both axes, so that the line y = x is the diagonal. */
      const all = [...obs, ...bars.filter((b) => b.y !== null).map((b) => b.y)];
      let lo = Math.min(...all);
      let hi = Math.max(...all);
      const pad = hi > lo ? 0.04 * (hi - lo) : 1;
      lo -= pad;
      hi += pad;
      const barColor = 'rgba(31, 78, 121, 0.45)';
      const datasets = [
        lineSet('y = x', [{ x: lo, y: lo }, { x: hi, y: hi }], { borderColor: '#888', backgroundColor: '#888',
          borderWidth: 1, borderDash: [5, 4], order: 3 }),
        lineSet('± 1.96 sd', bars, { borderColor: barColor, backgroundColor: barColor, borderWidth: 1.2,
          spanGaps: false, order: 2 }),
        pointSet('data rows', pts(obs, mean), COLORS.mean),
      ];
      makeChart('pvo-chart', datasets, 'observed y', 'predicted mean',
        { x: { min: lo, max: hi, ticks: { includeBounds: false } }, y: { min: lo, max: hi, ticks: { includeBounds: false } } });
      const rmse = Math.sqrt(sq / obs.length);
      $('pvo-caption').textContent = `${obs.length} rows · RMSE ${fmt(rmse)} · the 95% interval holds `
        + `${covered} of ${obs.length} observations (${fmt((100 * covered) / obs.length, 3)}%).`;
      setPlotState('pvo-box', 'ready');
    } catch (e) {
      if (token !== state.renderToken) return;
      destroyChart('pvo-chart');
      showError($('model-error'), e);
      setPlotState('pvo-box', 'error');
    }
  }

  async function useRows() {
    const model = state.model;
    if (!model) return;
    const errBox = $('model-error');
    clearError(errBox);
    try {
      const file = $('model-rows-file').files[0];
      const text = file ? await file.text() : $('model-rows-csv').value;
      if (!text.trim()) throw new Error('choose a CSV file or paste CSV text (a header row, the inputs, y last)');
      const rows = csvTable(text);
      if (rows.X[0].length !== model.input_dim) {
        throw new Error(`the rows have ${rows.X[0].length} inputs; model '${model.name}' takes ${model.input_dim}`);
      }
      state.rows.set(model.name, rows);
      $('model-rows-summary').textContent = describeRows(rows);
    } catch (e) {
      showError(errBox, e);
      return;
    }
    const token = ++state.renderToken;
    setupSlice(model);
    await drawAll(token);
  }

  function clearRows() {
    if (!state.model) return;
    state.rows.delete(state.model.name);
    $('model-rows-summary').textContent = '';
    $('model-rows-file').value = '';
    $('model-rows-csv').value = '';
    const token = ++state.renderToken;
    drawAll(token);
  }

  $('model-version').addEventListener('change', () => {
    if (state.model) location.hash = `#/models/${enc(state.model.name)}/versions/${$('model-version').value}`;
  });
  $('model-slice').addEventListener('change', () => {
    const token = ++state.renderToken;
    drawPosterior(token);
  });
  $('model-noise').addEventListener('change', () => {
    const token = ++state.renderToken;
    drawPosterior(token);
  });
  $('alias-name').addEventListener('input', aliasControls);
  $('alias-promote').addEventListener('click', () => {
    if (state.model) pointAlias(state.model.version, 'now points at');
  });
  $('alias-rollback').addEventListener('click', () => {
    const a = (state.aliases || []).find((x) => x.alias === $('alias-name').value.trim());
    if (a && a.previous_version) pointAlias(a.previous_version, 'rolled back to');
  });
  $('model-rows-use').addEventListener('click', useRows);
  $('model-rows-clear').addEventListener('click', clearRows);

  /* The validation report's numbers and plot (web/validation.js, loaded first). */
  const validation = window.gpserveValidation({ $, el, fmt, makeChart, destroyChart, lineSet,
    pointSet, COLORS });

  /* The studies' views (web/studies.js, loaded first) with this file's helpers. */
  const studies = window.gpserveStudies({ $, api, el, enc, fmt, showError, clearError, linspace, makeChart,
    destroyChart, lineSet, bandSets, pointSet, pts, COLORS });
  const studyToken = () => {
    const token = ++state.renderToken;
    return () => token === state.renderToken;
  };
  $('studies-refresh').addEventListener('click', () => studies.renderList(studyToken()));
  $('study-refresh').addEventListener('click', () => route());
  $('study-slice').addEventListener('change', () => studies.redrawPosterior(studyToken()));

  window.addEventListener('hashchange', route);
  if (typeof Chart === 'undefined') {
    showError($('models-error'), new Error('the plotting library (/ui/vendor/chart.umd.min.js) did not load'));
  }
  route();
})();
