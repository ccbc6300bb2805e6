/* mask.c - parse, find and list mask files (libvips matrix format). */
#include "mask.h"
#include "builtin_masks.h"
#include "mask_params.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "util.h"

#ifndef GF_MASKS_INSTALL_DIR
#define GF_MASKS_INSTALL_DIR "/usr/local/share/gpufilter/masks"
#endif

#define GF_MASK_FILE_MAX (256 << 20)  /* room for GF_MASK_MAX_TAPS written out */

static const char *const combine_names[] = {"none", "magnitude", "max", "min", "sum", "unsharp"};

const char *gf_combine_name(gf_combine combine)
{
    return (unsigned)combine < sizeof combine_names / sizeof combine_names[0] ? combine_names[combine]
                                                                           : "unknown";
}

/* ---- storage ------------------------------------------------------------- */

void gf_mask_release(gf_mask *mask)
{
    for (int k = 0; k < GF_MASK_MAX_MATRICES; k++) {
        free(mask->weights[k]);
        mask->weights[k] = NULL;
    }
    free(mask->row);
    free(mask->column);
    mask->row = mask->column = NULL;
    mask->count = 0;
}

int gf_mask_allocate(gf_mask *mask, int width, int height, int count)
{
    const size_t taps = (size_t)width * (size_t)height;
    mask->width = width;
    mask->height = height;
    mask->row = calloc((size_t)width, sizeof(double));
    mask->column = calloc((size_t)height, sizeof(double));
    int failed = !mask->row || !mask->column;
    for (int k = 0; k < count && !failed; k++)
        failed = !(mask->weights[k] = calloc(taps, sizeof(double)));
    if (failed) {
        gf_mask_release(mask);
        gf_set_error("out of memory for a %dx%d mask", width, height);
        return -1;
    }
    return 0;
}

int gf_mask_copy(gf_mask *dst, const gf_mask *src)
{
    *dst = *src;
    for (int k = 0; k < GF_MASK_MAX_MATRICES; k++)
        dst->weights[k] = NULL;
    dst->row = dst->column = NULL;
    if (gf_mask_allocate(dst, src->width, src->height, src->count) < 0)
        return -1;
    const size_t taps = (size_t)src->width * (size_t)src->height;
    for (int k = 0; k < src->count; k++)
        memcpy(dst->weights[k], src->weights[k], taps * sizeof(double));
    memcpy(dst->row, src->row, (size_t)src->width * sizeof(double));
    memcpy(dst->column, src->column, (size_t)src->height * sizeof(double));
    return 0;
}

int gf_mask_is_large(const gf_mask *mask)
{
    return mask->width > GF_MASK_SMALL_SIZE || mask->height > GF_MASK_SMALL_SIZE ||
           mask->combine == GF_COMBINE_UNSHARP;
}

/* ---- parsing ------------------------------------------------------------- */

typedef struct {
    const char *name;
    int line;
    size_t text_left;  /* bytes of the text after this line */
} parse_where;

/* Split a line into numbers; returns the count, or -1 on a word that is
 * not a finite number (its text is left in *bad). */
static int parse_numbers(char *line, double *out, int max, char **bad)
{
    int n = 0;
    for (char *word = strtok(line, " \t\r,"); word; word = strtok(NULL, " \t\r,")) {
        char *end;
        errno = 0;
        double v = strtod(word, &end);
        if (*end != '\0' || end == word || !isfinite(v) || errno == ERANGE) {
            *bad = word;
            return -1;
        }
        if (n < max)
            out[n] = v;
        n++;
    }
    return n;
}

static int parse_combine(const char *word, gf_combine *combine)
{
    for (int i = GF_COMBINE_MAGNITUDE; i <= GF_COMBINE_SUM; i++)
        if (strcmp(word, combine_names[i]) == 0) {
            *combine = (gf_combine)i;
            return 0;
        }
    return -1;
}

static int is_integer(double v)
{
    return v == floor(v);
}

#define LARGE_MATRIX_TAPS 65536

