/* The uncollapsed sparse variational GP (method "svgp", core/methods/svgp/svgp.h): its options and
 * descriptor. */
#include "core/methods/svgp/svgp.h"

#include "core/coreg/params.h"
#include "core/coreg/sparse_fit.h"
#include "core/coreg/sparse_predict.h"
#include "core/methods/svgp/classes.h"
#include "core/methods/svgp/fit.h"
#include "core/methods/svgp/internal.h"
#include "core/methods/svgp/rows.h"

/* ---- the method ---- */

static const gp_kernel_type svgp_kernels[] = {GP_KERNEL_RBF, GP_KERNEL_MATERN12,
                                              GP_KERNEL_MATERN32, GP_KERNEL_MATERN52,
                                              GP_KERNEL_RQ};

static const gp_likelihood svgp_likelihoods[] = {GP_LIK_GAUSSIAN, GP_LIK_BERNOULLI,
                                                 GP_LIK_POISSON, GP_LIK_SOFTMAX};

static const gp_option_spec svgp_options[] = {
    {"inducing", GP_OPTION_INT, 100, NULL, 1, 8192, NULL,
     "M, the number of inducing points (at most the number of training points)"},
    {"inducing_selection", GP_OPTION_ENUM, 0, "greedy", 0, 0, "greedy|kmeans|random",
     "greedy: maximum residual variance under the initial kernel (deterministic); kmeans: "
     "k-means centres; random: distinct training inputs (both seeded)"},
    {"optimize_inducing", GP_OPTION_BOOL, 0, NULL, 0, 1, NULL,
     "also optimise the inducing inputs Z (off by default: on the shared classification sets "
     "it changed the test log loss by < 0.01 and made L-BFGS 5-10 times slower)"},
    {"optimizer", GP_OPTION_ENUM, 0, "auto", 0, 0, "auto|lbfgs|adam",
     "lbfgs: full-batch L-BFGS over the kernel, noise, Z and q; adam: minibatch Adam on the "
     "kernel, noise and Z with natural-gradient steps on q; auto: lbfgs when its N x M "
     "workspace fits the budget of an exact fit of max_train_points points, else adam; a fit "
     "over a data set trains with adam (lbfgs is refused there)"},
    {"max_iterations", GP_OPTION_INT, 200, NULL, 1, 100000, NULL,
     "L-BFGS iterations; with adam the progress budget the epochs are reported against"},
    {"tolerance", GP_OPTION_NUMBER, 1e-7, NULL, 1e-16, 1, NULL,
     "L-BFGS: stop when the relative change of the ELBO in an iteration falls below this"},
    {"quadrature_points", GP_OPTION_INT, GP_LIK_QUADRATURE_POINTS, NULL, 1,
     GP_LIK_QUADRATURE_MAX, NULL,
     "Gauss-Hermite points of the expected log-likelihood (bernoulli; gaussian and poisson "
     "are in closed form)"},
    {"batch_size", GP_OPTION_INT, 256, NULL, 1, 1000000, NULL,
     "adam: points per minibatch (over a data set: a few blocks of at most 256 consecutive "
     "rows at seeded offsets, docs/design/scale-out.md)"},
    {"epochs", GP_OPTION_INT, 20, NULL, 1, 100000, NULL, "adam: passes over the data"},
    {"learning_rate", GP_OPTION_NUMBER, 0.01, NULL, 1e-6, 1, NULL,
     "adam: step size on the kernel log-parameters, log noise and Z"},
    {"natgrad_step", GP_OPTION_NUMBER, 0.1, NULL, 1e-4, 1, NULL,
     "adam: natural-gradient step on q (1 with the full batch and a gaussian likelihood is "
     "the exact optimum)"},
    {"coregionalization", GP_OPTION_OBJECT, 0, NULL, 0, 0, gp_coreg_option_schema,
     gp_coreg_option_help},
};

/* A fit over rows read in chunks is rows.c's; a coregionalised fit is
 * core/coreg's (sparse_fit.h). */
static int svgp_fit_any(const gp_method *m, const gp_fit_request *req, gp_model **out,
                        gp_error *err)
{
    if (req->rows)
        return svgp_rows_fit_op(m, req, out, err);
    if (gp_fit_coregionalised(m, req))
        return gp_coreg_sparse_fit(m, req, GP_COREG_SPARSE_SVGP, out, err);
    return svgp_fit_op(m, req, out, err);
}

/* The impl is the inducing posterior (a softmax model's holds its C classes
 * as latents, which its predict answers together: classes.h) or a
 * coregionalised model's. */
