/* image_limits.c - the limits a run puts on decoding, whatever the file
 * says: a memory budget that the threads of a run share, and a time limit
 * on each decode.
 *
 * Memory: before a decode allocates pixels, the image's working memory is
 * estimated from its header and reserved from the budget. A thread whose
 * image does not fit beside the others' waits until they release theirs;
 * an image that would not fit in the whole budget is refused. The image
 * carries its reservation and gives it back when it is freed. Waiting never
 * deadlocks: a thread reserves for one image at a time, and holds nothing
 * while it waits.
 *
 * Time: stb_image decodes on the calling thread and cannot be stopped. The
 * decode runs on a thread of its own, which the caller waits for up to the
 * limit; past it the caller reports the file and goes on, and the decode
 * thread, abandoned, frees what it made if it ever ends (its reservation
 * with it). The process exit ends it otherwise. */
#include "image.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

/* ---- the memory budget ------------------------------------------------------ */

static pthread_mutex_t budget_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t budget_freed = PTHREAD_COND_INITIALIZER;
static size_t budget_bytes;  /* 0: not set yet, gf_default_memory_budget() */
static size_t reserved_bytes;

size_t gf_default_memory_budget(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0)
        return (size_t)4 << 30;
    return (size_t)pages / 2 * (size_t)page;
}

void gf_image_set_memory_budget(size_t bytes)
{
    pthread_mutex_lock(&budget_lock);
    budget_bytes = bytes;
    pthread_mutex_unlock(&budget_lock);
}

static int budget_depth = 8;

void gf_image_set_budget_depth(int depth)
{
    budget_depth = depth == 16 ? 16 : 8;
}

size_t gf_image_memory_estimate(int width, int height, int channels, int depth)
{
    /* the decoded image, the decoder's own copy of it (inflated rows,
     * progressive JPEG coefficients, a GIF canvas, HDR floats) and the
     * filter's output and the encoded file: 3 sizes of a sample and 6 bytes
     * a pixel bound each format stb_image and libjpeg-turbo decode */
    const size_t sample = depth == 16 || budget_depth == 16 ? 2 : 1;
    size_t pixels, bytes;
    if (gf_mul_size((size_t)width, (size_t)height, &pixels) < 0 ||
        gf_mul_size(pixels, 3 * sample * (size_t)channels + 6, &bytes) < 0)
        return SIZE_MAX;
    return bytes;
}

int gf_image_reserve_memory(const char *name, size_t bytes)
{
    pthread_mutex_lock(&budget_lock);
    if (budget_bytes == 0)
        budget_bytes = gf_default_memory_budget();
    const size_t budget = budget_bytes;
    if (bytes > budget) {
        pthread_mutex_unlock(&budget_lock);
        gf_set_error("%s: decoding and filtering it needs about %zu MiB, over the memory limit of "
                     "%zu MiB (--max-memory)", name, bytes >> 20, budget >> 20);
        return -1;
    }
    while (reserved_bytes + bytes > budget)
        pthread_cond_wait(&budget_freed, &budget_lock);
    reserved_bytes += bytes;
    pthread_mutex_unlock(&budget_lock);
    return 0;
}

void gf_image_release_memory(size_t bytes)
{
    if (bytes == 0)
        return;
    pthread_mutex_lock(&budget_lock);
    reserved_bytes -= bytes < reserved_bytes ? bytes : reserved_bytes;
    pthread_cond_broadcast(&budget_freed);
    pthread_mutex_unlock(&budget_lock);
}

/* ---- the time limit --------------------------------------------------------- */

static double decode_timeout_s = GF_DEFAULT_DECODE_TIMEOUT_S;

void gf_image_set_decode_timeout(double seconds)
{
    decode_timeout_s = seconds;
}

double gf_image_decode_timeout(void)
{
    return decode_timeout_s;
}

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t finished;
    int done, abandoned;
    unsigned char *data;
    size_t size;
    char *name;
    gf_image_probe probe;
    size_t reserved;
    gf_image *img;
    char error[1024];
} decode_job;

