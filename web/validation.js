/* gpserve browser view: a model's validation report (docs/design/api.md, "Validation").
 * The numbers (RMSE, NLPD and the 50/90/95 % coverage, or log loss and accuracy, each with
 * its spread across folds) and a calibration plot: the nominal level of each central
 * predictive interval against the share of held-out rows inside it, with the diagonal a
 * calibrated model follows; for bernoulli the reliability diagram (mean predicted
 * probability of each bin against the observed share of 1), for softmax the top-label one
 * (the most probable class's probability against the share of rows it was right on); a
 * count model's intervals are of counts. Loaded before app.js, which
 * calls window.gpserveValidation(helpers) with its own plot helpers. */
'use strict';

window.gpserveValidation = (h) => {
  const { $, el, fmt, makeChart, destroyChart, lineSet, pointSet, COLORS } = h;

  const pm = (v, sd) => (v === null || v === undefined ? '–'
    : `${fmt(v)}${sd === null || sd === undefined ? '' : ` ± ${fmt(sd, 2)}`}`);

  /* The report's facts as [label, text] pairs. */
  function facts(v) {
    const sd = v.sd || {};
    const split = v.folds ? `${v.folds} folds` : `hold-out ${fmt(v.fraction)}`;
    const out = [['Validation', `${split}, seed ${v.seed}${v.stratified ? ', stratified' : ''}`
      + `${v.default ? ' (default)' : ''}; ${v.n} held-out rows; ${fmt(v.seconds, 3)} s`]];
    if (v.log_loss !== undefined) {
      out.push(['Validation log loss', pm(v.log_loss, sd.log_loss)]);
      out.push(['Validation accuracy', pm(v.accuracy, sd.accuracy)]);
      return out;
    }
    const c = v.coverage || {};
    const sc = sd.coverage || {};
    out.push(['Validation RMSE', pm(v.rmse, sd.rmse)]);
    out.push(['Validation NLPD', pm(v.nlpd, sd.nlpd)]);
    out.push(['Coverage 50 / 90 / 95 %', ['0.5', '0.9', '0.95'].map((k) => pm(c[k], sc[k])).join(' / ')]);
    return out;
  }

  function render(model) {
    const fig = $('calibration-figure');
    destroyChart('calibration-chart');
    const v = model.validation;
    fig.hidden = !v;
    $('calibration-facts').replaceChildren();
    if (!v) return;
    $('calibration-facts').replaceChildren(...facts(v).flatMap(([k, t]) =>
      [el('dt', { text: k }), el('dd', { text: t })]));
    const diag = lineSet('perfect calibration', [{ x: 0, y: 0 }, { x: 1, y: 1 }],
      { borderColor: COLORS.bandEdge, borderDash: [6, 4], borderWidth: 1 });
    if (v.calibration) {
      const pts = v.calibration.filter((p) => p.coverage !== null)
        .map((p) => ({ x: p.level, y: p.coverage }));
      makeChart('calibration-chart', [diag, { ...lineSet('held-out coverage', pts), pointRadius: 3 }],
        'nominal level of the central interval', 'share of held-out rows inside',
        { x: { min: 0, max: 1 }, y: { min: 0, max: 1 } });
      $('calibration-caption').textContent = 'Calibration: each central predictive interval\'s '
        + 'level against the share of held-out rows inside it (above the diagonal: intervals '
        + 'too wide; below: too narrow).';
    } else if (v.reliability) {
      const top = model.likelihood === 'softmax';
      const pts = v.reliability.map((b) => ({ x: b.mean_predicted, y: b.observed }));
      makeChart('calibration-chart', [diag, pointSet('held-out rows by predicted probability', pts,
        COLORS.mean)], top ? 'mean probability of the predicted class' : 'mean predicted probability of 1',
      top ? 'share predicted right' : 'observed share of 1',
      { x: { min: 0, max: 1 }, y: { min: 0, max: 1 } });
      $('calibration-caption').textContent = top
        ? 'Reliability (top label): held-out rows in ten bins of the predicted class\'s '
          + 'probability, each bin\'s mean probability against the share it got right.'
        : 'Reliability: held-out rows in ten bins of predicted '
          + 'probability, each bin\'s mean prediction against its observed share of 1.';
    } else {
      fig.hidden = v.log_loss === undefined;
      $('calibration-caption').textContent = '';
    }
  }

  return { render, facts };
};
