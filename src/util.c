#include "util.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

/* one message per thread: batch workers fail independently */
static _Thread_local char error_message[1024] = "gpufilter: unknown error";

void gf_set_error(const char *fmt, ...)
{
    int used = snprintf(error_message, sizeof error_message, "gpufilter: ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_message + used, sizeof error_message - (size_t)used, fmt, ap);
    va_end(ap);
}

const char *gf_error(void)
{
    return error_message;
}

double gf_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

int gf_mul_size(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > SIZE_MAX / a)
        return -1;
    *out = a * b;
    return 0;
}
