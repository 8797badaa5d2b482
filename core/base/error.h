/* gpserve core: error codes and the error record every fallible function fills.
 *
 * Functions return 0 on success or one of the negative codes below, and, when
 * given a non-NULL gp_error, fill it with the code, a human-readable message and
 * the request field the error is about (empty when none applies). Every code
 * is a row of the catalogue below (name, HTTP status, meaning). */
#ifndef GP_ERROR_H
#define GP_ERROR_H

/* The error catalogue, written once:
 *   X(CODE, value, name, HTTP status, Retry-After seconds (0: none), meaning).
 * The enum, gp_status_name, gp_status_http, gp_status_retry_after,
 * gp_status_meaning, the api's JSON errors, the OpenAPI error enum and the
 * table of docs/design/api.md (make docs) and the tests all read this table,
 * so a code cannot exist outside it. Codes below GP_EINTERNAL are
 * service-layer codes (store/, api/, server/): core never returns them.
 * GP_ECANCELLED never reaches HTTP (a cancelled fit has no synchronous
 * caller): it is answered as internal. Two codes may share a name (an
 * allocation failure is "overloaded" like a full queue, with its own status). */
#define GP_ERROR_CATALOGUE(X)                                                                     \
    X(GP_EINVAL, -1, "invalid_argument", 400, 0, "bad option, shape, name or value")              \
    X(GP_ENOMEM, -2, "overloaded", 503, 5,                                                        \
      "memory ran out during the work (sizes known in advance are refused with 413)")             \
    X(GP_EDATA, -3, "invalid_data", 422, 0, "NaN/Inf in the data, or a dimension mismatch")       \
    X(GP_ENOTPD, -4, "not_positive_definite", 422, 0,                                             \
      "the covariance is not positive definite at the largest jitter")                            \
    X(GP_ETOOBIG, -5, "payload_too_large", 413, 0, "above a configured size limit")               \
    X(GP_EUNSUPPORTED, -6, "unsupported", 422, 0, "not valid for this method or kernel")          \
    X(GP_ECANCELLED, -7, "cancelled", 500, 0, "the fit was cancelled (never sent over HTTP)")     \
    X(GP_EINTERNAL, -8, "internal", 500, 0, "a bug or a library failure")                         \
    X(GP_ENOTFOUND, -9, "not_found", 404, 0, "unknown model, version, job or route")              \
    X(GP_ECONFLICT, -10, "conflict", 409, 0, "the resource is in a state that forbids this")      \
    X(GP_EOVERLOADED, -11, "overloaded", 429, 5,                                                  \
      "the fit queue is full, or a rate limit is spent (Retry-After: until its next token)")      \
    X(GP_ENOTREADY, -12, "not_ready", 503, 0, "the store is not open, or the daemon is stopping") \
    X(GP_EUNAUTHORIZED, -13, "unauthorized", 401, 0, "the API key is missing or wrong")           \
    X(GP_EMEDIATYPE, -14, "unsupported_media_type", 415, 0,                                       \
      "a Content-Type the route does not take")                                                   \
    X(GP_EMETHOD, -15, "method_not_allowed", 405, 0, "an HTTP verb the route does not take")      \
    X(GP_EMALFORMED, -16, "malformed_json", 400, 0, "the body is not JSON")                       \
    X(GP_ESTORAGE, -17, "insufficient_storage", 507, 30,                                          \
      "the disk is full: writes are refused, reads still served")                                 \
    X(GP_EHTTP, -18, "malformed_request", 400, 0,                                                 \
      "the HTTP request itself is malformed: request line, Content-Length, chunked encoding")     \
    X(GP_ETIMEOUT, -19, "request_timeout", 408, 0,                                                \
      "the request's headers and body did not arrive within --request-timeout")                   \
    X(GP_EURITOOLONG, -20, "uri_too_long", 414, 0,                                                \
      "the request line is longer than the daemon reads (64 KiB)")                                \
    X(GP_EHEADERS, -21, "header_too_large", 431, 0,                                               \
      "the request line and headers are larger than the daemon reads (64 KiB)")                   \
    X(GP_EHTTPVERSION, -22, "http_version_not_supported", 505, 0,                                 \
      "an HTTP version other than 1.0 and 1.1")                                                  \
    X(GP_EINTERRUPTED, -23, "interrupted", 500, 0,                                                \
      "an async fit whose daemon stopped during it --job-attempts times, or a distributed fit "   \
      "whose launcher ended without an outcome (job errors only)")                               \
    X(GP_ENONFINITE, -24, "model_not_finite", 409, 0,                                             \
      "the stored version holds a non-finite number (poisoned before this daemon checked): "      \
      "reported, not served; fit a new version or delete it")                                    \
    X(GP_EFORBIDDEN, -25, "forbidden", 403, 0,                                                    \
      "the API key is valid but lacks the route's scope (field scope) or may not name the "       \
      "model (field name)")

#define GP_ERROR_ENUM_ENTRY(code, value, name, http, retry, meaning) code = value,
enum gp_status { GP_OK = 0, GP_ERROR_CATALOGUE(GP_ERROR_ENUM_ENTRY) };
#undef GP_ERROR_ENUM_ENTRY

/* Number of codes in the catalogue (GP_OK excluded). */
#define GP_ERROR_COUNT_ENTRY(code, value, name, http, retry, meaning) +1
enum { GP_ERROR_CODE_COUNT = 0 GP_ERROR_CATALOGUE(GP_ERROR_COUNT_ENTRY) };
#undef GP_ERROR_COUNT_ENTRY

#define GP_ERROR_FIELD_LEN 64
#define GP_ERROR_MESSAGE_LEN 256

typedef struct gp_error {
    int code;
    char field[GP_ERROR_FIELD_LEN];
    char message[GP_ERROR_MESSAGE_LEN];
} gp_error;

/* Fill err (if non-NULL) and return code. field may be NULL. */
int gp_error_set(gp_error *err, int code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Reset err to GP_OK with empty message and field. */
void gp_error_clear(gp_error *err);

/* Stable machine name of a code, as used in the API catalogue ("invalid_argument", ...);
 * "ok" for GP_OK and "internal" for a code outside the catalogue. */
const char *gp_status_name(int code);
/* The HTTP status of a code (200 for GP_OK, 500 outside the catalogue). */
int gp_status_http(int code);
/* Seconds a client should wait before retrying (the Retry-After header), 0 for none. */
int gp_status_retry_after(int code);
/* One line on what the code means ("" outside the catalogue). */
const char *gp_status_meaning(int code);
/* The code whose catalogue name is name (the last row with it, where two
 * share a name: GP_EOVERLOADED for "overloaded"), GP_EINTERNAL when none. */
int gp_status_from_name(const char *name);

#endif
