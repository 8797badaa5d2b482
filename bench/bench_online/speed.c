/* bench_online part 3 "speed" (main.c's comment): observe and predict times of
 * rfgp against the note's Sherman-Morrison update, in process. */

#include "bench/bench_online/online.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/support/clock.h"
#include "bench/support/kjit_ep.h"
#include "core/base/error.h"
#include "core/base/rng.h"

#define SPEED_D 800
#define SPEED_POINT_DIM 4
#define SPEED_D_IN 400
#define SPEED_WARMUP_ROWS 1000
#define SPEED_PEER_ROWS 2000
#define SPEED_BIG_BATCH 400 /* above rfgp's refactor_batch auto (D / 3 at D = 800) */
#define PREDICT_CALLS 10000
#define TARGET_OBSERVE_US 50.0

/* ---- part 3: speed ---- */

/* The peer: the note's update (§2, the kernel-ep operator's): features psi,
 * Sherman-Morrison on Sigma (D x D, the upper triangle), then mu = Sigma b /
 * sigma^2 per output. Features: one layer of random Fourier features for
 * points (rbf, unit widths), or KJIT's two stages for messages (the inner
 * layer in closed form for Gaussian moments, §3). */
typedef struct sm_peer {
    size_t D, Din, width, p;
    int messages;
    double *W, *bias;     /* points: D x width; messages: Din x 2 (per message dim) */
    double *Wout, *bout;  /* messages: Din x D, D */
    double *Sigma, *bvec, *mu; /* D x D, D x p, D x p */
    double *psi, *u, *inner;
} sm_peer;

static void sm_free(sm_peer *s)
{
    free(s->W);
    free(s->bias);
    free(s->Wout);
    free(s->bout);
    free(s->Sigma);
    free(s->bvec);
    free(s->mu);
    free(s->psi);
    free(s->u);
    free(s->inner);
    memset(s, 0, sizeof *s);
}

static int sm_init(sm_peer *s, size_t D, size_t Din, size_t width, size_t p, int messages)
{
    memset(s, 0, sizeof *s);
    s->D = D;
    s->Din = Din;
    s->width = width;
    s->p = p;
    s->messages = messages;
    size_t wrows = messages ? Din : D, wcols = messages ? width / 2 : width;
    s->W = malloc(wrows * wcols * sizeof *s->W);
    s->bias = malloc(wrows * sizeof *s->bias);
    s->Sigma = calloc(D * D, sizeof *s->Sigma);
    s->bvec = calloc(D * p, sizeof *s->bvec);
    s->mu = calloc(D * p, sizeof *s->mu);
    s->psi = malloc(D * sizeof *s->psi);
    s->u = malloc(D * sizeof *s->u);
    s->inner = malloc((Din ? Din : 1) * sizeof *s->inner);
    if (messages) {
        s->Wout = malloc(Din * D * sizeof *s->Wout);
        s->bout = malloc(D * sizeof *s->bout);
    }
    if (!s->W || !s->bias || !s->Sigma || !s->bvec || !s->mu || !s->psi || !s->u || !s->inner ||
        (messages && (!s->Wout || !s->bout))) {
        sm_free(s);
        return -1;
    }
    gp_rng r;
    gp_rng_seed(&r, 7);
    gp_rng_normal_fill(&r, s->W, wrows * wcols);
    for (size_t i = 0; i < wrows; i++)
        s->bias[i] = 2 * 3.14159265358979323846 * gp_rng_uniform(&r);
    if (messages) {
        gp_rng_normal_fill(&r, s->Wout, Din * D);
        for (size_t i = 0; i < D; i++)
            s->bout[i] = 2 * 3.14159265358979323846 * gp_rng_uniform(&r);
    }
    for (size_t i = 0; i < D; i++)
        s->Sigma[i * D + i] = PRIOR_VAR;
    return 0;
}