static void free_job(decode_job *job)
{
    pthread_mutex_destroy(&job->lock);
    pthread_cond_destroy(&job->finished);
    free(job->data);
    free(job->name);
    free(job);
}

static void *decode_thread(void *arg)
{
    decode_job *job = arg;
    gf_image *img = gf_image_decode_probed(job->data, job->size, job->name, &job->probe,
                                           job->reserved);
    pthread_mutex_lock(&job->lock);
    job->img = img;
    if (!img)
        snprintf(job->error, sizeof job->error, "%s", gf_error());
    job->done = 1;
    const int abandoned = job->abandoned;
    pthread_cond_signal(&job->finished);
    pthread_mutex_unlock(&job->lock);
    if (abandoned) {  /* the caller has gone on: nobody else will free these */
        gf_image_free(img);
        free_job(job);
    }
    return NULL;
}

/* The finished job's image, or NULL with its error. */
static gf_image *finish_job(decode_job *job)
{
    gf_image *img = job->img;
    if (!img)
        gf_set_error("%s", job->error + strlen("gpufilter: "));
    free_job(job);
    return img;
}

/* Wait for the job until the limit; 1 when it finished, 0 when abandoned. */
static int wait_for_decode(decode_job *job)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    double whole = (double)(time_t)decode_timeout_s;
    deadline.tv_sec += (time_t)whole;
    deadline.tv_nsec += (long)((decode_timeout_s - whole) * 1e9);
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&job->lock);
    int rc = 0;
    while (!job->done && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&job->finished, &job->lock, &deadline);
    const int finished = job->done;
    if (!finished)
        job->abandoned = 1;
    pthread_mutex_unlock(&job->lock);
    return finished;
}

/* Decode on a thread of its own under the time limit; job owns the data. */
static gf_image *decode_with_deadline(decode_job *job)
{
    pthread_t thread;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    const int started = pthread_create(&thread, &attr, decode_thread, job) == 0;
    pthread_attr_destroy(&attr);
    if (!started) {  /* no thread to spare: decode here, without the limit */
        decode_thread(job);
    } else if (!wait_for_decode(job)) {
        gf_set_error("%s: decoding did not finish within %g s (--decode-timeout); a corrupt or "
                     "hostile file?", job->name, decode_timeout_s);
        return NULL;
    }
    return finish_job(job);
}

/* Reserve here, so that the time limit counts the decode alone, not the
 * wait for room in the budget. */
gf_image *gf_image_decode_limited(unsigned char *data, size_t size, const char *name,
                                  const gf_image_probe *probe)
{
    decode_job *job = calloc(1, sizeof *job);
    char *name_copy = strdup(name);
    if (!job || !name_copy) {
        free(job);
        free(name_copy);
        free(data);
        gf_set_error("%s: out of memory", name);
        return NULL;
    }
    pthread_mutex_init(&job->lock, NULL);
    pthread_cond_init(&job->finished, NULL);
    job->data = data;
    job->size = size;
    job->name = name_copy;
    job->probe = *probe;
    job->reserved = gf_image_memory_estimate(probe->width, probe->height, probe->channels,
                                             probe->depth);
    if (gf_image_reserve_memory(name, job->reserved) < 0) {
        job->reserved = 0;
        free_job(job);
        return NULL;
    }
    if (decode_timeout_s <= 0) {
        decode_thread(job);
        return finish_job(job);
    }
    return decode_with_deadline(job);
}

gf_image *gf_image_load_limited_hook(const char *path, gf_probe_hook probed, void *user)
{
    size_t size = 0;
    unsigned char *data = gf_read_input(path, &size);
    if (!data)
        return NULL;
    const char *name = strcmp(path, "-") == 0 ? "standard input" : path;
    gf_image_probe probe;
    if (gf_image_probe_memory(data, size, name, &probe) < 0) {
        free(data);
        return NULL;
    }
    if (probed && probed(&probe, data, size, user))
        return NULL;
    return gf_image_decode_limited(data, size, name, &probe);
}

gf_image *gf_image_load_limited(const char *path)
{
    return gf_image_load_limited_hook(path, NULL, NULL);
}
