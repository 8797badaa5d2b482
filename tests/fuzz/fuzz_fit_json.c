/* libFuzzer target: the JSON fit request parser, gp_api_parse_fit with an
 * application/json body (validation only: no fit is ever run). An accepted
 * request's accessors are read; a rejected one becomes the error response the
 * server would send, which must be valid JSON. */
#include "tests/fuzz/fuzz_common.h"

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
    int failed;
    char *body = fuzz_copy(data, size, &failed);
    if (failed)
        return 0;
    gp_request req;
    memset(&req, 0, sizeof req);
    req.content_type = "application/json; charset=utf-8";
    req.body = body;
    req.body_len = size;
    gp_fit_job *job = NULL;
    gp_error err;
    gp_error_clear(&err);
    int rc = gp_api_parse_fit(fuzz_api, &req, &job, &err);
    gp_response res;
    memset(&res, 0, sizeof res);
    if (rc == 0) {
        if (job == NULL || !gp_api_valid_name(gp_fit_job_name(job)) ||
            gp_fit_job_method(job) == NULL) {
            fprintf(stderr, "fuzz: accepted fit request without a valid name or method\n");
            abort();
        }
        (void)gp_fit_job_async(job);
        (void)gp_fit_job_max_iterations(job);
        gp_fit_job_free(job);
    } else {
        if (job != NULL || err.code == 0) {
            fprintf(stderr, "fuzz: rejected fit request: rc %d, code %d, job %p\n", rc, err.code,
                    (void *)job);
            abort();
        }
        gp_api_error(&err, &res);
        fuzz_check_response(&res);
        gp_response_free(&res);
    }
    free(body);
    return 0;
}
