/* The fitted state of method "hkd": its working kernel and block structure. */
#include "core/methods/hkd/state.h"

#include <stdlib.h>

#include "core/methods/hkd/internal.h"

void hkd_impl_free(void *p)
{
    hkd_impl *im = p;
    if (im == NULL)
        return;
    gp_hkd_frame_free(&im->frame);
    gp_group_free(&im->group);
    gp_kernel_free(im->kin);
    free(im->pmap);
    free(im->Z);
    free(im->O);
    free(im->mt);
    free(im->off);
    free(im->idx);
    free(im->L);
    free(im->Mb);
    free(im->mean);
    free(im->jitter);
    gp_kernel_points_free(im->Op);
    free(im);
}

size_t hkd_orbit_points(const hkd_impl *im)
{
    return im->m * im->group.size;
}

/* ---- the working kernel ---- */

/* kin: the model kernel's type on dw inputs; with ARD the translated input's
 * lengthscale serves both coordinates of its circle. */
int hkd_working_kernel(const gp_kernel *k, hkd_impl *im, gp_error *err)
{
    const gp_hkd_frame *f = &im->frame;
    int rc = gp_kernel_leaf(&im->kin, k->type, f->dw, k->ard, NULL, 0, err);
    if (rc)
        return rc;
    size_t np = gp_kernel_n_params(im->kin);
    if ((im->pmap = calloc(np, sizeof *im->pmap)) == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    for (size_t p = 0; p < np; p++)
        im->pmap[p] = p < gp_kernel_n_params(k) ? p : 0;
    for (size_t q = 0; k->ard && q < f->n_trans; q++)
        im->pmap[1 + f->d + q] = 1 + f->trans_dim[q];
    return GP_OK;
}

/* kin's parameters from the model kernel's parameter vector src. */
void hkd_set_working_params(hkd_impl *im, const double *src, gp_kernel *kin)
{
    double theta[1 + GP_SYM_MAX_DIMS + GP_SYM_MAX_GENERATORS];
    size_t np = gp_kernel_n_params(kin);
    for (size_t p = 0; p < np; p++)
        theta[p] = src[im->pmap[p]];
    gp_kernel_set_params(kin, theta);
}

void hkd_sync_kernel(const gp_kernel *k, hkd_impl *im)
{
    double src[1 + GP_SYM_MAX_DIMS];
    gp_kernel_get_params(k, src);
    hkd_set_working_params(im, src, im->kin);
}

/* ---- block structure ---- */

void hkd_orbit_of(hkd_impl *im)
{
    size_t S = im->group.size, dw = im->frame.dw;
    for (size_t i = 0; i < im->m; i++)
        for (size_t s = 0; s < S; s++)
            gp_group_apply(&im->group, s, im->Z + i * dw, im->O + (i * S + s) * dw);
}

/* k(O_o, z_a) into Koz (mS x m). */
void hkd_orbit_gram(const hkd_impl *im, double *Koz)
{
    gp_kernel_cross(im->kin, im->O, hkd_orbit_points(im), im->Z, im->m, Koz, hkd_orbit_points(im));
}

/* The first stacked row of every block, and P. */
void hkd_index_blocks(hkd_impl *im)
{
    size_t T = im->group.blocks, P = 0;
    for (size_t t = 0; t < T; t++) {
        im->off[t] = P;
        P += im->mt[t];
    }
    im->P = P;
}

/* Block t keeps z_i while k_t(z_i, z_i) >= GP_HKD_DROP sigma_f^2, from all
 * of Z when the blocks share it, else from its own mb points. */
void hkd_choose_blocks(hkd_impl *im, const double *Koz)
{
    size_t T = im->group.blocks, S = im->group.size, mb = im->mb, mS = hkd_orbit_points(im);
    double var = gp_kernel_diag(im->kin, im->Z);
    for (size_t t = 0; t < T; t++) {
        size_t n = 0, first = im->mb < im->m ? t * mb : 0;
        for (size_t i = first; i < first + mb; i++) {
            double kt = 0.0;
            for (size_t s = 0; s < S; s++)
                kt += im->group.W[t + s * T] * Koz[i * S + s + i * mS];
            if (kt >= GP_HKD_DROP * var)
                im->idx[t * mb + n++] = i;
        }
        im->mt[t] = n;
    }
    hkd_index_blocks(im);
}
