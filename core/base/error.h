/* gpserve core: error codes and the error record every fallible function fills.
 *
 * Functions return 0 on success or one of the negative codes below, and, when
 * given a non-NULL gp_error, fill it with the code, a human-readable message and
 * the request field the error is about (empty when none applies). The api layer
 * maps each code onto the DESIGN error catalogue. */
#ifndef GP_ERROR_H
#define GP_ERROR_H

enum gp_status {
    GP_OK = 0,
    GP_EINVAL = -1,       /* invalid_argument (400): bad option, bad shape, bad name */
    GP_ENOMEM = -2,       /* internal (500): allocation failed */
    GP_EDATA = -3,        /* invalid_data (422): NaN/Inf in X/y, dimension mismatch */
    GP_ENOTPD = -4,       /* not_positive_definite (422): PD not reached at the last jitter */
    GP_ETOOBIG = -5,      /* payload_too_large (413): above a configured size limit */
    GP_EUNSUPPORTED = -6, /* unsupported (422): option not valid for this method/kernel */
    GP_ECANCELLED = -7,   /* the progress callback asked the fit to stop */
    GP_EINTERNAL = -8,    /* internal (500): a bug or a library failure */
    /* Codes of the service layers (store/, api/, server/); core never returns them. */
    GP_ENOTFOUND = -9,      /* not_found (404): unknown model, version, job or route */
    GP_ECONFLICT = -10,     /* conflict (409): e.g. cancelling a finished job */
    GP_EOVERLOADED = -11,   /* overloaded (429): job queue full */
    GP_ENOTREADY = -12,     /* not_ready (503): store not open, shutting down */
    GP_EUNAUTHORIZED = -13, /* unauthorized (401): API key missing or wrong */
    GP_EMEDIATYPE = -14,    /* unsupported_media_type (415) */
    GP_EMETHOD = -15,       /* method_not_allowed (405): wrong HTTP verb */
    GP_EMALFORMED = -16     /* malformed_json (400): the body is not JSON */
};

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

/* Stable machine name of a code, as used in the API catalogue ("invalid_argument", ...). */
const char *gp_status_name(int code);

#endif