static int parse_header(const double *v, int n, parse_where at, gf_mask *mask)
{
    if (n < 2 || n > 4) {
        gf_set_error("%s:%d: a matrix header is 'width height [scale [offset]]', found %d numbers",
                     at.name, at.line, n);
        return -1;
    }
    if (!is_integer(v[0]) || !is_integer(v[1]) || v[0] < 1 || v[1] < 1 ||
        v[0] > GF_MASK_MAX_SIZE || v[1] > GF_MASK_MAX_SIZE) {
        gf_set_error("%s:%d: matrix size %gx%g: width and height must be whole numbers from 1 to %d",
                     at.name, at.line, v[0], v[1], GF_MASK_MAX_SIZE);
        return -1;
    }
    int width = (int)v[0], height = (int)v[1];
    if (mask->count > 0 && (width != mask->width || height != mask->height)) {
        gf_set_error("%s:%d: matrix %d is %dx%d but the first is %dx%d; a mask's matrices share one size",
                     at.name, at.line, mask->count + 1, width, height, mask->width, mask->height);
        return -1;
    }
    if (mask->count == GF_MASK_MAX_MATRICES) {
        gf_set_error("%s:%d: more than %d matrices", at.name, at.line, GF_MASK_MAX_MATRICES);
        return -1;
    }
    double scale = n > 2 ? v[2] : 1.0, offset = n > 3 ? v[3] : 0.0;
    if (scale == 0.0) {
        gf_set_error("%s:%d: scale must not be zero", at.name, at.line);
        return -1;
    }
    /* a large matrix's memory only once the text could hold its rows: a
     * number and a separator a tap (a short file's rows are counted later) */
    const size_t taps = (size_t)width * (size_t)height;
    if (taps > LARGE_MATRIX_TAPS && at.text_left < 2 * taps - 1) {
        gf_set_error("%s:%d: a %dx%d matrix needs at least %zu more bytes of text; the file has %zu",
                     at.name, at.line, width, height, 2 * taps - 1, at.text_left);
        return -1;
    }
    if (mask->count == 0 && gf_mask_allocate(mask, width, height, 0) < 0)
        return -1;
    if (!(mask->weights[mask->count] = calloc(taps, sizeof(double)))) {
        gf_set_error("%s:%d: out of memory for a %dx%d matrix", at.name, at.line, width, height);
        return -1;
    }
    mask->scale[mask->count] = scale;
    mask->offset[mask->count] = offset;
    return 0;
}

/* Test whether the one matrix is column x row, and if so store the factors:
 * the row is the largest-magnitude row of the matrix, each column entry the
 * ratio that reproduces it. */
void gf_mask_find_factors(gf_mask *mask)
{
    mask->separable = 0;
    if (mask->count != 1)
        return;
    const double *w = mask->weights[0];
    int pivot_y = 0, pivot_x = 0;
    for (int i = 0; i < mask->width * mask->height; i++)
        if (fabs(w[i]) > fabs(w[pivot_y * mask->width + pivot_x])) {
            pivot_y = i / mask->width;
            pivot_x = i % mask->width;
        }
    double pivot = w[pivot_y * mask->width + pivot_x];
    if (pivot == 0.0)
        return;
    for (int x = 0; x < mask->width; x++)
        mask->row[x] = w[pivot_y * mask->width + x];
    for (int y = 0; y < mask->height; y++)
        mask->column[y] = w[y * mask->width + pivot_x] / pivot;
    for (int y = 0; y < mask->height; y++)
        for (int x = 0; x < mask->width; x++) {
            double want = w[y * mask->width + x];
            double got = mask->column[y] * mask->row[x];
            if (fabs(got - want) > 1e-12 * (fabs(pivot) + 1.0))
                return;
        }
    mask->separable = 1;
}

/* The largest |result| a matrix can give, over pixels of 0..255, must be a
 * finite number far inside float's range: the GPU sums in float, a
 * magnitude squares it, and an overflow would turn into infinity minus
 * infinity, a NaN that no byte stands for. Such a mask is refused. */
#define GF_MASK_MAX_RESULT 1e15

static int check_result_range(const gf_mask *mask, int k, parse_where at)
{
    double weight_sum = 0.0;
    for (int i = 0; i < mask->width * mask->height; i++)
        weight_sum += fabs(mask->weights[k][i]);
    double bound = weight_sum * 255.0 / fabs(mask->scale[k]) + fabs(mask->offset[k]);
    if (isfinite(bound) && bound <= GF_MASK_MAX_RESULT)
        return 0;
    if (!at.name)
        return -1;
    gf_set_error("%s:%d: matrix %d's weights / scale + offset can reach %g, past the limit of %g "
                 "(results are clamped to 0..255; scale the weights down)",
                 at.name, at.line, k + 1, bound, GF_MASK_MAX_RESULT);
    return -1;
}

