/* Method "auto" (docs/design/api.md, "Auto"): the candidates of the rule
 * table (core/model/auto.h) validated one after another on the same split,
 * the leaderboard growing as they end (the job's progress shows it), the
 * pick by mean held-out nlpd (log loss for classes) with the tie rule of
 * gp_auto_pick. The caller fits the winner on every row and keeps the
 * leaderboard in the version's method_info. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <time.h>

#include "api/internal.h"

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void gp_api_auto_free(gp_api_auto *a)
{
    json_decref(a->leaderboard);
    a->leaderboard = NULL;
    json_decref(a->symmetry_json);
    a->symmetry_json = NULL;
    free(a->progress_text);
    a->progress_text = NULL;
}

int gp_api_auto_parse_budget(json_t *v, gp_api_auto *a, gp_error *err)
{
    a->budget_s = GP_AUTO_DEFAULT_BUDGET_S;
    if (v == NULL)
        return GP_OK;
    if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) <= 0.0 ||
        json_number_value(v) > GP_API_AUTO_MAX_BUDGET_S)
        return gp_error_set(err, GP_EINVAL, "budget_s",
                            "budget_s must be a number of seconds in (0, %g]",
                            GP_API_AUTO_MAX_BUDGET_S);
    a->budget_s = json_number_value(v);
    return GP_OK;
}

void gp_api_auto_problem(const gp_api_auto *a, size_t n, size_t d, gp_likelihood lik,
                         size_t outputs, const gp_validation_spec *spec, gp_auto_problem *p)
{
    memset(p, 0, sizeof *p);
    p->n = n;
    p->d = d;
    p->likelihood = lik;
    p->outputs = outputs ? outputs : 1;
    p->budget_s = a->budget_s;
    p->fits_each = gp_validation_fits(spec);
    p->train_share = spec->folds ? (double)(spec->folds - 1) / (double)spec->folds
                                 : 1.0 - spec->fraction;
    p->symmetry = a->symmetry;
}

void gp_api_auto_default_validation(gp_api_auto *a, size_t n, gp_validation_spec *spec)
{
    gp_auto_default_validation(n, spec);
    a->default_validation = 1;
}

int gp_api_auto_check(const gp_api_auto *a, size_t n, size_t d, gp_likelihood lik,
                      size_t outputs, const gp_validation_spec *spec, gp_error *err)
{
    gp_auto_problem p;
    gp_api_auto_problem(a, n, d, lik, outputs, spec, &p);
    gp_auto_candidate c[GP_AUTO_MAX_CANDIDATES];
    size_t count = 0;
    gp_auto_candidates(&p, c, &count);
    double cheapest = INFINITY;
    for (size_t i = 0; i < count; i++) {
        if (c[i].skip == NULL)
            return GP_OK;
        cheapest = fmin(cheapest, c[i].est_validation_s + c[i].est_fit_s);
    }
    if (count == 0)
        return gp_error_set(err, GP_EUNSUPPORTED, "method",
                            "method auto has no candidate for the %s likelihood with %zu "
                            "outputs; fit a method by name",
                            gp_likelihood_name(lik), p.outputs);
    return gp_error_set(err, GP_EUNSUPPORTED, "budget_s",
                        "no candidate's validation and final fit fit budget_s = %g s on %zu rows "
                        "(the cheapest is estimated at %.3g s); raise budget_s or validate fewer "
                        "folds",
                        a->budget_s, n, cheapest);
}

/* ---- the run ---- */

static int report(gp_api_auto_stage *ap, double frac, double objective)
{
    if (ap->fn == NULL)
        return 0;
    double all = ((double)ap->stage + fmin(fmax(frac, 0.0), 1.0)) / (double)ap->stages;
    return ap->fn(ap->ctx, (int)floor(all * GP_API_AUTO_PROGRESS_MAX), GP_API_AUTO_PROGRESS_MAX,
                  objective);
}

