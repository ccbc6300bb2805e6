#define _GNU_SOURCE  /* sched_getaffinity */
#include "util.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>
#include <time.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

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

void gf_error_name_file(const char *name)
{
    static const char prefix[] = "gpufilter: ";
    const size_t skip = strncmp(error_message, prefix, sizeof prefix - 1) == 0 ? sizeof prefix - 1 : 0;
    char named[2 * sizeof error_message + 16];
    int n = snprintf(named, sizeof named, "%s%s: %s", prefix, name, error_message + skip);
    if (n < 0)
        return;
    /* a message longer than the buffer is cut short */
    size_t keep = strlen(named) < sizeof error_message ? strlen(named) : sizeof error_message - 1;
    memcpy(error_message, named, keep);
    error_message[keep] = '\0';
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

int gf_cpu_cores(void)
{
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static int image_threads;  /* set before any worker starts; 0: every core */

void gf_set_image_threads(int threads)
{
    image_threads = threads;
}

int gf_image_threads(void)
{
    return image_threads > 0 ? image_threads : gf_cpu_cores();
}

void *gf_malloc_large(size_t bytes)
{
    void *buffer = malloc(bytes ? bytes : 1);
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)2 << 20;
    const uintptr_t first = ((uintptr_t)buffer + huge - 1) & ~(huge - 1);
    const uintptr_t end = ((uintptr_t)buffer + bytes) & ~(huge - 1);
    if (buffer && end > first)
        (void)madvise((void *)first, end - first, MADV_HUGEPAGE);
#endif
    return buffer;
}

void gf_run_shared(void *(*work)(void *), void *arg, int threads)
{
    pthread_t ids[63];
    int started = 0;
    for (int t = 1; t < threads && started < 63; t++)
        if (pthread_create(&ids[started], NULL, work, arg) == 0)
            started++;
    work(arg);
    for (int t = 0; t < started; t++)
        pthread_join(ids[t], NULL);
}

int gf_bytes_append(gf_bytes *b, const void *data, size_t size)
{
    if (size > b->capacity - b->size) {
        size_t capacity = b->capacity ? b->capacity : 1 << 16;
        while (capacity - b->size < size)
            capacity *= 2;
        unsigned char *bigger = realloc(b->data, capacity);
        if (!bigger)
            return -1;
        b->data = bigger;
        b->capacity = capacity;
    }
    memcpy(b->data + b->size, data, size);
    b->size += size;
    return 0;
}

void *gf_open_library(const char *env_name, const char *const *names, size_t count)
{
    const char *chosen = getenv(env_name);
    if (chosen && *chosen)
        return strcmp(chosen, "none") == 0 ? NULL : dlopen(chosen, RTLD_NOW | RTLD_LOCAL);
    for (size_t i = 0; i < count; i++) {
        void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (lib)
            return lib;
    }
    return NULL;
}