static void set_description(gf_mask *mask, const char *comment)
{
    while (*comment == '#' || *comment == ' ' || *comment == '\t')
        comment++;
    snprintf(mask->description, sizeof mask->description, "%s", comment);
    size_t n = strlen(mask->description);
    while (n > 0 && (mask->description[n - 1] == '\r' || mask->description[n - 1] == ' '))
        mask->description[--n] = '\0';
}

int gf_mask_parse(const char *text, const char *name, gf_mask *mask)
{
    memset(mask, 0, sizeof *mask);
    snprintf(mask->name, sizeof mask->name, "%s", name);
    char *copy = strdup(text);
    double *v = malloc(GF_MASK_MAX_SIZE * sizeof *v);  /* one line's numbers */
    if (!copy || !v) {
        free(copy);
        free(v);
        gf_set_error("%s: out of memory", name);
        return -1;
    }
    parse_where at = {name, 0, 0};
    const size_t length = strlen(copy);
    int rows_left = 0, has_combine = 0, status = -1;
    char *save = NULL;
    /* strtok_r with "\n" would merge blank lines and lose the line count */
    for (char *line = copy; line; line = save) {
        save = strchr(line, '\n');
        if (save)
            *save++ = '\0';
        at.line++;
        at.text_left = save ? length - (size_t)(save - copy) : 0;
        char *p = line + strspn(line, " \t\r");
        if (*p == '#') {
            /* the first comment line describes the mask */
            if (mask->description[0] == '\0')
                set_description(mask, p);
            continue;
        }
        if (*p == '\0')
            continue;
        if (strncmp(p, "combine", 7) == 0 && (p[7] == ' ' || p[7] == '\t')) {
            char *word = strtok(p + 7, " \t\r");
            char *extra = word ? strtok(NULL, " \t\r") : NULL;
            if (rows_left > 0 || mask->count > 0 || has_combine || !word || extra || parse_combine(word, &mask->combine) < 0) {
                gf_set_error("%s:%d: expected 'combine magnitude|max|min|sum' once, before the matrices",
                             name, at.line);
                goto done;
            }
            has_combine = 1;
            continue;
        }
        char *bad = NULL;
        int n = parse_numbers(p, v, GF_MASK_MAX_SIZE, &bad);
        if (n < 0) {
            gf_set_error("%s:%d: '%s' is not a finite number", name, at.line, bad);
            goto done;
        }
        if (rows_left == 0) {
            if (parse_header(v, n, at, mask) < 0)
                goto done;
            rows_left = mask->height;
            continue;
        }
        if (n != mask->width) {
            gf_set_error("%s:%d: expected %d numbers in a row of matrix %d, found %d",
                         name, at.line, mask->width, mask->count + 1, n);
            goto done;
        }
        int y = mask->height - rows_left;
        memcpy(&mask->weights[mask->count][y * mask->width], v, (size_t)n * sizeof v[0]);
        if (--rows_left == 0) {
            if (check_result_range(mask, mask->count, at) < 0)
                goto done;
            mask->count++;
        }
    }
    if (rows_left > 0) {
        gf_set_error("%s:%d: the file ends %d row%s short of matrix %d", name, at.line, rows_left,
                     rows_left == 1 ? "" : "s", mask->count + 1);
        goto done;
    }
    if (mask->count == 0) {
        gf_set_error("%s: no matrix found (expected a 'width height [scale [offset]]' line)", name);
        goto done;
    }
    if (mask->count > 1 && !has_combine) {
        gf_set_error("%s: %d matrices need a 'combine magnitude|max|min|sum' line", name, mask->count);
        goto done;
    }
    gf_mask_find_factors(mask);
    status = 0;
done:
    if (status < 0)
        gf_mask_release(mask);
    free(copy);
    free(v);
    return status;
}

/* ---- files and folders -------------------------------------------------- */

