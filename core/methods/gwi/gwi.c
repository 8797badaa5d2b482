/* Gaussian Wasserstein inference (method "gwi", core/methods/gwi/gwi.h): its options and
 * descriptor. */
#include "core/methods/gwi/gwi.h"

#include "core/methods/gwi/internal.h"
#include "core/methods/gwi/model.h"
#include "core/methods/gwi/persist.h"
#include "core/methods/gwi/select.h"

/* ---- the descriptor ---- */

static const gp_kernel_type gwi_kernels[] = {GP_KERNEL_RBF, GP_KERNEL_MATERN12,
                                             GP_KERNEL_MATERN32, GP_KERNEL_MATERN52,
                                             GP_KERNEL_RQ};

static const gp_option_spec gwi_options[] = {
    {"mean", GP_OPTION_ENUM, 0, "kernel_sum", 0, 0, "kernel_sum|mlp",
     "the variational mean: kernel_sum m(x) = k_Z(x)^T beta (GWI-SVGP) or mlp, a D -> h -> h "
     "-> 1 tanh network (GWI-net)"},
    {"hidden", GP_OPTION_INT, 10, NULL, 1, 256, NULL,
     "h, the width of the network's two hidden layers (mean mlp; the thesis: 10)"},
    {"w2_estimator", GP_OPTION_ENUM, 0, "bures_sym", 0, 0, "bures_sym|thesis_nonsym",
     "the squared Wasserstein distance's estimate: bures_sym, the exact W2^2 between the "
     "marginals at the comparison points (symmetric, >= 0, 0 when q is the prior); "
     "thesis_nonsym, the thesis's eigenvalues of r(S, B) k(B, S)"},
    {"objective", GP_OPTION_ENUM, 0, "thesis_w2sq", 0, 0, "thesis_w2sq|code_w",
     "thesis_w2sq: summed expected NLL + W2^2 (the thesis); code_w: the batch's mean expected "
     "NLL + W2 (the authors' released code)"},
    {"inducing", GP_OPTION_INT, 0, NULL, 0, 8192, NULL,
     "M, the inducing points (distinct training inputs drawn at random); 0 (default): "
     "round(inducing_factor sqrt(N))"},
    {"inducing_factor", GP_OPTION_NUMBER, 1.0, NULL, 0.01, 100, "auto",
     "M = round(inducing_factor sqrt(N)) when inducing is 0, or \"auto\": the thesis's model "
     "selection (B1), one whole fit per factor of {0.5, 1, 1.5, 2} (mlp) or {1, 2, 3, 4, 5} "
     "(kernel_sum) on the same seeded split, the fit of the lowest tempered validation NLL "
     "kept as it is (its validation rows stay held out, as in the thesis); costs the grid's "
     "fits together (4 to 55 factor-1 fits); needs inducing 0 and validation_fraction > 0"},
    {"batch", GP_OPTION_INT, 0, NULL, 0, 1000000, NULL,
     "N_B, the minibatch (all training rows when fewer); 0 (default): N/10 within [100, 1000] "
     "(the thesis: 1000; its code: 100 on the small sets)"},
    {"w2_points", GP_OPTION_INT, 100, NULL, 1, 4096, NULL,
     "N_S, the training inputs drawn afresh every step to estimate W2 (the thesis: 100)"},
    {"epochs", GP_OPTION_INT, 1000, NULL, 0, 1000000, NULL,
     "passes over the training rows (Adam steps: epochs x ceil(N / batch))"},
    {"learning_rate", GP_OPTION_NUMBER, 1e-2, NULL, 1e-8, 10, NULL, "Adam's step size"},
    {"validation_fraction", GP_OPTION_NUMBER, 0.1, NULL, 0, 0.5, NULL,
     "rows held out (seeded) for early stopping and tempering; 0: the training rows serve"},
    {"patience", GP_OPTION_INT, 200, NULL, 1, 1000000, NULL,
     "stop after this many epochs without a better validation NLL; the best epoch is kept"},
    {"prior", GP_OPTION_ENUM, 0, "sgpr", 0, 0, "sgpr|inducing",
     "how the prior's hyperparameters are fitted before they are frozen: sgpr (default), "
     "Titsias' collapsed bound on every training row with Z held (O(N M^2) per evaluation); "
     "inducing, the exact marginal likelihood of the M inducing points' targets alone (the "
     "thesis, (B.58): boston's test NLL 2.77 against 2.45)"},
    {"inducing_selection", GP_OPTION_ENUM, 0, "random", 0, 0, "random|greedy",
     "how Z starts: random, distinct training inputs drawn uniformly (the thesis); greedy, "
     "sgpr's maximum residual variance under the starting kernel (prior sgpr only)"},
    {"optimize_inducing", GP_OPTION_BOOL, 1, NULL, 0, 1, NULL,
     "with prior sgpr: the inducing inputs move with the hyperparameters in that fit (as "
     "sgpr's do), then stay fixed while the W2 loss is trained; false keeps the drawn inputs "
     "(prior inducing always keeps them, as the thesis's GWI-net)"},
    {"learn_noise", GP_OPTION_BOOL, 0, NULL, 0, 1, NULL,
     "also train the noise variance with q (Adam on its log, from the prior fit's value); "
     "false (default) keeps the prior fit's noise, as the thesis does. A fixed noise in the "
     "request is kept either way"},
    {"temper", GP_OPTION_BOOL, 1, NULL, 0, 1, NULL,
     "multiply the predictive variances by alpha = mean[(y - m)^2 / (r + s2)] over the "
     "validation rows, clipped to [1e-6, 2] (the closed-form NLL minimiser; 1 when fewer than "
     "10 rows are there to estimate it)"},
};