static int svgp_sample(const gp_model *model, const gp_sample_request *req, double *samples,
                       gp_error *err)
{
    if (model->likelihood == GP_LIK_SOFTMAX)
        return svgp_classes_sample(model, req, samples, err);
    return gp_coreg_inducing_sample(model, req, samples, err);
}

static int svgp_export(const gp_model *model, gp_state *st, gp_error *err)
{
    if (model->likelihood == GP_LIK_SOFTMAX)
        return svgp_classes_export(model, st, err);
    return gp_coreg_inducing_export(model, st, err);
}

static int svgp_import(gp_model *model, const gp_state *st, gp_error *err)
{
    if (model->likelihood == GP_LIK_SOFTMAX)
        return svgp_classes_import(model, st, err);
    return gp_coreg_inducing_import(model, st, err);
}

static const gp_method_ops svgp_ops = {
    .fit = svgp_fit_any,
    .predict = gp_coreg_inducing_predict,
    .batch_invariant = 1, /* core/inducing's and core/coreg's predict: per-point arithmetic */
    .sample = svgp_sample,
    .export_impl = svgp_export,
    .import_impl = svgp_import,
    .free_impl = gp_coreg_inducing_free,
    .check_option = gp_coreg_check_option,
};

static const gp_info_spec svgp_info[] = {
    {"inducing", GP_INFO_NUMBER, "M, the number of inducing points"},
    {"inducing_selection", GP_INFO_STRING, "how Z was chosen (greedy, kmeans or random)"},
    {"optimize_inducing", GP_INFO_NUMBER, "1 when Z moved with the hyperparameters"},
    {"optimizer", GP_INFO_STRING,
     "the optimiser used: lbfgs (full batch) or adam (minibatches, natural gradients on q)"},
    {"expected_log_lik", GP_INFO_NUMBER,
     "sum over the training points of E_q log p(y | f) at the end (original units)"},
    {"kl", GP_INFO_NUMBER, "KL(q(u) || p(u)) at the end; the objective is expected_log_lik - kl"},
    {"quadrature_points", GP_INFO_NUMBER,
     "Gauss-Hermite points of the expected log-likelihood (bernoulli)"},
    {"lengthscale_rescaled", GP_INFO_NUMBER,
     "the factor the initial lengthscales were multiplied by because k(x, x') was near 0 "
     "for most pairs of training points (the median heuristic; absent: kept as given)"},
    {"epochs", GP_INFO_NUMBER, "adam: passes over the data"},
    {"batch_size", GP_INFO_NUMBER, "adam: points per minibatch"},
};

static const gp_option_setting svgp_quick[] = {{"max_iterations", 8}, {"inducing", 8}};

const gp_method gp_method_svgp = {
    .name = "svgp",
    .summary = "Uncollapsed sparse variational GP with M inducing points and a full-covariance "
               "whitened q(u) (Hensman et al.; GPflow's SVGP): gaussian, bernoulli, poisson or "
               "softmax likelihood (softmax: one latent GP per class sharing the kernel and the "
               "inducing points, labels 0..C-1, C <= 64); full-batch L-BFGS with analytic gradients, or minibatch Adam with "
               "natural-gradient steps on q(u) for large N. O(N M^2) per pass, O(M^2) per "
               "predicted point. A bernoulli or poisson fit with ARD lengthscales uses the "
               "default priors unless the kernel states its own (\"priors\": \"none\" for "
               "none)",
    .objective_name = "elbo",
    .options = svgp_options,
    .n_options = sizeof svgp_options / sizeof svgp_options[0],
    .kernels = svgp_kernels,
    .n_kernels = sizeof svgp_kernels / sizeof svgp_kernels[0],
    .composite_kernels = 0,
    .iterations_option = "max_iterations",
    .restarts_option = NULL,
    .likelihoods = svgp_likelihoods,
    .n_likelihoods = sizeof svgp_likelihoods / sizeof svgp_likelihoods[0],
    .info = svgp_info,
    .n_info = sizeof svgp_info / sizeof svgp_info[0],
    .quick = svgp_quick,
    .n_quick = sizeof svgp_quick / sizeof svgp_quick[0],
    .hyper_priors = 1,
    .per_point_noise = 1,
    .mean_functions = 1, /* a latent mean, its coefficients optimised with the ELBO: train.c */
    .coregionalization = 1, /* gaussian only: core/coreg/sparse_fit.h */
    .streams_rows = 1,      /* minibatches of rows read in chunks: rows.h */
    .ops = &svgp_ops,
};
