/* batch.c - a batch's plan: inputs, shards, output names, collisions
 * (batch.h); batch_run.c runs it. */
#include "batch.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "image.h"
#include "util.h"

unsigned gf_batch_shard_of(const char *path, unsigned count)
{
    uint64_t h = 1469598103934665603ull;  /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)path; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    return (unsigned)(h % count);
}

static const char *extension_for(gf_format format)
{
    switch (format) {
    case GF_FORMAT_JPEG: return "jpg";
    case GF_FORMAT_BMP: return "bmp";
    case GF_FORMAT_TGA: return "tga";
    default: return "png";
    }
}

char *gf_batch_output_name(const char *dir, const char *input, const char *suffix,
                           gf_format format)
{
    const char *base = strrchr(input, '/');
    base = base ? base + 1 : input;
    const char *dot = strrchr(base, '.');
    size_t stem = dot && dot != base ? (size_t)(dot - base) : strlen(base);
    const char *ext = format != GF_FORMAT_NONE ? extension_for(format)
                      : dot && gf_format_from_name(dot + 1) != GF_FORMAT_NONE ? dot + 1
                                                                              : "png";
    size_t size = strlen(dir) + 1 + stem + strlen(suffix) + 1 + strlen(ext) + 1;
    char *name = malloc(size);
    if (name)
        snprintf(name, size, "%s/%.*s%s.%s", dir, (int)stem, base, suffix, ext);
    return name;
}

typedef struct {
    char **paths;
    size_t count, capacity;
} path_list;

static int add_path(path_list *list, const char *path)
{
    if (list->count == list->capacity) {
        size_t capacity = list->capacity * 2 + 64;
        char **paths = realloc(list->paths, capacity * sizeof *paths);
        if (!paths)
            return -1;
        list->paths = paths;
        list->capacity = capacity;
    }
    if (!(list->paths[list->count] = strdup(path)))
        return -1;
    list->count++;
    return 0;
}

static void free_paths(path_list *list)
{
    for (size_t i = 0; i < list->count; i++)
        free(list->paths[i]);
    free(list->paths);
}

/* One path per line; blank lines are skipped, a trailing '\r' dropped. */
static int read_file_list(const char *from, path_list *list)
{
    FILE *f = strcmp(from, "-") == 0 ? stdin : fopen(from, "r");
    if (!f) {
        gf_set_error("%s: %s", from, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t size = 0;
    ssize_t n;
    int status = 0;
    while ((n = getline(&line, &size, f)) >= 0) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (n > 0 && add_path(list, line) < 0) {
            gf_set_error("out of memory reading %s", from);
            status = -1;
            break;
        }
    }
    if (status == 0 && ferror(f)) {
        gf_set_error("%s: cannot read the file list", from);
        status = -1;
    }
    free(line);
    if (f != stdin)
        fclose(f);
    return status;
}

static int make_folder(const char *dir)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) {
        gf_set_error("%s: path too long", dir);
        return -1;
    }
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        if (mkdir(path, 0777) < 0 && errno != EEXIST) {
            gf_set_error("%s: cannot create the output folder: %s", dir, strerror(errno));
            return -1;
        }
        *p = c;
        if (c == '\0')
            break;
    }
    struct stat st;
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        gf_set_error("%s: not a folder", dir);
        return -1;
    }
    return 0;
}

typedef struct {
    const char *key;  /* what is compared */
    size_t item;      /* which batch item it belongs to */
} keyed;

static int compare_keyed(const void *a, const void *b)
{
    return strcmp(((const keyed *)a)->key, ((const keyed *)b)->key);
}

