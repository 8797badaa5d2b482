/* bench_online (bench/bench_online/main.c: what it measures and how to run it):
 * what its files share, the options, the pairs of messages, EP with the oracle
 * and the rfgp fit request. One program; nothing here is a public API. */
#ifndef GP_BENCH_ONLINE_H
#define GP_BENCH_ONLINE_H

#include <stddef.h>
#include <stdint.h>

#include "bench/support/kjit_oracle.h"
#include "core/model/model.h"

#define EXP_D 20
#define EXP_N 400
#define EXP_SWEEPS 5
#define TRUE_W_SEED 0
#define FIT_SEED 1
#define NOISE 1e-4
#define PRIOR_VAR 1.0
#define IN_COLS 4  /* (m, v, a, b) */
#define OUT_COLS 2 /* (mean, log variance) */
#define WHY_LEN 400 /* failure messages: a gp_error message and field fit */

/* The peers of part 1 (main.c's comment). */
enum {
    PEER_RFGP_MEDIAN = 0,
    PEER_RFGP_LOOCV,
    PEER_RFGP_ML,
    PEER_RFGP_ONLINE,
    PEER_RFGP_MV,
    PEER_EXACT_MV,
    N_PEERS
};
extern const char *const peer_names[N_PEERS];

enum { P_ACCURACY = 0, P_STREAM, P_SPEED, N_PARTS };

typedef struct options {
    int quick;
    int parts[N_PARTS];
    int peers[N_PEERS];
    int problems;
    size_t train, test;
    size_t exact_train; /* cap on exact_mv's training pairs */
    long features, inner_features; /* 0: rfgp's defaults */
    size_t observes;
    int stream_problems;
    double gate_kappa; /* part 2's rfgp gate_kappa (0: rfgp's default) */
    double noise;      /* part 1's rfgp noise variance */
    char pairs_out[1024]; /* "" or a folder for the pairs (the scikit-learn side) */
} options;

/* Rows (m, v, a, b) -> (mean, log variance); row-major while collected. */
typedef struct pairs {
    size_t n, cap;
    double *in;  /* n x IN_COLS row-major */
    double *out; /* n x OUT_COLS row-major */
} pairs;

void pairs_free(pairs *p);

typedef struct ep_stats {
    size_t oracle_calls, skipped, refresh_failures;
    double oracle_seconds;
} ep_stats;

/* EP with the oracle on problems with seeds first..first+count-1; every pair
 * seen is pushed onto out (NULL: not kept). The final posterior of problem k
 * goes to mu_out + k d and S_out + k d d when those are not NULL. */
int run_oracle_ep(const double *w, size_t d, size_t n, double x_scale, uint64_t first,
                  int count, int sweeps, gp_kjit_oracle *oracle, pairs *out,
                  double *mu_out, double *S_out, ep_stats *st);

typedef struct rfgp_spec {
    int messages;          /* input messages [normal, beta], else points */
    const char *widths;    /* width_selection, NULL: rfgp's default */
    long features, inner;  /* 0: rfgp's defaults */
    long warmup;           /* -1: rfgp's default */
    size_t outputs;
    double refactor_batch; /* 0: rfgp's default (auto) */
    int standardize;       /* the request's standardize (0: the note's raw targets) */
    double gate_kappa;     /* 0: rfgp's default */
    double noise;          /* 0: NOISE */
} rfgp_spec;

/* Fit an rfgp model; NULL with a message in why on failure. */
gp_model *rfgp_fit(const rfgp_spec *s, const double *X, const double *Y, size_t n,
                   size_t width, char *why, size_t why_len);

/* The three parts; each prints its section of markdown, 0 when it ran. */
int part_accuracy(const options *o, gp_kjit_oracle *oracle);
int part_stream(const options *o, gp_kjit_oracle *oracle);
int part_speed(const options *o, gp_kjit_oracle *oracle);

#endif