static const gp_method_ops gwi_ops = {
    .fit = gwi_fit,
    .predict = gwi_predict,
    .sample = gwi_sample,
    .export_impl = gwi_export,
    .import_impl = gwi_import,
    .free_impl = gwi_free,
    .batch_invariant = 1, /* predict: core/inducing's per-point arithmetic, the network by gp_dot_columns */
};

static const gp_info_spec gwi_info[] = {
    {"inducing", GP_INFO_NUMBER, "M, the inducing points"},
    {"inducing_factor", GP_INFO_NUMBER,
     "the factor of M = round(factor sqrt(N)) used (the one auto chose; absent when inducing "
     "was given)"},
    {"inducing_factor_selection", GP_INFO_STRING, "inducing_factor auto only: \"auto\""},
    {"auto_nll_0.5", GP_INFO_NUMBER,
     "inducing_factor auto, mlp: the validation NLL per point (tempered, original units) of "
     "factor 0.5 (absent when that factor's fit failed numerically)"},
    {"auto_nll_1", GP_INFO_NUMBER, "inducing_factor auto: the validation NLL of factor 1"},
    {"auto_nll_1.5", GP_INFO_NUMBER,
     "inducing_factor auto, mlp: the validation NLL of factor 1.5"},
    {"auto_nll_2", GP_INFO_NUMBER, "inducing_factor auto: the validation NLL of factor 2"},
    {"auto_nll_3", GP_INFO_NUMBER,
     "inducing_factor auto, kernel_sum: the validation NLL of factor 3"},
    {"auto_nll_4", GP_INFO_NUMBER,
     "inducing_factor auto, kernel_sum: the validation NLL of factor 4"},
    {"auto_nll_5", GP_INFO_NUMBER,
     "inducing_factor auto, kernel_sum: the validation NLL of factor 5"},
    {"mean", GP_INFO_STRING, "the variational mean: kernel_sum or mlp"},
    {"prior_objective", GP_INFO_NUMBER,
     "what the prior's fit maximised, at its end (standardised units): the exact log marginal "
     "likelihood of the inducing points' targets (prior inducing) or the collapsed bound on "
     "the training rows (prior sgpr)"},
    {"train_rows", GP_INFO_NUMBER, "rows the loss saw"},
    {"validation_rows", GP_INFO_NUMBER, "rows held out for early stopping and tempering"},
    {"batch", GP_INFO_NUMBER, "the minibatch size used"},
    {"w2_points", GP_INFO_NUMBER, "the comparison points per step"},
    {"epochs_run", GP_INFO_NUMBER, "epochs before the budget or early stopping"},
    {"best_epoch", GP_INFO_NUMBER, "the epoch whose parameters were kept (0: the start)"},
    {"skipped_steps", GP_INFO_NUMBER, "steps skipped because an eigensolver failed"},
    {"temper", GP_INFO_NUMBER, "alpha, the factor of every predictive variance (1 untempered)"},
    {"untempered_nll", GP_INFO_NUMBER,
     "the best validation NLL per point before tempering (original units)"},
};

static const gp_option_setting gwi_quick[] = {{"epochs", 8}};

const gp_method gp_method_gwi = {
    .name = "gwi",
    .summary = "Gaussian Wasserstein inference: a sparse GP whose mean is free (a kernel sum or "
               "a small tanh network) and whose covariance is the SVGP kernel, trained by Adam "
               "on the expected NLL plus the squared 2-Wasserstein distance to the prior; "
               "O(N_B M^2 + N_S^3) per step, O(M^2) per predicted point",
    .objective_name = "validation_nll",
    .options = gwi_options,
    .n_options = sizeof gwi_options / sizeof gwi_options[0],
    .kernels = gwi_kernels,
    .n_kernels = sizeof gwi_kernels / sizeof gwi_kernels[0],
    .composite_kernels = 0,
    .iterations_option = "epochs",
    .restarts_option = NULL,
    .info = gwi_info,
    .n_info = sizeof gwi_info / sizeof gwi_info[0],
    .quick = gwi_quick,
    .n_quick = sizeof gwi_quick / sizeof gwi_quick[0],
    .hyper_priors = 1,
    .mean_functions = 1, /* the prior's mean: fit.c mean_bases */
    .ops = &gwi_ops,
};
