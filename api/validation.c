/* A fit's validation report (docs/design/api.md, "Validation"): the
 * request's "validation" field, the default when it is absent, the run
 * (core/model/validation.h) before the final fit on every row, and the
 * report's JSON kept with the version. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

static const char *const validation_keys[] = {"folds", "fraction", "seed", NULL};

int gp_api_parse_validation(json_t *v, uint64_t fit_seed, gp_api_validation *out, gp_error *err)
{
    memset(out, 0, sizeof out[0]);
    out->spec.seed = fit_seed;
    if (v == NULL) { /* the default: decided once the rows are known */
        out->spec.folds = GP_API_VALIDATION_DEFAULT_FOLDS;
        out->on = -1;
        return GP_OK;
    }
    if (json_is_false(v) || json_is_null(v))
        return GP_OK;
    out->asked = 1;
    out->on = 1;
    if (json_is_true(v)) {
        out->spec.folds = GP_API_VALIDATION_DEFAULT_FOLDS;
        return GP_OK;
    }
    if (!json_is_object(v))
        return gp_error_set(err, GP_EINVAL, "validation",
                            "validation must be an object ({\"folds\": k} or {\"fraction\": f}), "
                            "true or false");
    int rc = gp_json_known_keys(v, validation_keys, "validation", err);
    if (rc)
        return rc;
    json_t *folds = json_object_get(v, "folds"), *frac = json_object_get(v, "fraction");
    json_t *seed = json_object_get(v, "seed");
    if (folds && frac)
        return gp_error_set(err, GP_EINVAL, "validation",
                            "validation takes folds or fraction, not both");
    if (seed && (rc = gp_json_get_uint(seed, "validation.seed", GP_JSON_UINT_MAX,
                                       &out->spec.seed, err)))
        return rc;
    if (frac) {
        if ((rc = gp_json_get_number(frac, "validation.fraction", &out->spec.fraction, err)))
            return rc;
        if (!(out->spec.fraction > 0.0 && out->spec.fraction < 1.0))
            return gp_error_set(err, GP_EINVAL, "validation.fraction",
                                "validation.fraction must be in (0, 1)");
        return GP_OK;
    }
    out->spec.folds = GP_API_VALIDATION_DEFAULT_FOLDS;
    if (folds) {
        uint64_t k = 0;
        if (gp_json_get_uint(folds, "validation.folds", 1e9, &k, err) || k < 2)
            return gp_error_set(err, GP_EINVAL, "validation.folds",
                                "validation.folds must be an integer from 2 to the rows");
        out->spec.folds = (size_t)k;
    }
    return GP_OK;
}

/* The default applies where it is cheap and can split: a cheap method, at
 * most GP_API_VALIDATION_DEFAULT_MAX_ROWS rows held in memory, at least
 * GP_API_VALIDATION_DEFAULT_MIN_ROWS, and a split the labels allow (a class
 * of one row cannot be in every training part); otherwise the fit has no
 * report. */
/* The methods whose 5-fold report costs little at these sizes
 * (bench/results/validation.md: a second or a few on 300-500 rows); msrfr,
 * renyi, gwi, hkd and rfgp validate when asked. */
static int cheap_method(const gp_method *m)
{
    static const char *const cheap[] = {"exact", "sgpr", "ssgp", "svgp", "pls", NULL};
    for (size_t i = 0; cheap[i]; i++)
        if (strcmp(m->name, cheap[i]) == 0)
            return 1;
    return 0;
}

static int default_applies(gp_api_validation *v, const gp_method *m, gp_likelihood lik,
                           const double *y, size_t n)
{
    if (n < GP_API_VALIDATION_DEFAULT_MIN_ROWS || n > GP_API_VALIDATION_DEFAULT_MAX_ROWS ||
        !cheap_method(m))
        return 0;
    size_t *part = malloc(n * sizeof *part);
    gp_error e;
    int ok = part && gp_validation_split(&v->spec, lik, y, n, part, &e) == GP_OK;
    free(part);
    return ok;
}