static int candidate_progress(void *ctx, int iteration, int max_iterations, double objective)
{
    gp_api_auto_stage *ap = ctx;
    double frac = max_iterations > 0 ? (double)iteration / (double)max_iterations : 0.0;
    if (report(ap, frac, objective))
        return 1; /* the caller's cancel */
    if (ap->may_stop && now_seconds() - ap->start > ap->stop_at) {
        ap->over_budget = 1;
        return 1;
    }
    return 0;
}

int gp_api_auto_progress(void *ctx, int iteration, int max_iterations, double objective)
{
    return candidate_progress(ctx, iteration, max_iterations, objective);
}

static json_t *options_json(const gp_api_auto *a, const char *method)
{
    json_t *o = json_object();
    if (strcmp(method, "hkd") == 0 && a->symmetry_json)
        json_object_set(o, "symmetry", a->symmetry_json);
    return o;
}

static json_t *entry_json(const gp_api_auto *a, const gp_auto_candidate *c, const char *status,
                          double est_s)
{
    json_t *e = json_object();
    json_object_set_new(e, "method", json_string(c->method));
    json_object_set_new(e, "options", options_json(a, c->method));
    json_object_set_new(e, "status", json_string(status));
    json_object_set_new(e, "estimated_seconds", gp_json_real(est_s));
    return e;
}