/* Two inputs with one output name. */
static int check_shared_outputs(const gf_batch *batch)
{
    size_t n = batch->count;
    keyed *outputs = calloc(n ? n : 1, sizeof *outputs);
    if (!outputs) {
        gf_set_error("out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        outputs[i] = (keyed){batch->items[i].output, i};
    qsort(outputs, n, sizeof *outputs, compare_keyed);
    int status = 0;
    for (size_t i = 1; i < n && status == 0; i++)
        if (strcmp(outputs[i].key, outputs[i - 1].key) == 0) {
            gf_set_error("%s and %s would both be written to %s; use separate runs or --suffix",
                         batch->items[outputs[i - 1].item].input, batch->items[outputs[i].item].input,
                         outputs[i].key);
            status = -1;
        }
    free(outputs);
    return status;
}

typedef struct {
    dev_t device;
    ino_t inode;
    size_t item;
} file_id;

static int compare_file_id(const void *a, const void *b)
{
    const file_id *x = a, *y = b;
    if (x->device != y->device)
        return x->device < y->device ? -1 : 1;
    return x->inode < y->inode ? -1 : x->inode > y->inode;
}

/* An output that is an input: the same file, compared by device and inode,
 * so that a symbolic or hard link to an input counts as the input. An
 * output that does not exist yet cannot be one. */
static int check_outputs_onto_inputs(const gf_batch *batch)
{
    size_t n = batch->count, known = 0;
    file_id *inputs = calloc(n ? n : 1, sizeof *inputs);
    if (!inputs) {
        gf_set_error("out of memory");
        return -1;
    }
    struct stat st;
    for (size_t i = 0; i < n; i++)
        if (stat(batch->items[i].input, &st) == 0)
            inputs[known++] = (file_id){st.st_dev, st.st_ino, i};
    qsort(inputs, known, sizeof *inputs, compare_file_id);
    int status = 0;
    for (size_t i = 0; i < n && status == 0; i++) {
        if (stat(batch->items[i].output, &st) < 0)
            continue;
        file_id probe = {st.st_dev, st.st_ino, 0};
        const file_id *hit = bsearch(&probe, inputs, known, sizeof *inputs, compare_file_id);
        if (hit) {
            gf_set_error("%s: the output of %s would overwrite the input %s",
                         batch->items[i].output, batch->items[i].input,
                         batch->items[hit->item].input);
            status = -1;
        }
    }
    free(inputs);
    return status;
}

static int check_collisions(const gf_batch *batch)
{
    return check_shared_outputs(batch) < 0 || check_outputs_onto_inputs(batch) < 0 ? -1 : 0;
}

int gf_batch_plan(const gf_job *job, char **inputs, int input_count, gf_batch *batch)
{
    memset(batch, 0, sizeof *batch);
    path_list all = {0};
    for (int i = 0; i < input_count; i++)
        if (add_path(&all, inputs[i]) < 0) {
            free_paths(&all);
            gf_set_error("out of memory");
            return GF_EXIT_FILE;
        }
    if (job->files_from && read_file_list(job->files_from, &all) < 0) {
        free_paths(&all);
        return GF_EXIT_FILE;
    }
    if (job->output_dir && make_folder(job->output_dir) < 0) {
        free_paths(&all);
        return GF_EXIT_FILE;
    }
    batch->items = calloc(all.count ? all.count : 1, sizeof *batch->items);
    if (!batch->items) {
        free_paths(&all);
        gf_set_error("out of memory");
        return GF_EXIT_FILE;
    }
    for (size_t i = 0; i < all.count; i++) {
        if (job->shard_count > 1 &&
            gf_batch_shard_of(all.paths[i], (unsigned)job->shard_count) != (unsigned)job->shard_index) {
            free(all.paths[i]);
            continue;
        }
        gf_batch_item *item = &batch->items[batch->count++];
        item->input = all.paths[i];
        if (job->output_dir &&
            !(item->output = gf_batch_output_name(job->output_dir, item->input,
                                                  job->suffix ? job->suffix : "", job->format))) {
            free(all.paths);
            gf_batch_free(batch);
            gf_set_error("out of memory");
            return GF_EXIT_FILE;
        }
    }
    free(all.paths);
    if (job->output_dir && check_collisions(batch) < 0) {
        gf_batch_free(batch);
        return GF_EXIT_USAGE;
    }
    return 0;
}

void gf_batch_free(gf_batch *batch)
{
    for (size_t i = 0; i < batch->count; i++) {
        free(batch->items[i].input);
        free(batch->items[i].output);
    }
    free(batch->items);
    memset(batch, 0, sizeof *batch);
}
