/* plan_dump.cu - every plan the conv2d planner makes, for a grid of
 * launches, printed on a machine without a GPU: `make plan-dump` before and
 * after a change to the planner (kernels/conv2d_plan.cu, conv2d_query.cu,
 * conv2d_weights.cu) or the tile rule (src/tile_rule.c), then diff; the
 * same output means the same plans.
 *
 * The launches: versions 0-4, five channel layouts, three borders, eight
 * image sizes, 42 tiles and 75 masks (the built-ins as the tool loads
 * them, variations of its gradient pairs and 3x3 masks, binomial and box
 * masks 3x3 to 31x31, even and one-row masks, random integer, fractional
 * and separable ones). For each, every conv2d_* query's
 * answer and, for versions 2-4, the full plan (variant, path, header and
 * weight bytes, block, grid, shared bytes); for each version, the tile the
 * tile rule picks. The device is plan_fake_device.c (an H100's limits), or
 * with --fail a device whose every query fails. A line per image size,
 * layout, border and mask holds a hash of its launches' lines;
 * PLAN_DUMP_LINES=1 prints the lines themselves. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "conv2d_planner.h"
extern "C" {
#include "builtin_masks.h"
#include "mask.h"
#include "tile_rule.h"
#include "util.h"
}

extern "C" int plan_dump_queries_fail;

extern "C" int plan_dump_variant_index(const void *entry)
{
    int count = 0;
    const conv2d_variant *variants = conv2d_variant_table(&count);
    for (int i = 0; i < count; i++)
        if (variants[i].entry == entry)
            return i;
    return -1;
}

static unsigned long long fnv(const void *p, size_t n, unsigned long long h = 1469598103934665603ULL)
{
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

struct mask {
    const char *name;
    int w, h, k, combine;
    std::vector<float> wts;
    float scale[4], offset[4];
    std::vector<float> row, col;
};

static mask make(const char *name, int w, int h, int k, int combine, std::vector<float> wts, float scale,
                 float offset = 0)
{
    mask m{name, w, h, k, combine, wts, {}, {}, {}, {}};
    for (int i = 0; i < 4; i++) m.scale[i] = scale, m.offset[i] = offset;
    return m;
}

/* A built-in mask (masks/), as the tool loads it; name must outlive it. */
static mask builtin(const char *name)
{
    gf_mask g = {0};
    if (gf_mask_load(name, &g) != 0) {
        fprintf(stderr, "plan-dump: %s\n", gf_error());
        exit(1);
    }
    const int taps = g.width * g.height;
    mask m{name, g.width, g.height, g.count, (int)g.combine, {}, {}, {}, {}, {}};
    for (int k = 0; k < g.count; k++) {
        for (int i = 0; i < taps; i++)
            m.wts.push_back((float)g.weights[k][i]);
        m.scale[k] = (float)g.scale[k];
        m.offset[k] = (float)g.offset[k];
    }
    if (g.separable && g.count == 1) {
        for (int i = 0; i < g.width; i++)
            m.row.push_back((float)g.row[i]);
        for (int i = 0; i < g.height; i++)
            m.col.push_back((float)g.column[i]);
    }
    return m;
}

static std::vector<float> outer(const std::vector<float> &c, const std::vector<float> &r)
{
    std::vector<float> v;
    for (float y : c)
        for (float x : r) v.push_back(y * x);
    return v;
}

static std::vector<float> binomial(int n)
{
    std::vector<float> v(1, 1.0f);
    for (int i = 1; i < n; i++) {
        std::vector<float> u(v.size() + 1, 0.0f);
        for (size_t j = 0; j < v.size(); j++) u[j] += v[j], u[j + 1] += v[j];
        v = u;
    }
    return v;
}

/* The masks less any that repeats an earlier one (the binomial and box
 * series hold built-ins again under other names). */
static std::vector<mask> without_repeats(const std::vector<mask> &all)
{
    auto same = [](const mask &a, const mask &b) {
        return a.w == b.w && a.h == b.h && a.k == b.k && a.combine == b.combine && a.wts == b.wts &&
               a.row == b.row && a.col == b.col && memcmp(a.scale, b.scale, sizeof a.scale) == 0 &&
               memcmp(a.offset, b.offset, sizeof a.offset) == 0;
    };
    std::vector<mask> kept;
    for (const mask &m : all) {
        bool repeat = false;
        for (const mask &k : kept)
            repeat = repeat || same(k, m);
        if (!repeat)
            kept.push_back(m);
    }
    return kept;
}