static void set_reason(json_t *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_reason(json_t *e, const char *fmt, ...)
{
    char buf[GP_ERROR_MESSAGE_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    json_object_set_new(e, "reason", json_string(buf));
}

static void set_scores(json_t *e, const gp_validation_report *r, double seconds)
{
    int classes = r->likelihood == GP_LIK_BERNOULLI || r->likelihood == GP_LIK_SOFTMAX;
    json_object_set_new(e, "nlpd", gp_json_real(r->mean.nlpd));
    json_object_set_new(e, "nlpd_sd", gp_json_real(r->sd.nlpd));
    if (classes) {
        json_object_set_new(e, "accuracy", gp_json_real(r->mean.accuracy));
    } else {
        json_object_set_new(e, "rmse", gp_json_real(r->mean.rmse));
        json_object_set_new(e, "coverage_95",
                            gp_json_real(r->mean.coverage[gp_validation_level_index(0.95)]));
    }
    json_object_set_new(e, "seconds", gp_json_real(seconds));
}

/* The leaderboard as the job's progress shows it (a.progress_text). */
static void publish(gp_api_auto *a)
{
    char *text = json_dumps(a->leaderboard, JSON_COMPACT);
    if (text == NULL)
        return;
    if (strlen(text) >= GP_JOB_LEADERBOARD_MAX) { /* too long for progress: the scores only */
        free(text);
        return;
    }
    free(a->progress_text);
    a->progress_text = text;
}

/* One candidate's validation: its entry's status and scores; *score for
 * the pick. GP_ECANCELLED (the caller's cancel) is returned; any other
 * failure is the entry's reason. */
static int run_candidate(gp_api_auto *a, const gp_method *m, const gp_fit_request *base,
                         const gp_validation_spec *spec, gp_api_auto_stage *ap, json_t *e,
                         gp_auto_score *score, json_t **report, gp_model **last, gp_error *err)
{
    gp_fit_request fr = *base;
    fr.options = strcmp(m->name, "hkd") == 0 ? a->hkd_options : NULL;
    fr.n_options = strcmp(m->name, "hkd") == 0 ? a->n_hkd_options : 0;
    fr.progress = candidate_progress;
    fr.progress_ctx = ap;
    gp_validation_report r;
    gp_error ferr;
    gp_error_clear(&ferr);
    double t0 = now_seconds();
    ap->over_budget = 0;
    int rc = gp_validate_keep(m, &fr, spec, 0, &r, last, &ferr);
    double secs = now_seconds() - t0;
    if (rc == GP_ECANCELLED && !ap->over_budget) {
        *err = ferr;
        return rc;
    }
    if (rc != GP_OK) {
        json_object_set_new(e, "status", json_string(ap->over_budget ? "stopped" : "failed"));
        json_object_set_new(e, "seconds", gp_json_real(secs));
        if (ap->over_budget)
            set_reason(e, "stopped after %.1f s: the job reached budget_s", secs);
        else
            set_reason(e, "%s%s%s%s", ferr.message, ferr.field[0] ? " (field " : "",
                       ferr.field, ferr.field[0] ? ")" : "");
        return GP_OK;
    }
    json_object_set_new(e, "status", json_string("done"));
    set_scores(e, &r, secs);
    score->done = 1;
    score->mean = r.mean.nlpd;
    score->sd = r.sd.nlpd;
    score->folds = r.n_fits;
    score->seconds = secs;
    *report = gp_api_validation_json(&r, 1);
    json_object_set_new(*report, "seconds", gp_json_real(secs));
    gp_validation_report_free(&r);
    return GP_OK;
}

/* Why candidate c does not run now (NULL: it runs): elapsed, its
 * validation and the final fit (its own or the one reserved for those done,
 * gp_auto_reserve) must fit budget_s, its estimates scaled by calib. */
static const char *why_not(const gp_api_auto *a, const gp_auto_candidate *c, const gp_method *m,
                           const gp_fit_request *base, double elapsed, double calib,
                           double reserved, char *buf, size_t len)
{
    if (m == NULL)
        return "not registered in this build";
    if (!gp_method_accepts_likelihood(m, base->likelihood))
        return "does not fit this likelihood";
    if (c->skip)
        return c->skip;
    double need = 0.0;
    if (!gp_auto_admits(a->budget_s, elapsed, c->est_validation_s * calib, c->est_fit_s * calib,
                        reserved, &need)) {
        snprintf(buf, len,
                 "estimated %.1f s (validation, then the final fit: %.1f s reserved) past the "
                 "%.1f s left of budget_s",
                 need, need - c->est_validation_s * calib, a->budget_s - elapsed);
        return buf;
    }
    return NULL;
}

int gp_api_auto_run(gp_api_auto *a, const gp_fit_request *base, const gp_validation_spec *spec,
                    gp_progress_fn progress, void *ctx, gp_api_auto_result *res, gp_error *err)
{
    memset(res, 0, sizeof *res);
    gp_auto_problem p;
    gp_api_auto_problem(a, base->n, base->d, base->likelihood, base->n_outputs, spec, &p);
    gp_auto_candidate c[GP_AUTO_MAX_CANDIDATES];
    size_t count = 0;
    gp_auto_candidates(&p, c, &count);
    json_decref(a->leaderboard);
    a->leaderboard = json_array();
    if (a->leaderboard == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    gp_auto_score score[GP_AUTO_MAX_CANDIDATES];
    json_t *reports[GP_AUTO_MAX_CANDIDATES] = {0};
    memset(score, 0, sizeof score);
    gp_model *last[GP_AUTO_MAX_CANDIDATES] = {0};
    gp_api_auto_stage ap = {progress, ctx, 0, count + 1, now_seconds(), a->budget_s, 0, 0};
    double ratio_sum = 0.0;
    size_t n_done = 0;
    int rc = GP_OK;
    for (size_t i = 0; i < count && rc == GP_OK; i++) {
        ap.stage = i;
        const gp_method *m = gp_method_find(c[i].method);
        double calib = n_done ? fmin(fmax(ratio_sum / (double)n_done, 0.25), 10.0) : 1.0;
        char why[200];
        double reserved = gp_auto_reserve(c, score, i);
        const char *skip = why_not(a, &c[i], m, base, now_seconds() - ap.start, calib, reserved,
                                   why, sizeof why);
        /* a running candidate stops where only the reserved final fit is left */
        ap.stop_at = a->budget_s - reserved;
        /* its validation's estimate, scaled by what the candidates before took */
        json_t *e = entry_json(a, &c[i], "skipped",
                               c[i].est_validation_s * (skip == c[i].skip ? 1.0 : calib));
        if (base->cancel.flag && atomic_load(base->cancel.flag))
            rc = gp_error_set(err, GP_ECANCELLED, NULL, "the fit was cancelled");
        else if (skip)
            set_reason(e, "%s", skip);
        else
            rc = run_candidate(a, m, base, spec, &ap, e, &score[i], &reports[i], &last[i], err);
        json_array_append_new(a->leaderboard, e);
        if (score[i].done) {
            n_done++;
            double est = c[i].est_validation_s;
            ratio_sum += est > 0 ? score[i].seconds / est : 1.0;
            ap.may_stop = 1;
        }
        publish(a);
        if (rc == GP_OK && report(&ap, 1.0, NAN))
            rc = gp_error_set(err, GP_ECANCELLED, NULL, "the fit was cancelled");
    }
    int w = rc == GP_OK ? gp_auto_pick(score, count) : -1;
    if (rc == GP_OK && w < 0)
        rc = gp_error_set(err, GP_EUNSUPPORTED, "method",
                          "method auto: no candidate could be validated on these rows within "
                          "budget_s (method_info is not kept; the reasons: every candidate "
                          "failed or was skipped); fit a method by name");
    if (rc == GP_OK) {
        json_t *we = json_array_get(a->leaderboard, (size_t)w);
        json_object_set_new(we, "chosen", json_true());
        res->winner = gp_method_find(c[w].method);
        res->report = reports[w];
        reports[w] = NULL;
        res->hkd_options = strcmp(c[w].method, "hkd") == 0;
        res->fallback = last[w];
        last[w] = NULL;
        res->seconds = now_seconds() - ap.start;
        /* a final fit its own validation says will not end in time is not
         * begun: the fallback now, not after the rest of the budget */
        res->final_estimate = gp_auto_final_estimate(&c[w], &score[w]);
        res->skip_final = res->fallback && res->seconds + res->final_estimate > a->budget_s;
        publish(a);
        ap.stage = count; /* the final fit's progress counts on from here */
        ap.stop_at = a->budget_s; /* the final fit's deadline: the budget's end */
        ap.may_stop = 1;
        ap.over_budget = 0;
    }
    for (size_t i = 0; i < count; i++) {
        json_decref(reports[i]);
        gp_model_free(last[i]);
    }
    res->progress = ap;
    return rc;
}

/* ---- the final fit and what the version says of the run ---- */

int gp_api_auto_final(gp_api_auto *a, gp_api_auto_result *res, int rc, gp_model **model,
                      gp_error *err)
{
    a->final_fit = "every row";
    if (res->skip_final && res->fallback) {
        gp_model_free(*model);
        *model = res->fallback;
        res->fallback = NULL;
        gp_error_clear(err);
        rc = GP_OK;
        a->final_fit = "not begun: the winner's validation put it past budget_s; the version "
                       "is the winner's last validation fit (its training part of the rows)";
    } else if (rc == GP_ECANCELLED && res->progress.over_budget && res->fallback) {
        /* Stopped at budget_s. The optimisers cannot hand back their best
         * point so far (a stop is a cancel), so the version is the model the
         * winner's validation fitted last: scored already (with a hold-out,
         * its report is exactly this model's), and free. */
        gp_model_free(*model);
        *model = res->fallback;
        res->fallback = NULL;
        gp_error_clear(err);
        rc = GP_OK;
        a->final_fit = "stopped at budget_s: the version is the winner's last validation fit "
                       "(its training part of the rows)";
    }
    gp_model_free(res->fallback);
    res->fallback = NULL;
    a->seconds = now_seconds() - res->progress.start;
    return rc;
}

void gp_api_auto_info(json_t *o, const gp_api_auto *a)
{
    json_object_set_new(o, "seconds", gp_json_real(a->seconds));
    json_object_set_new(o, "within_budget", json_boolean(a->seconds <= a->budget_s));
    if (a->final_fit)
        json_object_set_new(o, "final_fit", json_string(a->final_fit));
    char why[200];
    snprintf(why, sizeof why,
             "auto's default: %d folds up to %d rows, beyond a seeded hold-out of %g (one fit "
             "per candidate)",
             GP_AUTO_DEFAULT_FOLDS, GP_AUTO_HOLDOUT_MIN_ROWS, GP_AUTO_HOLDOUT_FRACTION);
    json_object_set_new(o, "validation", json_string(a->default_validation ? why
                                                                           : "the request's"));
}
