/* Harmonic kernel decomposition (method "hkd", core/methods/hkd/hkd.h): its options and
 * descriptor. */
#include "core/methods/hkd/hkd.h"

#include <math.h>
#include <string.h>

#include "core/methods/hkd/fit.h"
#include "core/methods/hkd/internal.h"
#include "core/methods/hkd/persist.h"
#include "core/methods/hkd/predict.h"
#include "core/methods/hkd/state.h"

/* ---- options ---- */

static const gp_kernel_type hkd_kernels[] = {GP_KERNEL_RBF, GP_KERNEL_MATERN12,
                                             GP_KERNEL_MATERN32, GP_KERNEL_MATERN52};

static const gp_option_spec hkd_options[] = {
    {"symmetry", GP_OPTION_OBJECT, 0, NULL, 0, 0,
     "{\"type\": \"object\", \"additionalProperties\": false, "
     "\"properties\": {\"generators\": {\"type\": \"array\", \"maxItems\": 8, "
     "\"items\": {\"type\": \"object\", \"required\": [\"type\"], "
     "\"properties\": {\"type\": {\"type\": \"string\", \"enum\": [\"negate\", \"negate_pca\", "
     "\"translate\", \"rotate2d\", \"cycle_dims\"]}, \"dims\": {\"type\": \"array\", "
     "\"items\": {\"type\": \"integer\", \"minimum\": 0}}, \"dim\": {\"type\": \"integer\", "
     "\"minimum\": 0}, \"ways\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 8}, "
     "\"order\": {\"type\": \"integer\", \"minimum\": 2, \"maximum\": 64}, "
     "\"period\": {\"type\": \"number\", \"minimum\": 0, \"exclusiveMinimum\": true}, "
     "\"shift\": {\"type\": \"integer\", \"minimum\": 1}}}}, "
     "\"resolve\": {\"type\": \"string\", \"enum\": [\"per_axis_real\"]}, "
     "\"share_inducing\": {\"type\": \"boolean\"}, "
     "\"validate\": {\"type\": \"boolean\"}, \"center\": {\"type\": \"string\", "
     "\"enum\": [\"mean\", \"origin\"]}}}",
     "the group the kernel is invariant under: {\"generators\": [...]} of negate {dims}, "
     "negate_pca {ways}, translate {dim, period, order}, rotate2d {dims: [i, j], order}, "
     "cycle_dims {dims, shift}; commuting, combined into their product; \"center\": \"mean\" "
     "(default: the group acts about the training mean) or \"origin\". Absent: negate every "
     "input (x -> -x, 2 blocks); []: one block (sgpr with fixed Z); \"share_inducing\": false "
     "gives every block its own m inducing inputs, started at the shared Z and optimised (T "
     "times the kernel evaluations; needs optimize_inducing, no translate)"},
    {"inducing", GP_OPTION_INT, 128, NULL, 1, 2048, NULL,
     "m, the inducing points of every block (the shared k-means Z; at most the number of "
     "training points)"},
    {"optimize_inducing", GP_OPTION_BOOL, 1, NULL, 0, 1, NULL,
     "also move the inducing inputs Z with the hyperparameters (the bound's gradient "
     "through the orbit; not with a translated input); false keeps the folded k-means Z"},
    {"inducing_selection", GP_OPTION_ENUM, 0, "kmeans", 0, 0, "kmeans|random",
     "kmeans: k-means centres of the data folded into a fundamental domain of the group; "
     "random: distinct folded training points (both seeded)"},
    {"hyper_subsample", GP_OPTION_INT, 10000, NULL, 0, 100000000, NULL,
     "rows the hyperparameter search uses (a seeded subsample; 0: all); the final posterior "
     "always uses every row"},
    {"max_iterations", GP_OPTION_INT, 100, NULL, 0, 100000, NULL,
     "L-BFGS iterations of the hyperparameter search (0: keep the kernel as given)"},
    {"tolerance", GP_OPTION_NUMBER, 1e-8, NULL, 1e-16, 1, NULL,
     "stop when the relative change of the bound in an iteration falls below this"},
    {"pcg_tolerance", GP_OPTION_NUMBER, 1e-7, NULL, 1e-14, 1e-2, NULL,
     "relative residual at which the coupled means' PCG stops during the hyperparameter "
     "search (each step starts from the last solve; the bound stays a bound for an inexact "
     "mean, its gradient is exact only at the solution: 1e-6 slowed L-BFGS on "
     "bench/results/hkd.md's keggdirected); the final solve on every row goes to 1e-10 or "
     "this, whichever is smaller"},
    {"pcg_max_iterations", GP_OPTION_INT, 200, NULL, 1, 100000, NULL,
     "PCG iterations per solve during the search at most; the final solve may take 20 times "
     "as many"},
    {"cache_mb", GP_OPTION_INT, 1024, NULL, 0, 1048576, NULL,
     "memory for the features Phi of all rows (N x T m doubles), which spares a kernel "
     "pass per PCG iteration; beyond it the passes recompute them chunk by chunk"},
};

