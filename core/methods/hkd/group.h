/* gpserve core: the finite symmetry groups of harmonic kernel decomposition
 * (docs/methods/harmonic-kernel-decomposition.md §1, §5; method hkd).
 *
 * A symmetry is a list of commuting generators, each cyclic:
 *   negate      x_S -> -x_S for a subset S of inputs                 order 2
 *   negate_pca  J ways: the PCA directions split into J subsets        2 each
 *               (subset j = directions j, j+J, ... by descending variance)
 *   translate   a periodic input x_i -> x_i + period / order          order
 *               (the input is embedded on a circle, so the translation
 *               is a rotation of that circle: note §5 table)
 *   rotate2d    the plane (i, j) by 2 pi / order                       order
 *   cycle_dims  a cyclic shift of a list of inputs by `shift`           L / gcd(L, shift)
 * The group is their product; it acts on the working coordinates w
 * (gp_hkd_frame) by orthogonal linear maps, so every element is an
 * isometry and a stationary kernel that is invariant under the generators is
 * invariant under the group.
 *
 * Elements s = 0 .. size-1 are mixed-radix over the axes (axis 0 fastest);
 * the real blocks t = 0 .. blocks-1 likewise over the per-axis real
 * frequencies r_j = 0 .. order_j / 2 (per-axis real resolution, note §1
 * "Multi-way transformations", pitfall 3), with weights
 *   W[t, s] = prod_j w_{r_j}(s_j),  w_0 = 1/T,  w_r = 2 cos(2 pi r s / T) / T
 *   (0 < r < T/2),  w_{T/2} = (-1)^s / T
 * so that k_t(x, x') = sum_s W[t, s] k(x, G^s x') and sum_t W[t, s] = [s = 0]. */
#ifndef GP_METHODS_HKD_GROUP_H
#define GP_METHODS_HKD_GROUP_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/error.h"
#include "core/base/value.h"
#include "core/kernel/kernel.h"

#define GP_SYM_MAX_GENERATORS 8
#define GP_SYM_MAX_DIMS 64  /* inputs a symmetry can name (and hkd's input limit) */
#define GP_SYM_MAX_AXES 16
#define GP_SYM_MAX_SIZE 256 /* group elements */
#define GP_SYM_MAX_ORDER 64

typedef enum gp_sym_type {
    GP_SYM_NEGATE = 0,
    GP_SYM_NEGATE_PCA,
    GP_SYM_TRANSLATE,
    GP_SYM_ROTATE2D,
    GP_SYM_CYCLE_DIMS,
    GP_SYM_TYPE_COUNT
} gp_sym_type;

typedef struct gp_sym_generator {
    gp_sym_type type;
    size_t n_dims;
    size_t dims[GP_SYM_MAX_DIMS]; /* negate: S; translate: 1; rotate2d: 2; cycle_dims: L */
    size_t ways;                  /* negate_pca */
    size_t order;                 /* translate, rotate2d (cycle_dims: derived) */
    size_t shift;                 /* cycle_dims */
    double period;                /* translate */
} gp_sym_generator;

typedef struct gp_symmetry {
    size_t n_gen;
    gp_sym_generator gen[GP_SYM_MAX_GENERATORS];
    int validate;       /* check the symmetry numerically at fit time (default 1) */
    int center_origin;  /* "center": "origin": the group acts about 0 in the caller's units,
                           not about the training mean (the default, as the paper centres) */
    int per_block;      /* "share_inducing": false: every block optimises its own Z (a fit
                           option, not part of the symmetry's code: the stored blocks say it) */
} gp_symmetry;

/* The symmetry of a request's option value v (NULL: negate every input, the
 * default), for d inputs (0: not known yet, so dimension indices are not
 * checked against it). Errors are GP_EINVAL naming the member under field
 * (e.g. "options.symmetry.generators[1].dims"). */
int gp_symmetry_parse(const gp_value *v, size_t d, const char *field, gp_symmetry *out,
                      gp_error *err);
/* "share_inducing": false needs the inducing inputs optimised, which hkd
 * cannot do through a translated (circle-embedded) input: GP_EUNSUPPORTED
 * naming <field>.share_inducing then. */