/* psi(x) for one encoded row x (row-major here). */
static void sm_features(sm_peer *s, const double *x)
{
    size_t D = s->D;
    if (!s->messages) {
        double c = sqrt(2.0 / (double)D);
        for (size_t i = 0; i < D; i++) {
            double t = s->bias[i];
            for (size_t j = 0; j < s->width; j++)
                t += s->W[j * D + i] * x[j];
            s->psi[i] = c * cos(t);
        }
        return;
    }
    /* messages: moment-matched (mean, var) per message; x = (m, v, a, b) */
    size_t c = s->width / 2, Din = s->Din;
    double mean[2], var[2];
    mean[0] = x[0];
    var[0] = x[1];
    double ab = x[2] + x[3];
    mean[1] = x[2] / ab;
    var[1] = x[2] * x[3] / (ab * ab * (ab + 1));
    double ci = sqrt(2.0 / (double)Din);
    for (size_t i = 0; i < Din; i++) {
        double t = s->bias[i], q = 0;
        for (size_t j = 0; j < c; j++) {
            double om = s->W[j * Din + i];
            t += om * mean[j];
            q += om * om * var[j];
        }
        s->inner[i] = ci * cos(t) * exp(-0.5 * q);
    }
    /* outer: cos(Wout^T inner + bout) */
    cblas_dgemv(CblasColMajor, CblasTrans, (int)Din, (int)D, 1.0, s->Wout, (int)Din, s->inner, 1,
                0.0, s->psi, 1);
    double co = sqrt(2.0 / (double)D);
    for (size_t i = 0; i < D; i++)
        s->psi[i] = co * cos(s->psi[i] + s->bout[i]);
}

static void sm_observe(sm_peer *s, const double *x, const double *y)
{
    size_t D = s->D;
    sm_features(s, x);
    cblas_dsymv(CblasColMajor, CblasUpper, (int)D, 1.0, s->Sigma, (int)D, s->psi, 1, 0.0, s->u, 1);
    double den = NOISE + cblas_ddot((int)D, s->psi, 1, s->u, 1);
    cblas_dsyr(CblasColMajor, CblasUpper, (int)D, -1.0 / den, s->u, 1, s->Sigma, (int)D);
    for (size_t j = 0; j < s->p; j++)
        cblas_daxpy((int)D, y[j] / NOISE, s->psi, 1, s->bvec + j * D, 1);
    cblas_dsymm(CblasColMajor, CblasLeft, CblasUpper, (int)D, (int)s->p, 1.0, s->Sigma, (int)D,
                s->bvec, (int)D, 0.0, s->mu, (int)D);
}

static double sm_predict(sm_peer *s, const double *x, double *var)
{
    size_t D = s->D;
    sm_features(s, x);
    cblas_dsymv(CblasColMajor, CblasUpper, (int)D, 1.0, s->Sigma, (int)D, s->psi, 1, 0.0, s->u, 1);
    *var = NOISE + cblas_ddot((int)D, s->psi, 1, s->u, 1);
    return cblas_ddot((int)D, s->psi, 1, s->mu, 1);
}

typedef struct speed_row {
    char what[128];
    double ours_us, peer_us;
    int ok;
    char why[WHY_LEN];
} speed_row;

/* Rows for the speed part: points (d = 4, y = a smooth function + noise) or
 * messages (the EP pairs). Row-major x (count x width), y (count x p). */
typedef struct speed_data {
    size_t count, width, p;
    double *x, *y;
} speed_data;

static int speed_points(size_t count, speed_data *sd)
{
    sd->count = count;
    sd->width = SPEED_POINT_DIM;
    sd->p = 1;
    sd->x = malloc(count * SPEED_POINT_DIM * sizeof *sd->x);
    sd->y = malloc(count * sizeof *sd->y);
    if (sd->x == NULL || sd->y == NULL)
        return -1;
    gp_rng r;
    gp_rng_seed(&r, 11);
    for (size_t i = 0; i < count; i++) {
        double *x = sd->x + i * SPEED_POINT_DIM;
        gp_rng_normal_fill(&r, x, SPEED_POINT_DIM);
        sd->y[i] = sin(2 * x[0]) + 0.5 * x[1] * x[2] - 0.3 * x[3] + 0.01 * gp_rng_normal(&r);
    }
    return 0;
}

static int speed_messages(size_t count, gp_kjit_oracle *oracle, speed_data *sd)
{
    double w[EXP_D];
    gp_kjit_true_w(EXP_D, TRUE_W_SEED, w);
    pairs all;
    memset(&all, 0, sizeof all);
    ep_stats st;
    memset(&st, 0, sizeof st);
    int problems = (int)((count + EXP_N * EXP_SWEEPS - 1) / (EXP_N * EXP_SWEEPS));
    if (run_oracle_ep(w, EXP_D, EXP_N, 1.0, 301, problems, EXP_SWEEPS, oracle, &all, NULL, NULL,
                      &st) != 0 ||
        all.n < count) {
        pairs_free(&all);
        return -1;
    }
    sd->count = count;
    sd->width = IN_COLS;
    sd->p = OUT_COLS;
    sd->x = all.in;
    sd->y = all.out;
    return 0;
}

