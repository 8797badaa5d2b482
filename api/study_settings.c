/* A study's model settings (docs/design/api.md, "Studies"): the method
 * (auto: exact up to GP_STUDY_AUTO_EXACT_MAX trials, sgpr beyond), the
 * kernel (matern52 with ARD by default) and the rest of a fit's fields,
 * checked as a fit of them would be, so that a refit never finds them bad. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/study.h"
#include "core/kernel/kernel_spectral.h"

static const char *const model_keys[] = {"method", "kernel", "options", "noise", "mean",
                                         "standardize", NULL};

const char *gp_study_method_for(const gp_study_config *c, size_t n)
{
    const char *m = json_string_value(json_object_get(c->model, "method"));
    if (m && strcmp(m, "auto") != 0)
        return m;
    return n <= GP_STUDY_AUTO_EXACT_MAX ? "exact" : "sgpr";
}

/* A fit request of the model settings by method over D inputs and n
 * stand-in rows, parsed by the fit's own parser: what it refuses, a refit
 * would. */
static int check_model_as_fit(gp_api *api, const gp_study_config *c, const char *method,
                              gp_error *err)
{
    size_t D = gp_study_dim(c), n = 4;
    json_t *fit = json_deep_copy(c->model), *X = json_array(), *y = json_array();
    for (size_t i = 0; X && y && i < n; i++) {
        json_t *row = json_array();
        for (size_t j = 0; row && j < D; j++)
            json_array_append_new(row, json_real((double)((i * 7 + j * 3) % 5) / 4.0));
        json_array_append_new(X, row);
        json_array_append_new(y, json_real((double)i));
    }
    char *text = NULL;
    if (fit && X && y) {
        json_object_set_new(fit, "name", json_string("study.check"));
        json_object_set_new(fit, "method", json_string(method));
        json_object_set(fit, "X", X);
        json_object_set(fit, "y", y);
        text = json_dumps(fit, GP_JSON_FLAGS);
    }
    json_decref(fit);
    json_decref(X);
    json_decref(y);
    if (text == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    gp_request req = {.content_type = "application/json", .body = text, .body_len = strlen(text)};
    gp_fit_job *job = NULL;
    int rc = gp_api_parse_fit(api, &req, &job, err);
    free(text);
    gp_fit_job_free(job);
    if (rc && err) { /* the fit's field, as the study names it */
        char f[GP_STUDY_FIELD_BUF];
        snprintf(f, sizeof f, "model%s%s", err->field[0] ? "." : "", err->field);
        /* what fits: a kernel's deep field may lose its end, as gp_error_set's do */
        memcpy(err->field, f, sizeof err->field - 1);
        err->field[sizeof err->field - 1] = '\0';
    }
    return rc;
}

/* The settings as a fit of each method they may fit with. */
static int check_model(gp_api *api, const gp_study_config *c, gp_error *err)
{
    const char *m = json_string_value(json_object_get(c->model, "method"));
    if (strcmp(m, "auto") != 0)
        return check_model_as_fit(api, c, m, err);
    if (json_object_get(c->model, "options"))
        return gp_error_set(err, GP_EINVAL, "model.options",
                            "options are a method's: name model.method (exact or sgpr) to give "
                            "them");
    int rc = check_model_as_fit(api, c, "exact", err);
    return rc ? rc : check_model_as_fit(api, c, "sgpr", err);
}

/* Thompson draws from random-feature posteriors: the kernel needs a
 * spectral density (a stationary leaf). */
static int check_thompson(const gp_study_config *c, gp_error *err)
{
    if (c->acquisition != GP_STUDY_THOMPSON)
        return GP_OK;
    json_t *kj = json_object_get(c->model, "kernel");
    const char *t = json_string_value(json_object_get(kj, "type"));
    int type = t ? gp_kernel_type_from_name(t) : -1;
    gp_spectral sp;
    gp_error ignored;
    if (type < 0 || gp_kernel_spectral((gp_kernel_type)type, &sp, &ignored) != GP_OK)
        return gp_error_set(err, GP_EUNSUPPORTED, "model.kernel",
                            "acquisition thompson draws random features from the kernel's "
                            "spectral density: kernel '%s' has none (rbf, matern12, matern32, "
                            "matern52 have)",
                            t ? t : "?");
    return GP_OK;
}

int gp_study_parse_model(gp_api *api, json_t *v, gp_study_config *c, int check, gp_error *err)
{
    if (v && !json_is_object(v))
        return gp_error_set(err, GP_EINVAL, "model", "model must be an object");
    int rc = v ? gp_json_known_keys(v, model_keys, "model", err) : GP_OK;
    if (rc)
        return rc;
    c->model = v ? json_deep_copy(v) : json_object();
    if (c->model == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    json_t *m = json_object_get(c->model, "method");
    const char *ms = json_string_value(m);
    if (m == NULL)
        json_object_set_new(c->model, "method", json_string("auto"));
    else if (ms == NULL || (strcmp(ms, "auto") != 0 && strcmp(ms, "exact") != 0 &&
                            strcmp(ms, "sgpr") != 0))
        return gp_error_set(err, GP_EINVAL, "model.method",
                            "model.method must be \"auto\", \"exact\" or \"sgpr\" (the "
                            "methods whose models give the input gradients the acquisition "
                            "needs; auto: exact up to %d trials, sgpr beyond)",
                            GP_STUDY_AUTO_EXACT_MAX);
    if (json_object_get(c->model, "kernel") == NULL) {
        json_t *k = json_pack("{s:s, s:b}", "type", "matern52", "ard", 1);
        if (k == NULL || json_object_set_new(c->model, "kernel", k) != 0)
            return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    rc = check_thompson(c, err);
    return rc || !check ? rc : check_model(api, c, err);
}