/* v NULL: the option is absent (its default is checked against d). */
static int hkd_check_option(const char *name, const gp_value *v, size_t d, const char *field,
                            gp_error *err)
{
    if (strcmp(name, "symmetry") != 0)
        return gp_error_set(err, GP_EINVAL, field, "unknown option");
    gp_symmetry sym;
    int rc = gp_symmetry_parse(v, d, field, &sym, err);
    return rc ? rc : gp_symmetry_check_per_block(&sym, field, err);
}

/* ---- Nystrom trace study: a fit of this method with no optimisation ---- */

int gp_hkd_trace_error(const gp_fit_request *req, double *trace, gp_error *err)
{
    gp_fit_request r = *req;
    gp_option_value opts[16];
    size_t n = 0;
    for (size_t i = 0; i < req->n_options && n < 15; i++)
        if (strcmp(req->options[i].name, "max_iterations") != 0)
            opts[n++] = req->options[i];
    opts[n++] = (gp_option_value){.name = "max_iterations", .number = 0.0};
    r.options = opts;
    r.n_options = n;
    if (!r.noise_given) {
        r.noise_given = 1;
        r.noise_variance = 1.0;
    }
    gp_model *model;
    int rc = gp_model_fit(&gp_method_hkd, &r, &model, err);
    if (rc)
        return rc;
    double frac = NAN;
    for (size_t i = 0; i < model->diag.n_info; i++)
        if (strcmp(model->diag.info[i].key, "trace_fraction") == 0)
            frac = model->diag.info[i].number;
    *trace = frac * gp_kernel_diag(model->kernel, req->X);
    gp_model_free(model);
    return GP_OK;
}

/* ---- the descriptor ---- */

static const gp_method_ops hkd_ops = {
    .fit = hkd_fit,
    .predict = hkd_predict,
    .sample = hkd_sample,
    .export_impl = hkd_export,
    .import_impl = hkd_import,
    .free_impl = hkd_impl_free,
    .parts = hkd_parts,
    .part_name = hkd_part_name,
    .check_option = hkd_check_option,
    .batch_invariant = 1, /* predict: per-point arithmetic (test_features_points) */
};

static const gp_info_spec hkd_info[] = {
    {"n_blocks", GP_INFO_NUMBER, "T, the real blocks (additive parts) of the decomposition"},
    {"group_size", GP_INFO_NUMBER, "the number of group elements (kernel evaluations per "
                                   "inducing point and input)"},
    {"collapsed_bound", GP_INFO_NUMBER, "L*, the collapsed bound at the fitted "
                                        "hyperparameters on every training row"},
    {"pcg_iterations", GP_INFO_NUMBER, "PCG iterations of the final coupled-mean solve"},
    {"pcg_residual", GP_INFO_NUMBER, "its final relative residual"},
    {"inducing", GP_INFO_NUMBER, "m, the inducing points of a block"},
    {"inducing_per_block", GP_INFO_NUMBER,
     "1 when every block has its own inducing inputs (\"share_inducing\": false), 0 when they "
     "share one Z"},
    {"inducing_dropped", GP_INFO_NUMBER,
     "(block, point) pairs left out because k_t(z, z) is negligible (points near a fixed "
     "point of the group)"},
    {"optimize_inducing", GP_INFO_NUMBER, "1 when Z moved with the hyperparameters"},
    {"hyper_rows", GP_INFO_NUMBER, "training rows the hyperparameter search used"},
    {"working_dims", GP_INFO_NUMBER,
     "inputs the kernel sees (one more per translated, circle-embedded input)"},
    {"trace_fraction", GP_INFO_NUMBER,
     "sum_t tr(K_t,ff - Q_t) / tr(Kff): the share of the prior variance the blocks miss"},
    {"features_cached", GP_INFO_NUMBER,
     "1 when the final pass held Phi for every row in memory (cache_mb)"},
};

static const gp_option_setting hkd_quick[] = {{"max_iterations", 8}};

const gp_method gp_method_hkd = {
    .name = "hkd",
    .summary = "Harmonic kernel decomposition (HVGP): a sparse variational GP whose kernel is "
               "split by a symmetry group into T orthogonal blocks of m inducing points each; "
               "costs O(N T m^2) per pass against O(N T^2 m^2) for T m points",
    .objective_name = "elbo",
    .options = hkd_options,
    .n_options = sizeof hkd_options / sizeof hkd_options[0],
    .kernels = hkd_kernels,
    .n_kernels = sizeof hkd_kernels / sizeof hkd_kernels[0],
    .composite_kernels = 0,
    .iterations_option = "max_iterations",
    .restarts_option = NULL,
    .info = hkd_info,
    .n_info = sizeof hkd_info / sizeof hkd_info[0],
    .quick = hkd_quick,
    .n_quick = sizeof hkd_quick / sizeof hkd_quick[0],
    .hyper_priors = 1,
    .mean_functions = 1, /* profiled out of the bound: bound.c profile_mean */
    .ops = &hkd_ops,
};
