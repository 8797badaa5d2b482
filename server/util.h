/* gpserve server: small pure helpers (no libmicrohttpd): constant-time
 * comparison, bearer-token and Basic-password parsing, percent-decoding, job ids, clocks and
 * one-write log lines. */
#ifndef GP_SERVER_UTIL_H
#define GP_SERVER_UTIL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* 1 when a[0..alen) equals b[0..blen). The time taken depends only on the
 * lengths: every byte of the longer input is visited, with no early exit. */
int gp_ct_equal(const char *a, size_t alen, const char *b, size_t blen);

/* The token of an "Authorization: Bearer TOKEN" header value (scheme matched
 * case-insensitively, blanks around the token ignored). Returns 1 and sets
 * *tok and *toklen, or 0 when the header is NULL, has another scheme or no token. */
int gp_bearer_token(const char *header, const char **tok, size_t *toklen);

/* The password of an "Authorization: Basic BASE64(user:password)" header
 * value (RFC 7617; scheme matched case-insensitively, blanks around the
 * credentials ignored, any user name). The credentials are decoded into
 * buf[0..size) (standard base64 alphabet, padding optional but never in the
 * middle). Returns 1 and sets *pw (inside buf) and *pwlen, or 0 when the
 * header is NULL, has another scheme, is not base64, decodes to more than
 * size - 1 bytes or holds no ':'. A browser sends this on navigation, where
 * it cannot send a Bearer token. */
int gp_basic_password(const char *header, char *buf, size_t size, const char **pw,
                      size_t *pwlen);

/* Percent-decode src[0..len) into dst (dstsize bytes, NUL-terminated).
 * '+' stays '+' (path segments). Returns the decoded length, or -1 on a bad
 * escape, an encoded NUL, or when dst is too small. */
long gp_percent_decode(const char *src, size_t len, char *dst, size_t dstsize);

/* 32 lowercase hex characters + NUL from /dev/urandom (fallback: time,
 * pid and a counter mixed by splitmix64). */
void gp_job_id_generate(char out[33]);

/* Clocks. */
double gp_monotonic_seconds(void);
/* A condition variable whose timed waits count on CLOCK_MONOTONIC (a change
 * of the wall clock neither wakes nor holds up a periodic thread): 0 or -1. */
int gp_cond_init_monotonic(pthread_cond_t *cond);
/* Wait on cond (made by gp_cond_init_monotonic; mutex held) for at most ms
 * milliseconds. */
void gp_cond_wait_ms(pthread_cond_t *cond, pthread_mutex_t *mutex, long ms);
/* The same for at most us microseconds. */
void gp_cond_wait_us(pthread_cond_t *cond, pthread_mutex_t *mutex, uint64_t us);
/* Unix time in seconds (leases of durable jobs: shared by the daemons of one database). */
double gp_wall_seconds(void);
uint64_t gp_monotonic_us(void);
/* UTC time as "2026-01-02T03:04:05Z". */
void gp_utc_now(char *out, size_t size);

/* Media type of a Content-Type value compared case-insensitively, parameters
 * (";charset=...") and blanks ignored. 1 when it is `type` (e.g. "text/csv"). */
int gp_media_type_is(const char *content_type, const char *type);

/* The value of the first string member "key" found in a JSON text (e.g. the
 * "message" of an api error body), unescaped into out (\uXXXX decoded to
 * UTF-8). Returns 1 when found, else 0 (out is then ""). A scanner for
 * bodies this process produced, not a validating parser. */
int gp_json_find_string(const char *json, size_t len, const char *key, char *out, size_t size);

/* The value of a hexadecimal digit (either case), or -1. */
int gp_hex_digit(char c);
/* A hash of n bytes for the server's tables (connection slots, rate-limit
 * buckets): FNV-1a with MurmurHash3's finaliser, so the low bits mix. */
uint64_t gp_hash_bytes(const void *data, size_t n);

/* printf to stderr as one write(2) with a trailing newline. */
void gp_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
