#include "core/base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int gp_error_set(gp_error *err, int code, const char *field, const char *fmt, ...)
{
    if (err == NULL)
        return code;
    err->code = code;
    snprintf(err->field, sizeof err->field, "%s", field ? field : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return code;
}

void gp_error_clear(gp_error *err)
{
    if (err == NULL)
        return;
    err->code = GP_OK;
    err->field[0] = '\0';
    err->message[0] = '\0';
}

/* One catalogue row per code, generated from GP_ERROR_CATALOGUE. */
typedef struct status_row {
    int code;
    const char *name;
    int http, retry_after;
    const char *meaning;
} status_row;

#define GP_ERROR_ROW(code, value, name, http, retry, meaning) {code, name, http, retry, meaning},
static const status_row catalogue[] = {GP_ERROR_CATALOGUE(GP_ERROR_ROW)};
#undef GP_ERROR_ROW

_Static_assert(sizeof catalogue / sizeof catalogue[0] == GP_ERROR_CODE_COUNT,
               "every code of the catalogue has one row");

static const status_row *find_row(int code)
{
    for (size_t i = 0; i < sizeof catalogue / sizeof catalogue[0]; i++)
        if (catalogue[i].code == code)
            return &catalogue[i];
    return NULL;
}

const char *gp_status_name(int code)
{
    if (code == GP_OK)
        return "ok";
    const status_row *r = find_row(code);
    return r ? r->name : "internal";
}

int gp_status_http(int code)
{
    if (code == GP_OK)
        return 200;
    const status_row *r = find_row(code);
    return r ? r->http : 500;
}

int gp_status_retry_after(int code)
{
    const status_row *r = find_row(code);
    return r ? r->retry_after : 0;
}

const char *gp_status_meaning(int code)
{
    const status_row *r = find_row(code);
    return r ? r->meaning : "";
}

int gp_status_from_name(const char *name)
{
    int code = GP_EINTERNAL;
    if (name == NULL)
        return code;
    for (size_t i = 0; i < sizeof catalogue / sizeof catalogue[0]; i++)
        if (strcmp(catalogue[i].name, name) == 0)
            code = catalogue[i].code; /* the last row with the name */
    return code;
}
