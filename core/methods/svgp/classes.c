/* The fitted posterior of a softmax svgp model (core/methods/svgp/classes.h). */
#include "core/methods/svgp/classes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/linalg/linalg.h"

/* Class c's stream for draws: the seed mixed with the class (0: the seed). */
#define CLASS_SEED_STEP UINT64_C(0x9e3779b97f4a7c15)

int svgp_classes_widen(gp_inducing_post *p, size_t C, gp_error *err)
{
    size_t mc = 0, mmc = 0;
    int rc = gp_checked_size(p->m, C, &mc, err);
    if (rc == GP_OK)
        rc = gp_checked_size(p->m * p->m, C, &mmc, err);
    if (rc)
        return rc;
    double *mt = gp_alloc_doubles(mc, err), *cov = gp_alloc_doubles(mmc, err);
    if (mt == NULL || cov == NULL) {
        free(mt);
        free(cov);
        return GP_ENOMEM;
    }
    free(p->mt);
    free(p->C);
    p->mt = mt;
    p->C = cov;
    p->latents = C;
    return GP_OK;
}

/* Class c's posterior: p with mt and C at its blocks (shares everything). */
static gp_inducing_post class_view(const gp_inducing_post *p, size_t c)
{
    gp_inducing_post v = *p;
    v.mt = p->mt + c * p->m;
    v.C = p->C + c * p->m * p->m;
    v.latents = 1;
    return v;
}

int svgp_classes_sample(const gp_model *model, const gp_sample_request *req, double *samples,
                        gp_error *err)
{
    const gp_inducing_post *p = model->impl;
    size_t count = 0;
    int rc = gp_checked_size(req->m, req->n_samples, &count, err);
    double *P = NULL;
    if (rc == GP_OK)
        rc = gp_model_points(model, req->X, req->m, &P, err);
    for (size_t c = 0; rc == GP_OK && c < model->n_outputs; c++) {
        gp_inducing_post v = class_view(p, c);
        gp_sample_request rc_req = *req;
        rc_req.seed = req->seed ^ (CLASS_SEED_STEP * (uint64_t)c);
        rc = gp_inducing_sample_points(model, &v, P, &rc_req, samples + c * count, err);
    }
    free(P);
    return rc;
}

int svgp_classes_export(const gp_model *model, gp_state *st, gp_error *err)
{
    const gp_inducing_post *p = model->impl;
    size_t m = p->m, C = model->n_outputs, packed = m * (m + 1) / 2;
    int rc = gp_inducing_post_export(p, st, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "class_mean_white", m, C, p->mt, err);
    if (rc)
        return rc;
    double *Cp = gp_alloc_doubles(packed * C, err);
    if (Cp == NULL)
        return GP_ENOMEM;
    for (size_t c = 0; c < C; c++)
        gp_pack_lower(p->C + c * m * m, m, m, Cp + c * packed);
    return gp_state_put_owned(st, "class_cov_white_packed", packed, C, Cp, err);
}

/* The classes' arrays into p (widened to C), checked finite. */
static int import_classes(const gp_state *st, size_t C, gp_inducing_post *p, gp_error *err)
{
    size_t m = p->m, packed = m * (m + 1) / 2, bad;
    const double *mt, *Cp;
    int rc = gp_state_get(st, "class_mean_white", m, C, &mt, err);
    if (rc == GP_OK)
        rc = gp_state_get(st, "class_cov_white_packed", packed, C, &Cp, err);
    if (rc == GP_OK && (!gp_all_finite(mt, m * C, &bad) || !gp_all_finite(Cp, packed * C, &bad)))
        rc = gp_error_set(err, GP_EDATA, "state",
                          "the classes' inducing-point posterior holds a non-finite number");
    if (rc == GP_OK)
        rc = svgp_classes_widen(p, C, err);
    if (rc)
        return rc;
    memcpy(p->mt, mt, m * C * sizeof *mt);
    for (size_t c = 0; c < C; c++) {
        gp_unpack_lower(Cp + c * packed, m, p->C + c * m * m, m);
        gp_symmetrize_from_lower(p->C + c * m * m, m, m);
    }
    return GP_OK;
}

int svgp_classes_import(gp_model *model, const gp_state *st, gp_error *err)
{
    size_t C = model->n_outputs;
    if (C < 2 || C > GP_SOFTMAX_MAX_CLASSES)
        return gp_error_set(err, GP_EDATA, "n_outputs",
                            "a softmax model has 2 to %d classes, not %zu",
                            GP_SOFTMAX_MAX_CLASSES, C);
    int rc = gp_inducing_method_import(model, st, err);
    if (rc)
        return rc;
    rc = import_classes(st, C, model->impl, err);
    if (rc) {
        gp_inducing_method_free(model->impl);
        model->impl = NULL;
    }
    return rc;
}