static std::vector<mask> masks()
{
    std::vector<mask> m;
    auto cat = [](std::vector<float> a, const std::vector<float> &b) { a.insert(a.end(), b.begin(), b.end()); return a; };
    std::vector<float> sx = {-1, 0, 1, -2, 0, 2, -1, 0, 1}, sy = {-1, -2, -1, 0, 0, 0, 1, 2, 1};
    std::vector<float> px = {-1, 0, 1, -1, 0, 1, -1, 0, 1}, py = {-1, -1, -1, 0, 0, 0, 1, 1, 1};
    std::vector<float> cx = {-3, 0, 3, -10, 0, 10, -3, 0, 3}, cy = {-3, -10, -3, 0, 0, 0, 3, 10, 3};
    for (int i = 0; i < gf_builtin_mask_count; i++)
        m.push_back(builtin(gf_builtin_masks[i].name));
    /* variations on them that no built-in is */
    m.push_back(make("prewitt-unscaled", 3, 3, 2, GF_COMBINE_MAGNITUDE, cat(px, py), 1));
    m.push_back(make("scharr-16", 3, 3, 2, GF_COMBINE_MAGNITUDE, cat(cx, cy), 16));
    m.push_back(make("sobel-max", 3, 3, 2, GF_COMBINE_MAX, cat(sx, sy), 1));
    m.push_back(make("sobel-x-unscaled", 3, 3, 1, GF_COMBINE_NONE, sx, 1));
    m.push_back(make("sobel-x-abs", 3, 3, 1, GF_COMBINE_MAGNITUDE, sx, 1));
    m.push_back(make("identity3", 3, 3, 1, GF_COMBINE_NONE, {0, 0, 0, 0, 1, 0, 0, 0, 0}, 1));
    m.push_back(make("big16", 3, 3, 1, GF_COMBINE_NONE, {300, -1, 0, -1, 1, 1, 0, 1, -300}, 1));
    m.push_back(make("frac3", 3, 3, 1, GF_COMBINE_NONE, {0.1f, 0.2f, 0.1f, 0.2f, 0.3f, 0.2f, 0.1f, 0.2f, 0.1f}, 1));
    for (int n = 3; n <= 31; n += 2) {
        std::vector<float> b = binomial(n), ones(n, 1.0f);
        float s = 0;
        for (float x : b) s += x;
        static char names[64][32];
        static int used = 0;
        snprintf(names[used], 32, "gauss%d", n);
        m.push_back(make(names[used++], n, n, 1, GF_COMBINE_NONE, outer(b, b), s * s));
        m.back().row = b, m.back().col = b;
        snprintf(names[used], 32, "box%d", n);
        m.push_back(make(names[used++], n, n, 1, GF_COMBINE_NONE, outer(ones, ones), (float)(n * n)));
        m.back().row = ones, m.back().col = ones;
    }
    m.push_back(make("box4-pow2", 4, 4, 1, GF_COMBINE_NONE, std::vector<float>(16, 1.0f), 16));
    m.push_back(make("box8-pow2", 8, 8, 1, GF_COMBINE_NONE, std::vector<float>(64, 1.0f), 64));
    m.push_back(make("row1x9", 9, 1, 1, GF_COMBINE_NONE, std::vector<float>(9, 1.0f), 9));
    m.push_back(make("col9x1", 1, 9, 1, GF_COMBINE_NONE, std::vector<float>(9, 1.0f), 9));
    unsigned seed = 12345;
    auto rnd = [&]() { seed = seed * 1103515245u + 12345u; return (int)((seed >> 16) % 11) - 5; };
    for (int n : {3, 5, 7, 15, 31}) {
        std::vector<float> v(n * n);
        for (auto &x : v) x = (float)rnd();
        static char names[16][32];
        static int used = 0;
        snprintf(names[used], 32, "rand%d", n);
        m.push_back(make(names[used++], n, n, 1, GF_COMBINE_NONE, v, 7));
        std::vector<float> f(n * n);
        for (auto &x : f) x = rnd() * 0.37f;
        snprintf(names[used], 32, "frac%d", n);
        m.push_back(make(names[used++], n, n, 1, GF_COMBINE_NONE, f, 1));
        std::vector<float> r(n), c(n);
        for (auto &x : r) x = (float)(rnd() + 6);
        for (auto &x : c) x = (float)(rnd() + 6);
        snprintf(names[used], 32, "sep%d", n);
        m.push_back(make(names[used++], n, n, 1, GF_COMBINE_NONE, outer(c, r), 1024));
        m.back().row = r, m.back().col = c;
    }
    return without_repeats(m);
}

