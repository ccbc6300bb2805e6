/* util.h - error reporting and checked size arithmetic shared by the host code. */
#ifndef GF_UTIL_H
#define GF_UTIL_H

#include <stddef.h>

/* Library-level functions return 0 / -1 (or NULL) and record why here;
 * only main() prints the message. Messages start with "gpufilter: ". */
void gf_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *gf_error(void);
/* Put "NAME: " in front of the recorded message (after "gpufilter: "), so
 * that a failure inside a stage that does not know the file names it. */
void gf_error_name_file(const char *name);

/* Milliseconds on the monotonic clock, for stage timings and rates. */
double gf_now_ms(void);

/* The cores this process may run on (its affinity), at least 1. */
int gf_cpu_cores(void);
/* Threads one image's work may take (a CPU convolution, a PNG encode):
 * every core by default; a batch gives each worker its share, -j N sets N. */
void gf_set_image_threads(int threads);
int gf_image_threads(void);

/* a * b, or -1 when the product overflows size_t. */
int gf_mul_size(size_t a, size_t b, size_t *out);

/* malloc for a large buffer written soon after (pixels, a file, a
 * stream): transparent huge pages are asked for over it (madvise; nothing
 * where the kernel offers none), so that filling it takes 2 MiB page
 * faults instead of 4 KiB ones. free() it. */
void *gf_malloc_large(size_t bytes);

/* A growing heap buffer (free() its data): append copies size bytes,
 * doubling the capacity as needed; 0, or -1 when out of memory (what it
 * holds is kept). */
typedef struct {
    unsigned char *data;
    size_t size, capacity;
} gf_bytes;
int gf_bytes_append(gf_bytes *bytes, const void *data, size_t size);

/* Run work(arg) on 'threads' threads at once, the caller's among them, and
 * return when every one has returned. Fewer run where threads cannot
 * start (at most 64): work must take its items from arg until none is
 * left, so that any number of runners finishes the job. */
void gf_run_shared(void *(*work)(void *), void *arg, int threads);
/* A library loaded with dlopen: the file $env_name names ("none": no
 * library, NULL), else the first of names[0..count-1] that loads; NULL when
 * none does. */
void *gf_open_library(const char *env_name, const char *const *names, size_t count);

#endif
