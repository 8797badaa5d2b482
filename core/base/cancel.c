/* The cancellation token: see core/base/cancel.h. */
#include "core/base/cancel.h"

#include <stddef.h>

int gp_cancel_requested(const gp_cancel *c)
{
    if (c == NULL)
        return 0;
    /* Relaxed: the flag carries no data; a poll that misses a store made an
     * instant ago sees it at the next block. */
    if (c->flag && atomic_load_explicit(c->flag, memory_order_relaxed))
        return 1;
    return c->checks_left &&
           atomic_fetch_sub_explicit(c->checks_left, 1, memory_order_relaxed) <= 0;
}
