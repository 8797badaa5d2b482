/* gpserve core: minibatch training of a coregionalised svgp (what svgp's
 * own `optimizer: adam` does, core/methods/svgp/train.c): epochs of seeded
 * shuffles of the rows; per minibatch of rows (every observed entry of
 * them, the expected log-likelihood weighted n / rows), one
 * natural-gradient step on the joint q(u) (gp_coreg_svgp_natgrad) and one
 * Adam step on the shared parameters' packing and, with optimize_inducing,
 * Z. Memory: the minibatch's entries times K, never all M of them. */
#ifndef GP_COREG_SPARSE_TRAIN_H
#define GP_COREG_SPARSE_TRAIN_H

#include "core/coreg/sparse_impl.h"
#include "core/model/method.h"

typedef struct gp_coreg_adam_settings {
    size_t batch;        /* rows per minibatch */
    int epochs;
    double lr, natgrad_step;
    int budget;          /* the progress scale epochs are reported on */
    double offset;       /* working -> original units of the ELBO */
    int optimize_z;
} gp_coreg_adam_settings;

/* Train im's parameters (and Z) and q = N(mq, Lq Lq^T) (K, K x K; updated in
 * place) on data, whose entries are in row order (gp_coreg_entries_build).
 * *elbo receives the last epoch's mean minibatch estimate. req supplies
 * progress, cancellation (GP_ECANCELLED) and the seed. */
int gp_coreg_svgp_train_adam(gp_coreg_sparse_impl *im, const gp_coreg_sparse_data *data,
                             const gp_coreg_adam_settings *st, double *mq, double *Lq,
                             const gp_fit_request *req, gp_diagnostics *diag, double *elbo,
                             gp_error *err);

#endif
