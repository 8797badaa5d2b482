/* The "coregionalization" block of a coregionalised model's JSON
 * (docs/design/multioutput.md): what the fit learned of how the outputs
 * move together, from gp_model.coreg. */
#include <math.h>
#include <stdlib.h>

#include "api/internal.h"

/* A p x p matrix (column-major; symmetric here) as p rows. */
static json_t *matrix_json(const double *M, size_t p)
{
    json_t *rows = json_array();
    for (size_t i = 0; i < p; i++) {
        json_t *r = json_array();
        for (size_t j = 0; j < p; j++)
            json_array_append_new(r, gp_json_real(M[j * p + i]));
        json_array_append_new(rows, r);
    }
    return rows;
}

/* B_q = W_q W_q^T + diag(kappa_q), working units, into B (p x p). */
static void coreg_matrix(const gp_coreg_view *c, size_t q, double *B)
{
    const double *W = c->W + q * c->p * c->rank, *kappa = c->kappa + q * c->p;
    for (size_t i = 0; i < c->p; i++)
        for (size_t j = 0; j < c->p; j++) {
            double s = i == j && kappa ? kappa[i] : 0.0;
            for (size_t r = 0; r < c->rank; r++)
                s += W[r * c->p + i] * W[r * c->p + j];
            B[j * c->p + i] = s;
        }
}

/* One latent: its kernel, W_q (p rows of rank), kappa_q and B_q. */
static json_t *latent_json(const gp_coreg_view *c, size_t q, double *B)
{
    json_t *o = json_object(), *W = json_array(), *kappa = json_array();
    const double *Wq = c->W + q * c->p * c->rank;
    for (size_t i = 0; i < c->p; i++) {
        json_t *r = json_array();
        for (size_t k = 0; k < c->rank; k++)
            json_array_append_new(r, gp_json_real(Wq[k * c->p + i]));
        json_array_append_new(W, r);
        json_array_append_new(kappa, gp_json_real(c->kappa ? c->kappa[q * c->p + i] : 0.0));
    }
    coreg_matrix(c, q, B);
    json_object_set_new(o, "kernel", gp_kernel_to_json(c->kernels[q]));
    json_object_set_new(o, "W", W);
    json_object_set_new(o, "kappa", kappa);
    json_object_set_new(o, "B", matrix_json(B, c->p));
    return o;
}

json_t *gp_api_coreg_json(const gp_model *m)
{
    const gp_coreg_view *c = &m->coreg;
    size_t p = c->p;
    double *B = malloc(2 * p * p * sizeof *B);
    json_t *o = json_object(), *latents = json_array();
    if (B == NULL || o == NULL || latents == NULL) {
        free(B);
        json_decref(o);
        json_decref(latents);
        return NULL;
    }
    double *S = B + p * p; /* sum of the B_q: the outputs' covariance at distance 0 */
    for (size_t k = 0; k < p * p; k++)
        S[k] = 0.0;
    for (size_t q = 0; q < c->q; q++) {
        json_array_append_new(latents, latent_json(c, q, B));
        for (size_t k = 0; k < p * p; k++)
            S[k] += B[k];
    }
    /* the correlation is the same in working and original units */
    for (size_t i = 0; i < p; i++)
        for (size_t j = 0; j < p; j++)
            if (i != j)
                S[j * p + i] /= sqrt(S[i * p + i] * S[j * p + j]);
    for (size_t i = 0; i < p; i++)
        S[i * p + i] = S[i * p + i] > 0.0 ? 1.0 : NAN;
    json_t *noise = json_array(), *ym = json_array(), *ys = json_array();
    for (size_t j = 0; j < p; j++) {
        json_array_append_new(noise, gp_json_real(c->noise[j] * c->y_scale[j] * c->y_scale[j]));
        json_array_append_new(ym, gp_json_real(c->y_mean[j]));
        json_array_append_new(ys, gp_json_real(c->y_scale[j]));
    }
    json_object_set_new(o, "type", json_string(c->type == GP_COREG_ICM ? "icm" : "lmc"));
    json_object_set_new(o, "outputs", json_integer((json_int_t)p));
    json_object_set_new(o, "rank", json_integer((json_int_t)c->rank));
    json_object_set_new(o, "latents", json_integer((json_int_t)c->q));
    json_object_set_new(o, "latent", latents);
    json_object_set_new(o, "output_correlation", matrix_json(S, p));
    json_object_set_new(o, "noise_variance_original", noise);
    json_object_set_new(o, "y_mean", ym);
    json_object_set_new(o, "y_scale", ys);
    json_object_set_new(o, "n_observed", json_integer((json_int_t)c->n_observed));
    json_object_set_new(o, "kronecker", json_boolean(c->kronecker));
    free(B);
    return o;
}