int gp_api_settle_validation(gp_api_validation *v, const gp_method *m, gp_likelihood lik,
                             const double *y, size_t n, int streamed, int distributed,
                             gp_error *err)
{
    if (v->on == 0)
        return GP_OK;
    if (!v->asked) { /* the default */
        v->on = !streamed && !distributed && y && default_applies(v, m, lik, y, n);
        return GP_OK;
    }
    if (streamed)
        return gp_error_set(err, GP_EUNSUPPORTED, "validation",
                            "validation: a fit over a data set streams its rows once and holds "
                            "none of them; validate by fitting the rows in the request, or give "
                            "\"validation\": false");
    if (distributed)
        return gp_error_set(err, GP_EUNSUPPORTED, "validation",
                            "validation: a distributed fit does not validate; give "
                            "\"validation\": false");
    if (n == 0 || y == NULL)
        return gp_error_set(err, GP_EINVAL, "validation",
                            "validation needs training rows; method '%s' was given none",
                            m->name);
    size_t *part = malloc(n * sizeof *part);
    if (part == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    int rc = gp_validation_split(&v->spec, lik, y, n, part, err);
    free(part);
    return rc;
}

/* ---- the report's JSON ---- */

static void level_key(double a, char *buf, size_t len)
{
    snprintf(buf, len, "%g", a);
}

/* {"0.5": c, "0.9": c, "0.95": c}: the levels the issue names */
static json_t *coverage_json(const gp_validation_metrics *m)
{
    static const double shown[] = {0.5, 0.9, 0.95};
    json_t *o = json_object();
    for (size_t i = 0; i < sizeof shown / sizeof shown[0]; i++) {
        char key[16];
        level_key(shown[i], key, sizeof key);
        json_object_set_new(o, key, gp_json_real(m->coverage[gp_validation_level_index(shown[i])]));
    }
    return o;
}

static int classes(gp_likelihood lik)
{
    return lik == GP_LIK_BERNOULLI || lik == GP_LIK_SOFTMAX;
}

/* The metrics of one record: rmse, nlpd, coverage (gaussian, poisson) or
 * log_loss, accuracy (bernoulli, softmax). */
static json_t *metrics_json(const gp_validation_metrics *m, gp_likelihood lik, int with_n)
{
    json_t *o = json_object();
    if (with_n)
        json_object_set_new(o, "n", json_integer((json_int_t)m->n));
    if (classes(lik)) {
        json_object_set_new(o, "log_loss", gp_json_real(m->nlpd));
        json_object_set_new(o, "accuracy", gp_json_real(m->accuracy));
        return o;
    }
    json_object_set_new(o, "rmse", gp_json_real(m->rmse));
    json_object_set_new(o, "nlpd", gp_json_real(m->nlpd));
    json_object_set_new(o, "coverage", coverage_json(m));
    return o;
}

/* The calibration plot's points: nominal level and empirical coverage. */
static json_t *calibration_json(const gp_validation_metrics *m)
{
    json_t *a = json_array();
    for (size_t l = 0; l < GP_VALIDATION_LEVELS; l++) {
        json_t *p = json_object();
        json_object_set_new(p, "level", gp_json_real(gp_validation_levels[l]));
        json_object_set_new(p, "coverage", gp_json_real(m->coverage[l]));
        json_array_append_new(a, p);
    }
    return a;
}

/* The reliability diagram's bins (the empty ones left out). */
static json_t *reliability_json(const gp_reliability *r)
{
    json_t *a = json_array();
    for (size_t b = 0; b < GP_RELIABILITY_BINS; b++) {
        if (r->count[b] == 0.0)
            continue;
        json_t *p = json_object();
        json_object_set_new(p, "lower", gp_json_real((double)b / GP_RELIABILITY_BINS));
        json_object_set_new(p, "upper", gp_json_real((double)(b + 1) / GP_RELIABILITY_BINS));
        json_object_set_new(p, "count", json_integer((json_int_t)r->count[b]));
        json_object_set_new(p, "mean_predicted", gp_json_real(r->sum_p[b] / r->count[b]));
        json_object_set_new(p, "observed", gp_json_real(r->sum_y[b] / r->count[b]));
        json_array_append_new(a, p);
    }
    return a;
}

json_t *gp_api_validation_json(const gp_validation_report *r, int asked)
{
    gp_likelihood lik = r->likelihood;
    json_t *o = metrics_json(&r->mean, lik, 0);
    if (o == NULL)
        return NULL;
    if (r->spec.folds)
        json_object_set_new(o, "folds", json_integer((json_int_t)r->spec.folds));
    else
        json_object_set_new(o, "fraction", gp_json_real(r->spec.fraction));
    json_object_set_new(o, "seed", json_integer((json_int_t)r->spec.seed));
    json_object_set_new(o, "stratified", json_boolean(classes(lik)));
    json_object_set_new(o, "n", json_integer((json_int_t)r->mean.n));
    json_object_set_new(o, "sd", metrics_json(&r->sd, lik, 0));
    if (!classes(lik))
        json_object_set_new(o, "calibration", calibration_json(&r->mean));
    if (classes(lik)) /* bernoulli: p(y = 1); softmax: the top class's probability */
        json_object_set_new(o, "reliability", reliability_json(&r->reliability));
    json_t *pf = json_array();
    for (size_t f = 0; f < r->n_fits; f++)
        json_array_append_new(pf, metrics_json(&r->per_fit[f], lik, 1));
    json_object_set_new(o, "per_fold", pf);
    if (r->n_outputs > 1) {
        json_t *po = json_array();
        for (size_t j = 0; j < r->n_outputs; j++)
            json_array_append_new(po, metrics_json(&r->output_mean[j], lik, 0));
        json_object_set_new(o, "per_output", po);
    }
    json_object_set_new(o, "seconds", gp_json_real(r->seconds));
    json_object_set_new(o, "fit_seconds", gp_json_real(r->fit_seconds));
    json_object_set_new(o, "default", json_boolean(!asked));
    return o;
}

int gp_api_run_validation(const gp_method *m, const gp_fit_request *fr, gp_api_validation *v,
                          gp_error *err)
{
    gp_validation_report r;
    int rc = gp_validate(m, fr, &v->spec, 1, &r, err);
    if (rc)
        return rc;
    json_decref(v->report);
    v->report = gp_api_validation_json(&r, v->asked);
    gp_validation_report_free(&r);
    return v->report ? GP_OK : gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
}