/* A launch of mask m at one layout, border, image size and tile, with
 * the mask's facts made once, as the tool makes them; the device pointers
 * are fixed fake addresses (the source unaligned for some widths). */
static conv2d_launch launch_of(const mask &m, const conv2d_mask_facts *facts, const int (&layout)[2], int border,
                               const int (&size)[2], int tw, int th)
{
    conv2d_launch p;
    memset(&p, 0, sizeof p);
    p.src = (const unsigned char *)0x10000000 + size[0] % 3;
    p.dst = (unsigned char *)0x20000000;
    p.width = size[0], p.height = size[1];
    p.channels = layout[0], p.channels_filtered = layout[1];
    p.border = border;
    p.mask_width = m.w, p.mask_height = m.h, p.mask_count = m.k;
    p.combine = m.combine;
    p.weights = (const float *)0x30000000;
    memcpy(p.scale, m.scale, sizeof p.scale);
    memcpy(p.offset, m.offset, sizeof p.offset);
    p.tile_width = tw, p.tile_height = th;
    p.host_weights = m.wts.data();
    if (!m.row.empty()) {
        p.row_weights = (const float *)0x30010000, p.column_weights = (const float *)0x30020000;
        p.host_row_weights = m.row.data(), p.host_column_weights = m.col.data();
    }
    p.facts = facts;
    return p;
}

/* Launches whose conv2d_report (what -v prints, from the plan the launch
 * runs) differs from the separate answers and the full plan. */
static long report_mismatches = 0;

static void check_report(int version, const conv2d_launch *p, const conv2d_launch_report &r, const char *path,
                         const conv2d_plan *pl)
{
    const bool same =
        r.info.supported == conv2d_supports(version, p) &&
        (!r.info.supported ||
         (r.info.threads == conv2d_block_threads(version, p) && r.info.shared == conv2d_shared_bytes(version, p) &&
          r.info.rank == conv2d_path_rank(version, p) && r.info.entry == conv2d_kernel_for(version, p) &&
          (version < 2 || (r.grid_x == pl->grid.x && r.grid_y == pl->grid.y)) &&
          strcmp(r.path, path) == 0));
    report_mismatches += !same;
}

/* One line: every conv2d_* answer for the launch and, for versions 2-4,
 * its full plan. Returns the line's length. */
static int describe(int version, const conv2d_launch *p, char *line, size_t size)
{
    const int sup = conv2d_supports(version, p);
    int n = snprintf(line, size, "v%d t%dx%d sup%d", version, p->tile_width, p->tile_height, sup);
    conv2d_launch_report r;
    conv2d_report(version, p, &r);
    if (!sup) {
        check_report(version, p, r, "", NULL);
        return n;
    }
    char path[96] = "";
    if (version == 4 && !conv2d_direct_path(p, path, sizeof path))
        strcpy(path, "(null)");
    int pw = 0, ph = 0;
    const int preferred = conv2d_preferred_tile(version, p, &pw, &ph);
    n += snprintf(line + n, size - n, " di%d '%s' rank%d pt%d:%dx%d sh%zu sc%zu thr%d g%ux%u s%d k%d e%d",
                  version == 4 ? conv2d_direct_integer(p) : -9, path,
                  conv2d_path_rank(version, p), preferred, pw, ph, conv2d_shared_bytes(version, p),
                  conv2d_scratch_bytes(version, p), conv2d_block_threads(version, p), r.grid_x, r.grid_y, r.steps,
                  plan_dump_variant_index(conv2d_kernel_for(version, p)),
                  conv2d_kernel_entry(version, p->channels) != NULL);
    if (version < 2) {
        check_report(version, p, r, path, NULL);
        return n;
    }
    conv2d_plan pl;
    memset(static_cast<void *>(&pl), 0, sizeof pl);  /* block and grid 0 where no plan is made */
    const bool ok = conv2d_make_plan(version, p, &pl, true);
    check_report(version, p, r, path, &pl);
    const unsigned long long bytes = fnv(pl.w, sizeof(float) * pl.nw, fnv(&pl.h, sizeof pl.h));
    int listed = 0;
    n += snprintf(line + n, size - n, " plan%d v%ld path%d nw%d h%016llx b%ux%ux%u g%ux%u sh%zu", ok,
                  ok ? (long)(pl.v - conv2d_variant_table(&listed)) : -1, pl.path, pl.nw, bytes, pl.block.x, pl.block.y,
                  pl.block.z, pl.grid.x, pl.grid.y, pl.shared);
    return n;
}