int gp_symmetry_check_per_block(const gp_symmetry *s, const char *field, gp_error *err);
/* The group's size and its number of real blocks, from the generators alone. */
void gp_symmetry_counts(const gp_symmetry *s, size_t *size, size_t *blocks);
/* Flat encoding for a model's state, and back (GP_EDATA when malformed). */
size_t gp_symmetry_encode(const gp_symmetry *s, double *out); /* out NULL: length */
int gp_symmetry_decode(const double *code, size_t len, size_t d, gp_symmetry *out,
                       gp_error *err);
const char *gp_sym_type_name(gp_sym_type t);
/* "generator 1 (rotate2d on inputs 0, 1)" into buf. */
void gp_sym_describe(const gp_symmetry *s, size_t g, char *buf, size_t len);

/* ---- working coordinates ----
 * w = U^T x (x standardised; U the PCA basis with negate_pca, else the
 * identity), then each translated input i replaced by radius * cos(omega x_i)
 * and radius * sin(omega x_i) appended at d + k (the k-th translate). */
typedef struct gp_hkd_frame {
    size_t d, dw;
    double *U;           /* d x d, NULL for the identity (owned) */
    size_t n_trans;
    size_t trans_dim[GP_SYM_MAX_GENERATORS];
    double trans_omega[GP_SYM_MAX_GENERATORS], trans_radius[GP_SYM_MAX_GENERATORS];
} gp_hkd_frame;

void gp_hkd_frame_free(gp_hkd_frame *f);
/* W (dw x n, point-major) of the standardised points X (d x n, point-major). */
void gp_hkd_frame_apply(const gp_hkd_frame *f, const double *X, size_t n, double *W);

/* ---- the group acting on working coordinates ---- */
typedef enum gp_axis_kind { GP_AXIS_FLIP = 0, GP_AXIS_ROTATE, GP_AXIS_CYCLE } gp_axis_kind;

typedef struct gp_group_axis {
    gp_axis_kind kind;
    size_t order;
    size_t gen; /* the generator it comes from */
    size_t n_dims;
    size_t dims[GP_SYM_MAX_DIMS]; /* working coordinates it moves */
    size_t shift;                 /* CYCLE */
} gp_group_axis;

typedef struct gp_group {
    size_t n_axes;
    gp_group_axis axis[GP_SYM_MAX_AXES];
    size_t size;   /* group elements T~ */
    size_t blocks; /* real blocks T */
    size_t dw;
    double *W;     /* blocks x size, column-major: W[t + s blocks] (owned) */
} gp_group;

/* The axes of symmetry s in the working coordinates of frame f, and the weights. */
int gp_group_build(const gp_symmetry *s, const gp_hkd_frame *f, gp_group *g, gp_error *err);
void gp_group_free(gp_group *g);
/* out (dw) = G^s x; out must not alias x. */
void gp_group_apply(const gp_group *g, size_t s, const double *x, double *out);
/* out = (G^s)^T v = G^{-s} v (every element is orthogonal): how a gradient
 * with respect to G^s z becomes one with respect to z. */
void gp_group_apply_transpose(const gp_group *g, size_t s, const double *v, double *out);
/* One axis applied `power` times. */
void gp_group_axis_apply(const gp_group_axis *a, size_t power, const double *x, size_t dw,
                         double *out);
/* The per-axis real frequencies of block t into r (n_axes). */
void gp_group_block_freqs(const gp_group *g, size_t t, size_t *r);
/* A name for block t: "symmetric"/"antisymmetric" for one order-2 axis, else
 * "r=(r_0,r_1,...)". */
void gp_group_block_name(const gp_group *g, size_t t, char *buf, size_t len);
/* The orbit representative of x that maximises <c, G^s x> for a fixed
 * generic c: a fundamental domain (the data folded before k-means, note §5
 * step 3). */
void gp_group_fold(const gp_group *g, const double *x, double *out, double *scratch);

/* The checks of note §5 on about 200 random pairs of the points P (dw x n,
 * working coordinates): cyclicity, commutation, kernel invariance and
 * sum_t k_t = k, each to 1e-9 relative, for every kernel given (the caller
 * passes the kernel as it starts and the same family with perturbed
 * lengthscales, because the fit moves them: ARD lengthscales that start equal
 * still break a rotation once they move). On failure GP_EUNSUPPORTED naming
 * the generator ("<field>.generators[i]") and the check. */
int gp_group_validate(const gp_group *g, const gp_symmetry *s, const gp_kernel *const *kernels,
                      size_t n_kernels, const double *P, size_t n, uint64_t seed,
                      const char *field, gp_error *err);

#endif
