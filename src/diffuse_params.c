/* diffuse_params.c - the value of --diffuse (diffuse_params.h). */
#include "diffuse_params.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

enum { ITERATIONS = 0, STEP, K, PERCENTILE, PARAMS };

static const char *const kind_names[] = {"heat", "pm-exp", "pm-rational"};
static const char *const keys[PARAMS] = {"iterations", "step", "k", "percentile"};
static const double low[PARAMS] = {1.0, 0.0, 0.0, 0.0};
static const double high[PARAMS] = {1e6, GF_DIFFUSE_MAX_STEP, 1e9, 100.0};

static int find_kind(const char *spec, size_t length)
{
    for (int i = 0; i < 3; i++)
        if (strlen(kind_names[i]) == length && strncmp(spec, kind_names[i], length) == 0)
            return i;
    return -1;
}

static int find_key(const char *key, size_t length, int count)
{
    for (int i = 0; i < count; i++)
        if (strlen(keys[i]) == length && strncmp(key, keys[i], length) == 0)
            return i;
    return -1;
}

static int bad_value(const char *spec, int at)
{
    if (at == STEP)
        gf_set_error("--diffuse=%s: step must be a number over 0 and at most %g (the explicit "
                     "scheme is unstable past it)", spec, GF_DIFFUSE_MAX_STEP);
    else
        gf_set_error("--diffuse=%s: %s must be a %s from %g to %g%s", spec, keys[at],
                     at == ITERATIONS ? "whole number" : "number", low[at], high[at],
                     at == K ? " (0: from the percentile)" : "");
    return -1;
}

/* One "key=value" or positional value into v[]. */
static int parse_item(const char *spec, char *item, int index, int count, int *keyed, double *v,
                      int *given)
{
    char *equals = strchr(item, '='), *text = equals ? equals + 1 : item;
    int at = index;
    if (equals) {
        *keyed = 1;
        at = find_key(item, (size_t)(equals - item), count);
    } else if (*keyed) {
        gf_set_error("--diffuse=%s: a value without its key after a 'key=value'", spec);
        return -1;
    }
    if (at < 0 || at >= count) {
        gf_set_error("--diffuse=%s: this kind takes %s", spec,
                     count == 2 ? "iterations, step" : "iterations, step, k, percentile");
        return -1;
    }
    char *end;
    errno = 0;
    const double value = strtod(text, &end);
    if (end == text || *end != '\0' || errno == ERANGE || !isfinite(value) || value < low[at] ||
        value > high[at] || (at == ITERATIONS && value != floor(value)) || (at == STEP && value == 0.0))
        return bad_value(spec, at);
    if (given[at]) {
        gf_set_error("--diffuse=%s: %s given twice", spec, keys[at]);
        return -1;
    }
    given[at] = 1;
    v[at] = value;
    return 0;
}

static int parse_values(const char *spec, const char *values, int count, double *v)
{
    int given[PARAMS] = {0}, keyed = 0, index = 0, status = 0;
    char *copy = strdup(values);
    if (!copy) {
        gf_set_error("out of memory");
        return -1;
    }
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item && status == 0; item = strtok_r(NULL, ",", &save))
        status = parse_item(spec, item, index++, count, &keyed, v, given);
    free(copy);
    return status;
}

int gf_diffuse_parse(const char *spec, gf_diffuse *how)
{
    const char *colon = strchr(spec, ':');
    const size_t length = colon ? (size_t)(colon - spec) : strlen(spec);
    const int kind = find_kind(spec, length);
    if (kind < 0) {
        gf_set_error("--diffuse=%s: unknown kind '%.*s' (heat, pm-exp, pm-rational)", spec,
                     (int)length, spec);
        return -1;
    }
    double v[PARAMS] = {GF_DIFFUSE_DEFAULT_ITERATIONS, GF_DIFFUSE_DEFAULT_STEP, 0.0,
                        GF_DIFFUSE_DEFAULT_PERCENTILE};
    if (parse_values(spec, colon ? colon + 1 : "", kind == GF_DIFFUSE_HEAT ? 2 : PARAMS, v) < 0)
        return -1;
    *how = (gf_diffuse){.kind = (gf_diffuse_kind)kind, .iterations = (int)v[ITERATIONS],
                        .step = v[STEP], .k = v[K], .percentile = v[PERCENTILE]};
    return 0;
}
