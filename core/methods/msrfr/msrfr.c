/* Mixture Stein random feature regression (method "msrfr", core/methods/msrfr/msrfr.h): its
 * options and descriptor. */
#include "core/methods/msrfr/msrfr.h"

#include "core/methods/msrfr/fit.h"
#include "core/methods/msrfr/internal.h"
#include "core/methods/msrfr/model.h"
#include "core/methods/msrfr/persist.h"

static const gp_kernel_type msrfr_kernels[] = {GP_KERNEL_RBF, GP_KERNEL_MATERN12,
                                               GP_KERNEL_MATERN32, GP_KERNEL_MATERN52};

static const gp_option_spec msrfr_options[] = {
    {"particles", GP_OPTION_INT, 10, NULL, 1, 200, NULL,
     "M, the number of particles (mixture components), each a whole R x d frequency matrix"},
    {"features", GP_OPTION_INT, 100, NULL, 1, 20000, NULL,
     "R, frequencies per particle; each gives a cos and a sin feature"},
    {"iterations", GP_OPTION_INT, 1000, NULL, 0, 1000000, NULL, "T, SVGD iterations"},
    {"step", GP_OPTION_NUMBER, 0.2, NULL, 1e-8, 10, NULL,
     "learning rate of the Adam step on the SVGD direction"},
    {"lengthscale_step", GP_OPTION_NUMBER, 0.1, NULL, 1e-8, 10, NULL,
     "Adam learning rate of the shared log lengthscales"},
    {"noise_step", GP_OPTION_NUMBER, 0.05, NULL, 1e-8, 10, NULL,
     "Adam learning rate of the log noise variance when it is learned"},
    {"repulsion", GP_OPTION_NUMBER, 0, NULL, 0, 100, NULL,
     "alpha, the weight of the SVGD repulsion between particles (0: none)"},
    {"anneal_power", GP_OPTION_NUMBER, 0.5, NULL, 0, 10, NULL,
     "s of the cyclic annealing of the attraction, ((t mod T/c) / (T/c))^s; 0: none"},
    {"anneal_cycles", GP_OPTION_INT, 5, NULL, 1, 1000, NULL, "c, annealing cycles"},
    {"prior_std", GP_OPTION_NUMBER, 3, NULL, 1e-6, 1e6, NULL,
     "tau, the standard deviation of the N(0, tau^2) prior on every frequency entry"},
    {"likelihood_weight", GP_OPTION_ENUM, 0, "1/M", 0, 0, "1/M|1",
     "weight of each particle's log likelihood in its score: 1/M (the authors' code) or 1 "
     "(the paper)"},
    {"learn_lengthscales", GP_OPTION_BOOL, 1, NULL, 0, 1, NULL,
     "learn the shared ARD lengthscales by Adam ascent on the mean particle LML"},
    {"lengthscale_init", GP_OPTION_ENUM, 0, "median", 0, 0, "median|kernel",
     "start the lengthscales at the median squared pair difference of each input (the "
     "authors' init) or at the kernel's given lengthscales"},
    {"init", GP_OPTION_ENUM, 0, "qmc", 0, 0, "qmc|mc",
     "initial frequencies of each particle: scrambled Halton (qmc) or Monte Carlo draws "
     "of the kernel's spectral density"},
    {"bandwidth", GP_OPTION_ENUM, 0, "per_dim", 0, 0, "per_dim|total|none",
     "SVGD kernel between pooled frequencies: per-dimension median bandwidth (the authors'), "
     "one median over total distances, or none (identity: M independent SSGPs)"},
    {"calibrate", GP_OPTION_BOOL, 0, NULL, 0, 1, NULL,
     "hold out calibration_fraction of the rows, fit, choose the variance scale that "
     "minimises the held-out NLPD, then refit on all rows with that scale"},
    {"calibration_fraction", GP_OPTION_NUMBER, 0.2, NULL, 0.05, 0.5, NULL,
     "share of the training rows calibrate holds out"},
};

static const gp_method_ops msrfr_ops = {
    .fit = msrfr_fit,
    .predict = msrfr_predict,
    .sample = msrfr_sample,
    .export_impl = msrfr_export,
    .import_impl = msrfr_import,
    .free_impl = msrfr_impl_free,
    .components = msrfr_components,
    .batch_invariant = 1, /* predict: per-point arithmetic (gp_rff_features_columns) */
    .batch_shares_work = 1, /* a batch passes over every particle's weights once */
};

static const gp_info_spec msrfr_info[] = {
    {"particles", GP_INFO_NUMBER,
     "M, the number of particles (mixture components)"},
    {"features", GP_INFO_NUMBER,
     "R, frequencies per particle"},
    {"bandwidth", GP_INFO_STRING,
     "the SVGD bandwidth rule (per_dim, total or none)"},
    {"final_bandwidth_mean", GP_INFO_NUMBER,
     "mean SVGD bandwidth at the last iteration (absent with bandwidth none)"},
    {"lml_sd_components", GP_INFO_NUMBER,
     "standard deviation of the component LMLs at the end"},
    {"likelihood_weight", GP_INFO_STRING,
     "the weight c of the LML in each particle's posterior (\"1\" or \"1/M\")"},
    {"noise", GP_INFO_STRING,
     "\"learned\" or \"fixed\""},
    {"variance_scale", GP_INFO_NUMBER,
     "factor on the predictive variances (1 unless calibrate)"},
};

static const gp_option_setting msrfr_quick[] = {
    {"iterations", 8}, {"particles", 3}, {"features", 10}};

const gp_method gp_method_msrfr = {
    .name = "msrfr",
    .summary = "Mixture Stein random feature regression: a posterior over spectral measures "
               "held as M particles (each a whole frequency matrix and its sparse-spectrum GP) "
               "moved by SVGD; predicts with the equally weighted mixture",
    .objective_name = "mean_component_log_marginal_likelihood",
    .options = msrfr_options,
    .n_options = sizeof msrfr_options / sizeof msrfr_options[0],
    .kernels = msrfr_kernels,
    .n_kernels = sizeof msrfr_kernels / sizeof msrfr_kernels[0],
    .composite_kernels = 0,
    .iterations_option = "iterations",
    .restarts_option = NULL,
    .info = msrfr_info,
    .n_info = sizeof msrfr_info / sizeof msrfr_info[0],
    .mean_functions = 1, /* least-squares start, learned on in the SVGD run: fit.c */
    .quick = msrfr_quick,
    .n_quick = sizeof msrfr_quick / sizeof msrfr_quick[0],
    .hyper_priors = 1,
    .ops = &msrfr_ops,
};
