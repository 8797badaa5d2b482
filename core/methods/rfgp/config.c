/* rfgp: the configuration read from a fit request, and the model's
 * description (method_info). */
#include "core/methods/rfgp/config.h"

#include <math.h>
#include <string.h>

#include "core/methods/rfgp/embed.h"
#include "core/methods/rfgp/update.h"
#include "core/model/method.h"

static const char *const selection_names[] = {"median", "loocv", "ml", "fixed"};

/* ---- method_info ---- */

void rfgp_set_info(gp_model *model)
{
    const rfgp_impl *im = model->impl;
    const rfgp_cfg *c = &im->c;
    gp_model_info_string(model, "state", im->online ? "online" : "warmup");
    gp_model_info_number(model, "features", (double)c->D);
    if (c->two_stage)
        gp_model_info_number(model, "inner_features", (double)c->d_in);
    gp_model_info_string(model, "width_selection", selection_names[c->selection]);
    gp_model_info_number(model, "warmup", (double)c->warmup);
    gp_model_info_string(model, "gate", c->gate_absolute ? "absolute" : "relative");
    if (!im->online)
        return;
    if (c->two_stage)
        gp_model_info_number(model, "outer_width", im->map.gamma);
    gp_model_info_number(model, "noise", model->noise_variance);
    gp_model_info_number(model, "prior_variance", exp(model->kernel->log_variance));
    gp_model_info_number(model, "refactorisations", im->post.refactorisations);
    gp_model_info_number(model, "rank_one_updates", im->post.rank_one);
    gp_model_info_number(model, "refactor_batch", (double)rfgp_crossover(c));
    gp_model_info_string(model, "always_asks", im->always_asks ? "true" : "false");
}

/* ---- the configuration ---- */

static const gp_option_value *given_option(const gp_fit_request *req, const char *name)
{
    for (size_t i = 0; i < req->n_options; i++)
        if (strcmp(req->options[i].name, name) == 0)
            return &req->options[i];
    return NULL;
}

static int selection_from_name(const char *s)
{
    for (int i = 0; i <= SEL_FIXED; i++)
        if (s && strcmp(s, selection_names[i]) == 0)
            return i;
    return SEL_MEDIAN;
}

/* The outputs: the rows' columns, or the option for a model without rows. */
static int read_outputs(const gp_fit_request *req, size_t *p, gp_error *err)
{
    const gp_option_value *o = given_option(req, "outputs");
    size_t from_y = req->n_outputs ? req->n_outputs : 1;
    *p = o ? (size_t)o->number : from_y;
    if (o && (req->n > 0 || req->n_outputs > 1) && *p != from_y)
        return gp_error_set(err, GP_EINVAL, "options.outputs",
                            "options.outputs is %zu but y has %zu column%s", *p, from_y,
                            from_y == 1 ? "" : "s");
    return GP_OK;
}

/* The fit's memory before anything is allocated, against the budget an exact
 * fit of max_train_points points has (as ssgp): the packed factor and two
 * D x D matrices of a re-factorisation, the maps, the buffer and its features. */
static int size_guard(const gp_fit_request *req, const rfgp_cfg *c, gp_error *err)
{
    double cap = (double)gp_fit_point_cap(req), D = (double)c->D, w = (double)c->warmup;
    double need = 2.5 * D * D + D * (double)(c->two_stage ? c->d_in : c->dk) +
                  w * (D + (double)(c->width + c->p)) +
                  (c->two_stage ? 3.0 * (double)c->d_in * (w < 256 ? w : 256) : 0.0) +
                  (w > D ? D : w) * (w > D ? D : w);
    if (need > cap * cap)
        return gp_error_set(err, GP_ETOOBIG, "options.features",
                            "rfgp with %.0f features needs %.1f GB of workspace, above the "
                            "budget of an exact fit of max_train_points = %.0f points (%.1f GB): "
                            "use fewer features or a shorter warm-up, or raise "
                            "--max-train-points",
                            D, need * 8e-9, cap, cap * cap * 8e-9);
    return GP_OK;
}