/* Column-major copy of rows [from, from + k) of sd into X (k x width), Y (k x p). */
static void speed_block(const speed_data *sd, size_t from, size_t k, double *X, double *Y)
{
    for (size_t i = 0; i < k; i++) {
        for (size_t j = 0; j < sd->width; j++)
            X[j * k + i] = sd->x[(from + i) * sd->width + j];
        for (size_t j = 0; j < sd->p; j++)
            Y[j * k + i] = sd->y[(from + i) * sd->p + j];
    }
}

/* The rfgp model for the speed part: D = SPEED_D, fitted on the first
 * SPEED_WARMUP_ROWS rows; refactor_batch > 0 sets that option (else auto). */
static gp_model *speed_model(const speed_data *sd, int messages, double refactor_batch,
                             char *why, size_t len)
{
    size_t n = SPEED_WARMUP_ROWS;
    double *X = malloc(n * sd->width * sizeof *X), *Y = malloc(n * sd->p * sizeof *Y);
    if (X == NULL || Y == NULL) {
        free(X);
        free(Y);
        snprintf(why, len, "out of memory");
        return NULL;
    }
    speed_block(sd, 0, n, X, Y);
    rfgp_spec s = {.messages = messages,
                   .widths = "median",
                   .features = SPEED_D,
                   .inner = SPEED_D_IN,
                   .warmup = -1,
                   .outputs = sd->p,
                   .refactor_batch = refactor_batch};
    gp_model *m = rfgp_fit(&s, X, Y, n, sd->width, why, len);
    free(X);
    free(Y);
    return m;
}

/* Mean us per row of `rows` rows observed in batches of k (rows / k calls). */
static int time_observes(gp_model *model, const speed_data *sd, size_t k, size_t rows,
                         double *us, char *why, size_t len)
{
    size_t from = SPEED_WARMUP_ROWS, calls = rows / k, done = 0;
    double *X = malloc(k * sd->width * sizeof *X), *Y = malloc(k * sd->p * sizeof *Y);
    if (X == NULL || Y == NULL) {
        free(X);
        free(Y);
        snprintf(why, len, "out of memory");
        return -1;
    }
    gp_error err;
    int rc = GP_OK;
    double spent = 0;
    for (size_t c = 0; c < calls && rc == GP_OK; c++) {
        size_t at = from + (done % (sd->count - from));
        if (at + k > sd->count)
            at = from;
        speed_block(sd, at, k, X, Y); /* the copy is not timed */
        double t0 = gp_bench_seconds();
        rc = gp_model_observe(model, X, Y, k, &err);
        spent += gp_bench_seconds() - t0;
        done += k;
    }
    free(X);
    free(Y);
    if (rc != GP_OK) {
        snprintf(why, len, "observe: %s (%s)", gp_status_name(rc), err.message);
        return -1;
    }
    *us = 1e6 * spent / (double)done;
    return 0;
}

