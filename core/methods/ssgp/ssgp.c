/* Sparse-spectrum GP regression: see core/methods/ssgp/ssgp.h.
 *
 * Working units as in exact: standardised inputs and targets unless
 * "standardize": false; predictions are mapped back at the end. The model is
 * held in the 2R-dimensional weight space: the cached factor L of
 * A = Phi^T Phi + s I and alpha = A^{-1} Phi^T y give the posterior of the
 * weights, N(alpha, s A^{-1}), from which every prediction and sample follows
 * without touching the training data again. */
#include "core/methods/ssgp/ssgp.h"

#include "core/methods/ssgp/fit.h"
#include "core/methods/ssgp/internal.h"
#include "core/methods/ssgp/model.h"
#include "core/methods/ssgp/observe.h"
#include "core/methods/ssgp/persist.h"

static const gp_kernel_type ssgp_kernels[] = {GP_KERNEL_RBF, GP_KERNEL_MATERN12,
                                              GP_KERNEL_MATERN32, GP_KERNEL_MATERN52};

static const gp_option_spec ssgp_options[] = {
    {"features", GP_OPTION_INT, 100, NULL, 1, 20000, NULL,
     "R, the number of random frequencies; each gives a cos and a sin feature"},
    {"frequencies", GP_OPTION_ENUM, 0, "auto", 0, 0, "auto|mc|qmc|orf|stein",
     "how the frequencies are drawn from the kernel's spectral density: Monte Carlo, "
     "scrambled Halton (qmc), orthogonal random features, Stein random features (SVGD "
     "towards the density), or auto: chosen from the spread of the inputs in lengthscale "
     "units (reported as method_info.frequencies)"},
    {"stein_iterations", GP_OPTION_INT, 2000, NULL, 0, 1000000, NULL,
     "SVGD iterations of the stein sampler"},
    {"stein_step", GP_OPTION_NUMBER, 0.1, NULL, 1e-6, 10, NULL,
     "Adam learning rate of the stein sampler"},
    {"bandwidth", GP_OPTION_ENUM, 0, "total", 0, 0, "total|per_dim",
     "SVGD median bandwidth: one over total squared distances (total), or per dimension "
     "(the authors' code; collapses the particles above a few dimensions)"},
    {"learn_frequencies", GP_OPTION_BOOL, 0, NULL, 0, 1, NULL,
     "false: the frequencies are a fixed approximation of the kernel; true: they are "
     "hyperparameters learned with the others (the original SSGP)"},
    {"max_iterations", GP_OPTION_INT, 200, NULL, 1, 100000, NULL, "L-BFGS iterations"},
    {"tolerance", GP_OPTION_NUMBER, 1e-10, NULL, 1e-16, 1, NULL,
     "stop when the relative LML change of an iteration falls below this"},
};

static const gp_method_ops ssgp_ops = {
    .fit = ssgp_fit,
    .predict = ssgp_predict,
    .sample = ssgp_sample,
    .export_impl = ssgp_export,
    .import_impl = ssgp_import,
    .free_impl = ssgp_impl_free,
    .observe = ssgp_observe,
    .observe_noise = ssgp_observe_noise,
    .batch_invariant = 1, /* predict: per-point arithmetic (gp_rff_features_columns) */
};

static const gp_info_spec ssgp_info[] = {
    {"frequencies", GP_INFO_STRING,
     "the frequency sampler used (the one auto chose, when auto)"},
    {"features", GP_INFO_NUMBER,
     "R, the number of frequencies (2R features)"},
    {"spread", GP_INFO_NUMBER,
     "spread of the training inputs in lengthscale units, which auto decides on"},
    {"learn_frequencies", GP_INFO_STRING,
     "\"true\" when the frequencies were optimised as hyperparameters"},
    {"auto_redrawn", GP_INFO_STRING,
     "auto only: \"true\" when the choice changed at the learned lengthscales and the "
     "frequencies were redrawn and refitted"},
    {"streamed_rows", GP_INFO_NUMBER,
     "a fit over a data set: the rows it read in chunks (every process's)"},
    {"chunk_rows", GP_INFO_NUMBER, "a fit over a data set: rows per chunk read"},
    {"ranks", GP_INFO_NUMBER,
     "a fit over a data set: processes whose sums it added (1 on one machine)"},
};

static const gp_option_setting ssgp_quick[] = {
    {"max_iterations", 8}, {"features", 16}, {"stein_iterations", 40}};

const gp_method gp_method_ssgp = {
    .name = "ssgp",
    .summary = "Sparse-spectrum GP: regression on R random Fourier frequencies of the kernel's "
               "spectral density (Monte Carlo, QMC, orthogonal or Stein random features), "
               "optionally learned; O(N R^2) fit, O(R^2) per predicted point",
    .objective_name = "log_marginal_likelihood",
    .options = ssgp_options,
    .n_options = sizeof ssgp_options / sizeof ssgp_options[0],
    .kernels = ssgp_kernels,
    .n_kernels = sizeof ssgp_kernels / sizeof ssgp_kernels[0],
    .composite_kernels = 0,
    .iterations_option = "max_iterations",
    .restarts_option = NULL,
    .info = ssgp_info,
    .n_info = sizeof ssgp_info / sizeof ssgp_info[0],
    .quick = ssgp_quick,
    .n_quick = sizeof ssgp_quick / sizeof ssgp_quick[0],
    .hyper_priors = 1,
    .per_point_noise = 1,
    .mean_functions = 1,
    .streams_rows = 1,
    .ops = &ssgp_ops,
};