/* Priors and bounds shape the marginal likelihood of width_selection ml, the
 * one selection that fits hyperparameters; rfgp holds its lengthscales and
 * variance as groups (the kernel's fixed bits), not singly. */
static int check_hyper(const gp_fit_request *req, const rfgp_cfg *c, gp_error *err)
{
    const gp_hyper_spec *hs = req->hyper;
    if (hs == NULL)
        return GP_OK;
    for (size_t i = 0; i <= hs->n_kernel; i++)
        if (hs->entry[i].fixed)
            return gp_error_set(err, GP_EUNSUPPORTED, "kernel.fixed",
                                "rfgp holds its lengthscales together (\"fixed\": "
                                "[\"lengthscale\"]), not singly");
    if (gp_hyper_shapes_objective(hs) && c->selection != SEL_ML)
        return gp_error_set(err, GP_EUNSUPPORTED, "kernel.priors",
                            "rfgp takes priors and bounds with options.width_selection ml, the "
                            "selection that fits its widths, variance and noise");
    return GP_OK;
}

int rfgp_read_cfg(const gp_method *m, const gp_fit_request *req, rfgp_cfg *c, gp_error *err)
{
    memset(c, 0, sizeof *c);
    int rc = read_outputs(req, &c->p, err);
    if (rc)
        return rc;
    c->two_stage = gp_embed_two_stage(&req->input);
    c->dk = req->input.kind == GP_INPUT_POINT ? req->d : gp_input_point_dim(&req->input);
    c->width = req->d;
    c->D = (size_t)gp_option_number(m, req, "features");
    c->d_in = c->two_stage ? (size_t)gp_option_number(m, req, "inner_features") : 0;
    c->warmup = (size_t)gp_option_number(m, req, "warmup");
    c->selection = selection_from_name(gp_option_string(m, req, "width_selection"));
    c->median_factor = gp_option_number(m, req, "median_factor");
    c->outer_width = gp_option_number(m, req, "outer_width");
    c->forgetting = gp_option_number(m, req, "forgetting");
    c->refactor_batch = gp_option_string(m, req, "refactor_batch")
                            ? 0.0
                            : floor(gp_option_number(m, req, "refactor_batch"));
    /* a number given is an absolute tau; absent or "relative", the relative rule */
    const gp_option_value *gate = given_option(req, "gate_threshold");
    c->gate_absolute = gate != NULL && gate->string == NULL;
    c->gate_tau = c->gate_absolute ? gate->number : 0.0;
    c->kappa = gp_option_number(m, req, "gate_kappa");
    c->max_iterations = (int)gp_option_number(m, req, "max_iterations");
    c->tolerance = gp_option_number(m, req, "tolerance");
    c->noise_learn = !req->noise_fixed;
    c->seed = req->seed;
    const gp_kernel *k = req->kernel;
    if (k->n_active != k->input_dim)
        return gp_error_set(err, GP_EUNSUPPORTED, "kernel.active_dims",
                            "rfgp's kernel sees every input dimension (no active_dims)");
    if (c->warmup == 0 && c->selection != SEL_FIXED)
        return gp_error_set(err, GP_EINVAL, "options.warmup",
                            "warmup 0 needs width_selection fixed: the widths are chosen from "
                            "the warm-up rows");
    if (c->selection == SEL_FIXED && c->two_stage && !(c->outer_width > 0.0))
        return gp_error_set(err, GP_EINVAL, "options.outer_width",
                            "width_selection fixed with %s inputs needs outer_width",
                            gp_input_kind_name(req->input.kind));
    /* the mean's basis is of standardised points, fitted for one output */
    if (req->mean != GP_MEAN_ZERO && (req->input.kind != GP_INPUT_POINT || c->p > 1))
        return gp_error_set(err, GP_EUNSUPPORTED, "mean",
                            "mean: rfgp takes a constant or linear mean for point inputs and "
                            "one output, not %s",
                            c->p > 1 ? "several outputs" : "distributional inputs");
    rc = check_hyper(req, c, err);
    return rc ? rc : size_guard(req, c, err);
}