static void speed_case(const options *o, const speed_data *sd, int messages, speed_row *rows,
                       size_t *n_rows)
{
    const char *kind = messages ? "messages (m, v, a, b), p = 2" : "points d = 4, p = 1";
    enum { R_B1 = 0, R_B10, R_B100, R_BIG, R_BIG_GIVENS, R_PREDICT1, R_PREDICT1000, N_R };
    speed_row *r = rows + *n_rows;
    *n_rows += N_R;
    memset(r, 0, N_R * sizeof *r);
    snprintf(r[R_B1].what, sizeof r[R_B1].what, "%s: observe 1 row a call", kind);
    snprintf(r[R_B10].what, sizeof r[R_B10].what, "%s: observe 10 rows a call (per row)", kind);
    snprintf(r[R_B100].what, sizeof r[R_B100].what, "%s: observe 100 rows a call (per row)",
             kind);
    snprintf(r[R_BIG].what, sizeof r[R_BIG].what,
             "%s: observe %d rows a call (per row; refactor_batch auto)", kind, SPEED_BIG_BATCH);
    snprintf(r[R_BIG_GIVENS].what, sizeof r[R_BIG_GIVENS].what,
             "%s: observe %d rows a call (per row; rank-one updates only)", kind,
             SPEED_BIG_BATCH);
    snprintf(r[R_PREDICT1].what, sizeof r[R_PREDICT1].what, "%s: predict 1 point a call", kind);
    snprintf(r[R_PREDICT1000].what, sizeof r[R_PREDICT1000].what,
             "%s: predict 1000 points a call (per point)", kind);

    char why[WHY_LEN];
    gp_model *model = speed_model(sd, messages, 0, why, sizeof why);
    gp_model *givens = model ? speed_model(sd, messages, 1e9, why, sizeof why) : NULL;
    sm_peer peer;
    int peer_ok = model && givens &&
                  sm_init(&peer, SPEED_D, messages ? SPEED_D_IN : 0, sd->width, sd->p,
                          messages) == 0;
    if (!peer_ok) {
        for (int i = 0; i < N_R; i++)
            snprintf(r[i].why, sizeof r[i].why, "%s", model && givens ? "out of memory" : why);
        gp_model_free(model);
        gp_model_free(givens);
        return;
    }
    size_t from = SPEED_WARMUP_ROWS;
    /* the peer, once per input kind: it updates one row at a time whatever the
     * batch, with one BLAS thread, as rfgp's Givens updates run on one: its
     * level-2 calls at D = 800 gain little from a second thread and their
     * times scattered 2x from run to run with two on the shared machine */
    size_t peer_rows = o->observes < SPEED_PEER_ROWS ? o->observes : SPEED_PEER_ROWS;
    int blas_threads = openblas_get_num_threads();
    openblas_set_num_threads(1);
    double t0 = gp_bench_seconds();
    for (size_t i = 0; i < peer_rows; i++) {
        size_t at = from + (i % (sd->count - from));
        sm_observe(&peer, sd->x + at * sd->width, sd->y + at * sd->p);
    }
    double peer_observe = 1e6 * (gp_bench_seconds() - t0) / (double)peer_rows;
    openblas_set_num_threads(blas_threads);
    static const size_t batch[5] = {1, 10, 100, SPEED_BIG_BATCH, SPEED_BIG_BATCH};
    for (int b = 0; b < 5; b++) {
        gp_model *mm = b == R_BIG_GIVENS ? givens : model;
        if (time_observes(mm, sd, batch[b], o->observes, &r[b].ours_us, r[b].why,
                          sizeof r[b].why) == 0) {
            r[b].peer_us = peer_observe;
            r[b].ok = 1;
        }
    }
    /* predict: single-point calls, then 1000-point calls */
    double mean[1000 * OUT_COLS], var[1000 * OUT_COLS];
    unsigned char ask[1000];
    double *Xp = malloc(1000 * sd->width * sizeof *Xp), *Yp = malloc(1000 * sd->p * sizeof *Yp);
    for (int which = 0; which < 2 && Xp != NULL && Yp != NULL; which++) {
        speed_row *rp = &r[which ? R_PREDICT1000 : R_PREDICT1];
        size_t m = which ? 1000 : 1, calls = which ? PREDICT_CALLS / 1000 : PREDICT_CALLS;
        gp_predict_request pr;
        memset(&pr, 0, sizeof pr);
        pr.m = m;
        pr.d = sd->width;
        pr.include_noise = 1;
        gp_prediction out;
        memset(&out, 0, sizeof out);
        out.mean = mean;
        out.variance = var;
        out.ask_oracle = ask;
        gp_error err;
        int rc = GP_OK;
        double spent = 0;
        /* Blocks of m points from the rows after the observed ones, or from
         * the whole stream when too few are left (a short --observes run). */
        size_t base = from, room = sd->count > from + m ? sd->count - from - m : 0;
        if (room == 0) {
            base = 0;
            room = sd->count > m ? sd->count - m : 0;
        }
        if (room == 0) {
            snprintf(rp->why, sizeof rp->why, "predict: %zu points need more than the %zu rows",
                     m, sd->count);
            continue;
        }
        for (size_t c = 0; c < calls && rc == GP_OK; c++) {
            size_t at = base + (c * m) % room;
            speed_block(sd, at, m, Xp, Yp);
            pr.X = Xp;
            double t1 = gp_bench_seconds();
            rc = gp_model_predict(model, &pr, &out, &err);
            spent += gp_bench_seconds() - t1;
        }
        if (rc != GP_OK) {
            snprintf(rp->why, sizeof rp->why, "predict: %s (%s)", gp_status_name(rc),
                     err.message);
            continue;
        }
        rp->ours_us = 1e6 * spent / (double)(calls * m);
        rp->ok = 1;
    }
    /* the peer's predict: features, mean and variance, one point at a time */
    double v, acc = 0;
    openblas_set_num_threads(1);
    t0 = gp_bench_seconds();
    for (size_t c = 0; c < PREDICT_CALLS; c++)
        acc += sm_predict(&peer, sd->x + (from + c % (sd->count - from)) * sd->width, &v);
    double peer_predict = 1e6 * (gp_bench_seconds() - t0) / (double)PREDICT_CALLS;
    openblas_set_num_threads(blas_threads);
    if (!isfinite(acc))
        fprintf(stderr, "bench_online: the peer predicted a non-finite mean\n");
    r[R_PREDICT1].peer_us = r[R_PREDICT1000].peer_us = peer_predict;
    free(Xp);
    free(Yp);
    sm_free(&peer);
    gp_model_free(model);
    gp_model_free(givens);
}

