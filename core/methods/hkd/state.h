/* The fitted state of method "hkd": its working kernel and block structure: what
 * core/methods/hkd/state.c shares with the other files of the method. */
#ifndef GP_METHODS_HKD_STATE_H
#define GP_METHODS_HKD_STATE_H

#include "core/methods/hkd/internal.h"

void hkd_impl_free(void *p);

size_t hkd_orbit_points(const hkd_impl *im);

int hkd_working_kernel(const gp_kernel *k, hkd_impl *im, gp_error *err);

void hkd_set_working_params(hkd_impl *im, const double *src, gp_kernel *kin);

void hkd_sync_kernel(const gp_kernel *k, hkd_impl *im);

void hkd_orbit_of(hkd_impl *im);

void hkd_orbit_gram(const hkd_impl *im, double *Koz);

void hkd_index_blocks(hkd_impl *im);

void hkd_choose_blocks(hkd_impl *im, const double *Koz);

#endif
