/* The mean network of method "gwi" (mean = mlp): D -> h -> h -> 1 with tanh, forward and backward:
 * what core/methods/gwi/network.c shares with the other files of the method. */
#ifndef GP_METHODS_GWI_NETWORK_H
#define GP_METHODS_GWI_NETWORK_H

#include "core/methods/gwi/internal.h"

mlp_view gwi_mlp_at(const double *p, size_t d, size_t h);

void gwi_mlp_forward(const double *p, size_t d, size_t h, const double *X, size_t n,
                     double *H1, double *H2, double *f);

/* The same forward pass a point at a time (predict): every product by
 * gp_dot_columns, so f[j] does not depend on the other columns of X; WT is
 * h max(d, h) doubles of scratch (the layers' weights transposed). */
void gwi_mlp_forward_points(const double *p, size_t d, size_t h, const double *X, size_t n,
                            double *WT, double *H1, double *H2, double *f);

void gwi_mlp_backward(const double *p, size_t d, size_t h, const double *X, size_t n,
                      const double *H1, const double *H2, const double *g, double *G1,
                      double *G2, double *gp);

#endif