int part_speed(const options *o, gp_kjit_oracle *oracle)
{
    printf("## 3. Observations per second in process\n\n");
    size_t need = SPEED_WARMUP_ROWS + 2 * o->observes + 200;
    speed_data pts, msg;
    memset(&pts, 0, sizeof pts);
    memset(&msg, 0, sizeof msg);
    speed_row rows[16];
    size_t n_rows = 0;
    if (speed_points(need, &pts) == 0)
        speed_case(o, &pts, 0, rows, &n_rows);
    if (speed_messages(need, oracle, &msg) == 0)
        speed_case(o, &msg, 1, rows, &n_rows);
    printf("rfgp with D = %d features (two-stage for messages: %d inner), median widths, "
           "noise %.0e, fitted on %d rows; then %zu rows observed in each mode (mean per row, "
           "the gp_model_observe calls timed alone), and %d points predicted (include_noise, "
           "ask_oracle filled). \"rank-one updates only\": a second model with refactor_batch "
           "1e9 (every row a Givens update); \"auto\": rfgp's default crossover, above which a "
           "batch re-factorises the precision. Peer, in the "
           "same process on the same rows: the note's own update (§2, kernel-ep's online "
           "operator) on features of the same sizes: Sherman-Morrison on an explicit D x D "
           "covariance (dsymv + dsyr), the means recomputed by dsymm (shared by the outputs), "
           "one row at a time whatever the batch (%zu rows), with one BLAS thread; its predict: "
           "features, dsymv, two dot products. \"ratio\" = peer / rfgp (above 1: rfgp is faster); \"target\" = "
           "%.0f us / rfgp us per row (at or above 1: the issue's target is met).\n\n",
           SPEED_D, SPEED_D_IN, NOISE, SPEED_WARMUP_ROWS, o->observes, PREDICT_CALLS,
           o->observes < SPEED_PEER_ROWS ? o->observes : (size_t)SPEED_PEER_ROWS,
           TARGET_OBSERVE_US);
    printf("| measure | rfgp us | peer us | ratio | target (%.0f us) |\n", TARGET_OBSERVE_US);
    printf("|---|---:|---:|---:|---:|\n");
    int status = 0;
    for (size_t i = 0; i < n_rows; i++) {
        speed_row *r = &rows[i];
        if (!r->ok) {
            printf("| %s | %s | | | |\n", r->what, r->why[0] ? r->why : "not run");
            status = 1;
            continue;
        }
        int observe = strstr(r->what, "observe") != NULL;
        char target[32] = "";
        if (observe)
            snprintf(target, sizeof target, "%.2f", TARGET_OBSERVE_US / r->ours_us);
        printf("| %s | %.2f | %.2f | %.2f | %s |\n", r->what, r->ours_us, r->peer_us,
               r->peer_us / r->ours_us, target);
    }
    printf("\n");
    free(pts.x);
    free(pts.y);
    free(msg.x);
    free(msg.y);
    return status;
}
