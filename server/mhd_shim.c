/* The two wrapped libmicrohttpd functions; why, in server/mhd_shim.h. */
#define _GNU_SOURCE /* RTLD_NEXT */
#include "server/mhd_shim.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef enum MHD_Result (*queue_fn)(struct MHD_Connection *, unsigned int,
                                    struct MHD_Response *);
typedef enum MHD_Result (*set_value_fn)(struct MHD_Connection *, enum MHD_ValueKind,
                                        const char *, size_t, const char *, size_t);

/* The originals, resolved once (dlsym takes the loader's lock; a header is
 * stored per call): written by pthread_once only, read-only afterwards. */
static queue_fn real_queue;
static set_value_fn real_set_value;
static pthread_once_t resolve_once = PTHREAD_ONCE_INIT;
/* The transport's error pages (gp_mhd_shim_set_error_page); atomic: set by
 * each server start, read by libmicrohttpd's threads. */
static _Atomic(gp_mhd_error_page_fn) error_page;

void gp_mhd_shim_set_error_page(gp_mhd_error_page_fn fn)
{
    atomic_store(&error_page, fn);
}

static void resolve(void)
{
    /* dlsym returns void *; POSIX guarantees it converts to a function pointer. */
    void *q = dlsym(RTLD_NEXT, "MHD_queue_response");
    void *s = dlsym(RTLD_NEXT, "MHD_set_connection_value_n");
    memcpy(&real_queue, &q, sizeof q);
    memcpy(&real_set_value, &s, sizeof s);
}

static void resolve_all(void)
{
    pthread_once(&resolve_once, resolve);
}

/* Counts the headers of a response (MHD_get_response_headers' iterator). */
static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value)
{
    (void)kind;
    (void)key;
    (void)value;
    ++*(unsigned *)cls;
    return MHD_YES;
}

enum MHD_Result MHD_queue_response(struct MHD_Connection *connection, unsigned int status_code,
                                   struct MHD_Response *response)
{
    resolve_all();
    if (real_queue == NULL)
        return MHD_NO;
    unsigned headers = 0;
    if (status_code >= 400 && response != NULL)
        MHD_get_response_headers(response, count_header, &headers);
    if (status_code < 400 || response == NULL || headers > 0)
        return real_queue(connection, status_code, response);
    unsigned status = status_code;
    gp_mhd_error_page_fn page = atomic_load(&error_page);
    struct MHD_Response *json = page ? page(connection, &status) : NULL;
    if (json == NULL)
        return real_queue(connection, status_code, response);
    enum MHD_Result ret = real_queue(connection, status, json);
    MHD_destroy_response(json); /* the connection holds its own reference */
    return ret;
}

/* Whether libmicrohttpd 0.9.75 takes a Content-Length value: one or more
 * decimal digits and nothing else, below 2^64 (its MHD_str_to_uint64_n_). */
static int length_acceptable(const char *v, size_t n)
{
    if (v == NULL || n == 0)
        return 0;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return 0;
        unsigned d = (unsigned)(v[i] - '0');
        if (x > (UINT64_MAX - d) / 10)
            return 0;
        x = x * 10 + d;
    }
    return 1;
}

enum MHD_Result MHD_set_connection_value_n(struct MHD_Connection *connection,
                                           enum MHD_ValueKind kind, const char *key,
                                           size_t key_size, const char *value,
                                           size_t value_size)
{
    resolve_all();
    if (real_set_value == NULL)
        return MHD_NO;
    static const char cl[] = MHD_HTTP_HEADER_CONTENT_LENGTH;
    if (kind == MHD_HEADER_KIND && key != NULL && key_size == sizeof cl - 1 &&
        strncasecmp(key, cl, key_size) == 0 && !length_acceptable(value, value_size)) {
        key = GP_MHD_BAD_CONTENT_LENGTH;
        key_size = sizeof GP_MHD_BAD_CONTENT_LENGTH - 1;
    }
    return real_set_value(connection, kind, key, key_size, value, value_size);
}

int gp_mhd_shim_check(char *msg, size_t msg_size)
{
    resolve_all();
    if (real_queue == NULL || real_set_value == NULL) {
        snprintf(msg, msg_size, "libmicrohttpd's MHD_queue_response or "
                                "MHD_set_connection_value_n was not found");
        return -1;
    }
    /* The process-wide definitions must be ours, or the library's own calls
     * bypass the wrappers (the executable did not export them). */
    void *q = dlsym(RTLD_DEFAULT, "MHD_queue_response");
    void *s = dlsym(RTLD_DEFAULT, "MHD_set_connection_value_n");
    queue_fn gq;
    set_value_fn gs;
    memcpy(&gq, &q, sizeof q);
    memcpy(&gs, &s, sizeof s);
    if (gq != MHD_queue_response || gs != MHD_set_connection_value_n) {
        snprintf(msg, msg_size, "the libmicrohttpd wrappers are not in use: its own error "
                                "pages stay HTML");
        return 1;
    }
    return 0;
}