static char *read_text_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        gf_set_error("%s: %s", path, strerror(errno));
        return NULL;
    }
    char *text = malloc(GF_MASK_FILE_MAX + 1);
    size_t n = text ? fread(text, 1, GF_MASK_FILE_MAX + 1, f) : 0;
    int failed = !text || ferror(f);
    fclose(f);
    if (failed) {
        gf_set_error("%s: cannot read the mask file", path);
        free(text);
        return NULL;
    }
    if (n > GF_MASK_FILE_MAX || memchr(text, '\0', n)) {
        gf_set_error("%s: not a mask file (binary, or over %d bytes)", path, GF_MASK_FILE_MAX);
        free(text);
        return NULL;
    }
    text[n] = '\0';
    return text;
}

/* "dir/sobel.mask" -> "sobel" */
static void mask_name_of(const char *path, char *name, size_t size)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(name, size, "%s", base);
    size_t n = strlen(name);
    if (n > 5 && strcmp(name + n - 5, ".mask") == 0)
        name[n - 5] = '\0';
}

int gf_mask_load_file(const char *path, gf_mask *mask)
{
    memset(mask, 0, sizeof *mask);  /* empty on every failure */
    char *text = read_text_file(path);
    if (!text)
        return -1;
    char name[64];
    mask_name_of(path, name, sizeof name);
    int status = gf_mask_parse(text, path, mask);
    if (status == 0)
        snprintf(mask->name, sizeof mask->name, "%s", name);
    free(text);
    return status;
}

static int visit_folder(const char *folder, int (*visit)(const char *, void *), void *user)
{
    DIR *d = opendir(folder);
    if (!d)
        return 0;
    closedir(d);
    return visit(folder, user);
}

void gf_mask_folders(int (*visit)(const char *folder, void *user), void *user)
{
    char exe[PATH_MAX], folder[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash)
            *slash = '\0';
        static const char *const beside[] = {"masks", "../masks", "../share/gpufilter/masks"};
        for (size_t i = 0; i < sizeof beside / sizeof beside[0]; i++) {
            snprintf(folder, sizeof folder, "%s/%s", exe, beside[i]);
            if (visit_folder(folder, visit, user))
                return;
        }
    }
    if (visit_folder(GF_MASKS_INSTALL_DIR, visit, user))
        return;
    const char *env = getenv("GPUFILTER_MASKS");
    if (!env)
        return;
    char *paths = strdup(env);
    char *save = NULL;
    for (char *p = paths ? strtok_r(paths, ":", &save) : NULL; p; p = strtok_r(NULL, ":", &save))
        if (visit_folder(p, visit, user))
            break;
    free(paths);
}

typedef struct {
    const char *name;
    char path[PATH_MAX + 128];
    int found;
} find_request;

static int find_in_folder(const char *folder, void *user)
{
    find_request *req = user;
    snprintf(req->path, sizeof req->path, "%s/%s.mask", folder, req->name);
    req->found = access(req->path, F_OK) == 0;
    return req->found;
}

/* A value with a '/', or ending in .mask (or libvips's .mat), is a file. */
static int is_path(const char *s)
{
    size_t n = strlen(s);
    return strchr(s, '/') != NULL || (n > 5 && strcmp(s + n - 5, ".mask") == 0) ||
           (n > 4 && strcmp(s + n - 4, ".mat") == 0);
}

static const gf_builtin_mask *find_builtin(const char *name)
{
    for (int i = 0; i < gf_builtin_mask_count; i++)
        if (strcmp(gf_builtin_masks[i].name, name) == 0)
            return &gf_builtin_masks[i];
    return NULL;
}

static int load_builtin(const gf_builtin_mask *builtin, gf_mask *mask)
{
    char where[96];
    snprintf(where, sizeof where, "built-in %s", builtin->name);
    if (gf_mask_parse(builtin->text, where, mask) < 0)
        return -1;
    snprintf(mask->name, sizeof mask->name, "%s", builtin->name);
    return 0;
}

