/* libFuzzer target: the CSV fit parser, gp_api_parse_fit with a text/csv body
 * and query parameters (validation only: no fit is ever run).
 *
 * Input layout: the first line is the query string, "key=value&key=value"
 * (already percent-decoded, as the server hands it over; a pair without '='
 * has an empty value); everything after the first '\n' is the CSV body. An
 * input without '\n' is a body with no query parameters. */
#include "tests/fuzz/fuzz_common.h"

#define MAX_PARAMS 16

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_api_open();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > FUZZ_MAX_INPUT)
        return -1;
    const uint8_t *nl = size ? memchr(data, '\n', size) : NULL;
    size_t qlen = nl ? (size_t)(nl - data) : 0;
    const uint8_t *bstart = nl ? nl + 1 : data;
    size_t blen = size - (size_t)(bstart - data);

    /* query: a NUL-terminated copy cut in place at '&' and '=' */
    char *qs = malloc(qlen + 1);
    char *body = blen ? malloc(blen) : NULL;
    if (qs == NULL || (blen && body == NULL)) {
        free(qs);
        free(body);
        return 0;
    }
    memcpy(qs, data, qlen);
    qs[qlen] = '\0';
    if (blen)
        memcpy(body, bstart, blen);
    gp_query_param q[MAX_PARAMS];
    size_t nq = 0;
    char *p = qs;
    while (qlen && nq < MAX_PARAMS) {
        char *amp = strchr(p, '&');
        if (amp)
            *amp = '\0';
        char *eq = strchr(p, '=');
        if (eq)
            *eq = '\0';
        q[nq].key = p;
        q[nq].value = eq ? eq + 1 : "";
        nq++;
        if (amp == NULL)
            break;
        p = amp + 1;
    }

    gp_request req;
    memset(&req, 0, sizeof req);
    req.content_type = "text/csv";
    req.body = body;
    req.body_len = blen;
    req.query = q;
    req.n_query = nq;
    gp_fit_job *job = NULL;
    gp_error err;
    gp_error_clear(&err);
    int rc = gp_api_parse_fit(fuzz_api, &req, &job, &err);
    if (rc == 0) {
        if (job == NULL || !gp_api_valid_name(gp_fit_job_name(job))) {
            fprintf(stderr, "fuzz: accepted CSV fit without a valid name\n");
            abort();
        }
        (void)gp_fit_job_async(job);
        (void)gp_fit_job_max_iterations(job);
        gp_fit_job_free(job);
    } else {
        if (job != NULL || err.code == 0) {
            fprintf(stderr, "fuzz: rejected CSV fit: rc %d, code %d\n", rc, err.code);
            abort();
        }
        gp_response res;
        memset(&res, 0, sizeof res);
        gp_api_error(&err, &res);
        fuzz_check_response(&res);
        gp_response_free(&res);
    }
    free(body);
    free(qs);
    return 0;
}