/* The fake device's properties: the limits the tile rule reads. */
static cudaDeviceProp fake_device()
{
    cudaDeviceProp d;
    memset(static_cast<void *>(&d), 0, sizeof d);
    d.maxThreadsPerBlock = 1024;
    d.maxThreadsDim[0] = d.maxThreadsDim[1] = 1024;
    d.maxThreadsDim[2] = 64;
    d.sharedMemPerBlockOptin = 232448;
    d.maxThreadsPerMultiProcessor = 2048;
    strcpy(d.name, "fake H100");
    return d;
}

/* One line: the tile rule's answer for a launch without a tile. */
static int describe_tile_rule(const cudaDeviceProp *d, int version, conv2d_launch p, char *line, size_t size)
{
    p.tile_width = p.tile_height = 0;
    const int r = gf_tile_choose(d, version, &p);
    return snprintf(line, size, "v%d rule %d %dx%d", version, r, p.tile_width, p.tile_height);
}

int main(int argc, char **argv)
{
    plan_dump_queries_fail = argc > 1 && strcmp(argv[1], "--fail") == 0;
    const bool lines_wanted = getenv("PLAN_DUMP_LINES") != NULL;
    const int sizes[][2] = {{1, 1}, {7, 5}, {33, 17}, {640, 480}, {4000, 3000}, {8192, 8192}, {1000, 1}, {1, 1000}};
    const int tws[] = {8, 16, 32, 64, 128, 256, 512}, ths[] = {4, 8, 16, 32, 64, 128};
    const int layouts[][2] = {{1, 1}, {2, 2}, {3, 3}, {4, 4}, {4, 3}};
    const cudaDeviceProp device = fake_device();
    long count = 0;
    for (const mask &m : masks()) {
        conv2d_mask_facts facts;
        const conv2d_launch first = launch_of(m, NULL, layouts[0], 0, sizes[0], 0, 0);
        conv2d_mask_facts_make(&first, &facts);
        for (auto &layout : layouts)
            for (int border : {0, 2, 4})
                for (auto &size : sizes) {
                    unsigned long long hash = fnv(NULL, 0);
                    for (int version = 0; version <= 4; version++)
                        for (int tw : tws)
                            for (int th : ths) {
                                const conv2d_launch p = launch_of(m, &facts, layout, border, size, tw, th);
                                char line[1024];
                                const int n = describe(version, &p, line, sizeof line);
                                if (lines_wanted)
                                    puts(line);
                                hash = fnv(line, n, hash);
                                count++;
                            }
                    for (int version = 0; version <= 4; version++) {
                        char line[256];
                        const int n = describe_tile_rule(&device, version,
                                                         launch_of(m, &facts, layout, border, size, 0, 0),
                                                         line, sizeof line);
                        if (lines_wanted)
                            puts(line);
                        hash = fnv(line, n, hash);
                    }
                    printf("%s C%d/%d b%d %dx%d %016llx\n", m.name, layout[0], layout[1], border, size[0], size[1],
                           hash);
                }
    }
    fprintf(stderr, "%ld launches; conv2d_report differs from the separate answers on %ld\n", count,
            report_mismatches);
    return report_mismatches ? 1 : 0;
}