int gf_mask_load(const char *name_or_path, gf_mask *mask)
{
    memset(mask, 0, sizeof *mask);  /* empty on every failure */
    if (is_path(name_or_path))
        return gf_mask_load_file(name_or_path, mask);
    if (strchr(name_or_path, ':'))
        return gf_mask_from_params(name_or_path, mask) > 0 ? 0 : -1;
    if (name_or_path[0] == '\0' || name_or_path[0] == '.') {
        gf_set_error("'%s' is not a mask name", name_or_path);
        return -1;
    }
    find_request req = {name_or_path, "", 0};
    gf_mask_folders(find_in_folder, &req);
    if (req.found)
        return gf_mask_load_file(req.path, mask);
    const gf_builtin_mask *builtin = find_builtin(name_or_path);
    if (builtin)
        return load_builtin(builtin, mask);
    const int parametric = gf_mask_from_params(name_or_path, mask);
    if (parametric != 0)
        return parametric > 0 ? 0 : -1;
    gf_set_error("no mask named '%s' (see --list-masks; a file path needs a '/' or '.mask')",
                 name_or_path);
    return -1;
}

/* ---- listing -------------------------------------------------------------- */

typedef struct {
    char name[64];
    char line[256];
} list_entry;

typedef struct {
    list_entry *entries;
    size_t count, capacity;
    int failed;
    gf_mask *mask;        /* where each listed mask is loaded */
    char searched[2048];  /* the folders looked in, for the listing's first line */
} list_state;

static int already_listed(const list_state *s, const char *name)
{
    for (size_t i = 0; i < s->count; i++)
        if (strcmp(s->entries[i].name, name) == 0)
            return 1;
    return 0;
}

/* Add the listing's line for one mask: 'loaded' tells whether loading it
 * into *mask worked (else gf_error() says why); 'source' is where it is. */
static void list_mask(list_state *s, const char *name, const char *source, const gf_mask *mask,
                      int loaded)
{
    if (s->count == s->capacity && !(s->entries = realloc(s->entries,
                                         (s->capacity = s->capacity * 2 + 16) * sizeof *s->entries))) {
        s->failed = 1;
        return;
    }
    list_entry *entry = &s->entries[s->count++];
    snprintf(entry->name, sizeof entry->name, "%s", name);
    if (loaded)
        snprintf(entry->line, sizeof entry->line, "%-12s %2dx%-2d  %s  (%s)", name, mask->width,
                 mask->height, mask->description, source);
    else
        snprintf(entry->line, sizeof entry->line, "%-12s invalid: %s", name,
                 gf_error() + strlen("gpufilter: "));
}

static int list_folder(const char *folder, void *user)
{
    list_state *s = user;
    size_t used = strlen(s->searched);
    snprintf(s->searched + used, sizeof s->searched - used, "%s%s", used ? ", " : "", folder);
    DIR *d = opendir(folder);
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d)) != NULL && !s->failed;) {
        size_t n = strlen(e->d_name);
        if (n <= 5 || strcmp(e->d_name + n - 5, ".mask") != 0)
            continue;
        char name[64], path[PATH_MAX + 320];
        mask_name_of(e->d_name, name, sizeof name);
        if (already_listed(s, name))
            continue;
        snprintf(path, sizeof path, "%s/%s", folder, e->d_name);
        list_mask(s, name, folder, s->mask, gf_mask_load_file(path, s->mask) == 0);
        gf_mask_release(s->mask);
    }
    closedir(d);
    return 0;
}

static int compare_entries(const void *a, const void *b)
{
    return strcmp(((const list_entry *)a)->name, ((const list_entry *)b)->name);
}

int gf_mask_list(void)
{
    list_state s = {.mask = calloc(1, sizeof(gf_mask))};
    s.failed = !s.mask;
    if (!s.failed)
        gf_mask_folders(list_folder, &s);
    for (int i = 0; i < gf_builtin_mask_count && !s.failed; i++)
        if (!already_listed(&s, gf_builtin_masks[i].name)) {
            list_mask(&s, gf_builtin_masks[i].name, "built-in", s.mask,
                      load_builtin(&gf_builtin_masks[i], s.mask) == 0);
            gf_mask_release(s.mask);
        }
    free(s.mask);
    if (s.failed) {
        free(s.entries);
        gf_set_error("out of memory listing masks");
        return -1;
    }
    qsort(s.entries, s.count, sizeof *s.entries, compare_entries);
    printf("# masks from: %s%sthe %d built in\n", s.searched, s.searched[0] ? ", then " : "",
           gf_builtin_mask_count);
    for (size_t i = 0; i < s.count; i++)
        printf("%s\n", s.entries[i].line);
    gf_mask_params_list();
    free(s.entries);
    return (int)s.count;
}
