/* gpufilter_bench.cu - the kernel benchmark (make bench -> build/gpufilter-bench).
 *
 * For every kernel family (conv2d, histogram, reduce, scan, LUT apply, the
 * equalize chain) and every version on its ladder, on every size and channel
 * count asked for:
 *   1. the output on a fresh random input is checked against the CPU
 *      reference (backend_cpu.c) on that input; a mismatch ends the run with
 *      exit status 1 (conv2d: bands of 16 rows at the top, middle and bottom,
 *      since the double-precision reference is slow on big images);
 *   2. it is timed with CUDA events: the median of --reps runs after
 *      --warmup untimed ones, the input rotated through buffers that together
 *      exceed twice the L2, so that no run reads what the previous one left
 *      in the cache (at most 64 buffers: images under 1/32 of the L2 are
 *      timed partly from it); each run launched alone on an idle stream
 *      (the launch latency counted, as a call of the tool pays it) or, with
 *      --timing queued, the runs back to back (the device's time alone);
 *   3. it is reported as ms, Gpx/s, GB/s (each input byte read once, each
 *      output byte written once) and as a percentage of the device copy
 *      bandwidth measured first in the same run on the same buffers, beside
 *      the peer on the same input where there is one: NPP nppiFilterBorder
 *      for conv2d, CUB for histogram, reduce and scan.
 *
 * It links the same kernel objects as the tool (build/obj/conv2d.o ...) and
 * the CPU reference objects. NPP is optional (GF_HAVE_NPP, set by the
 * Makefile when $(CUDA_HOME)/include/npp.h exists); CUB comes with the
 * toolkit. See bench/RESULTS.md for the byte budget of each family. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include <cub/device/device_histogram.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cuda/std/array>
#include <cuda/std/functional>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#ifdef GF_HAVE_NPP
#include <npp.h>
#endif

#include "kernels.h"
#include "conv2d_large.h"
extern "C" {
#include "backend.h"
#include "cpu_conv.h"
#include "cuda_fft.h"
#include "cufft_dl.h"
#include "mask.h"
#include "tile_rule.h"
#include "util.h"
}

static const char *const PROG = "gpufilter-bench";

/* ---- errors ------------------------------------------------------------------ */

[[noreturn]] static void die(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void die(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", PROG);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(status);
}

#define CHECK(call, what)                                                                     \
    do {                                                                                      \
        cudaError_t err_ = (call);                                                            \
        if (err_ != cudaSuccess)                                                              \
            die(1, "CUDA error while %s: %s", std::string(what).c_str(), cudaGetErrorString(err_)); \
    } while (0)

static std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static std::string format(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return buf;
}

/* gf_error() messages start with "gpufilter: "; ours with the bench's name. */
static const char *library_error(void)
{
    const char *e = gf_error();
    const char *prefix = "gpufilter: ";
    return strncmp(e, prefix, strlen(prefix)) == 0 ? e + strlen(prefix) : e;
}

/* ---- options ------------------------------------------------------------------- */

enum {
    K_CONV2D = 1,
    K_HISTOGRAM = 2,
    K_REDUCE = 4,
    K_SCAN = 8,
    K_LUT = 16,
    K_EQUALIZE = 32,
    K_ALL = 63,
};

static const struct {
    const char *name;
    unsigned bit;
} FAMILIES[] = {
    {"conv2d", K_CONV2D}, {"histogram", K_HISTOGRAM}, {"reduce", K_REDUCE},
    {"scan", K_SCAN},     {"lut", K_LUT},             {"equalize", K_EQUALIZE},
};

static const char *const DEFAULT_MASKS[] = {"box3",     "gaussian3",  "sobel", "gaussian5",
                                            "gaussian7", "box9",      "random15", "box15",
                                            "gaussian15", "box31",    "gaussian31"};

struct Size {
    int width, height;
};

struct Options {
    std::vector<Size> sizes;
    std::vector<int> channels;
    std::vector<std::string> masks;
    unsigned kernels = 0;
    int reps = 25;
    int warmup = 3;
    int tile_width = 0, tile_height = 0;   /* --tile WxH: every conv2d version ... */
    std::vector<int> version_tile;          /* ... unless V:WxH set one: v*2, v*2+1 */
    bool tile_given = false;                /* else the tool's tile rule */
    unsigned versions = ~0u;                /* --versions: bit v for conv2d version v */
    int device = 0;
    bool queued = false;                    /* --timing queued */
    std::string json;
};

static Options g_opt;

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: %s [OPTION]...\n"
            "Time every version of every gpufilter kernel (conv2d, histogram, reduce, scan,\n"
            "LUT apply, the equalize chain) after checking its output against the CPU\n"
            "reference; report ms, Gpx/s, GB/s, %% of the device copy bandwidth measured in\n"
            "the same run, and the peer (NPP, CUB) on the same input.\n"
            "\n"
            "  --size WxH        image size; repeatable (default 8192x8192)\n"
            "  --channels N      1 or 4; repeatable (default: both)\n"
            "  --mask NAME|FILE  conv2d mask; repeatable (default: box3 gaussian3 sobel\n"
            "                    gaussian5 gaussian7 box9 random15 box15 gaussian15\n"
            "                    box31 gaussian31)\n"
            "  --kernels LIST    comma-separated subset of conv2d,histogram,reduce,scan,lut,\n"
            "                    equalize (default: all)\n"
            "  --versions LIST   comma-separated conv2d versions, 0 (naive) to 4 (direct)\n"
            "                    (default: all)\n"
            "  --reps N          timed runs per row; the median is reported (default 25)\n"
            "  --warmup N        untimed runs before them (default 3)\n"
            "  --tile [V:]WxH    conv2d tile of every version, or of version V only;\n"
            "                    repeatable (default: the tile gpufilter itself takes,\n"
            "                    src/tile_rule.c; see kernels.h for what the tile means\n"
            "                    to each version)\n"
            "  --timing MODE     alone: each timed run is launched on an idle stream, so\n"
            "                    its time includes the launch latency, as one call of the\n"
            "                    tool pays it (default); queued: the runs are enqueued back\n"
            "                    to back, an event between each two, so each time is the\n"
            "                    device's alone (the launch latency hidden behind the run\n"
            "                    before), for kernels and peers alike\n"
            "  --device N        CUDA device (default 0)\n"
            "  --json FILE       also write the rows to FILE as JSON\n"
            "  -h, --help        show this help and exit\n"
            "\n"
            "Exit status: 0 success; 1 no usable GPU, a CUDA failure, or a kernel whose\n"
            "output differs from the CPU reference; 2 bad usage.\n",
            PROG);
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_wxh(const char *s, long max, int *w, int *h)
{
    const char *x = strchr(s, 'x');
    if (!x)
        return -1;
    std::string a(s, x - s);
    long wv, hv;
    if (parse_int(a.c_str(), 1, max, &wv) < 0 || parse_int(x + 1, 1, max, &hv) < 0)
        return -1;
    *w = (int)wv;
    *h = (int)hv;
    return 0;
}

static unsigned parse_kernels(const char *list)
{
    unsigned bits = 0;
    std::string s(list);
    size_t start = 0;
    while (start <= s.size()) {
        size_t comma = s.find(',', start);
        std::string name = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        unsigned bit = 0;
        for (const auto &f : FAMILIES)
            if (name == f.name)
                bit = f.bit;
        if (!bit)
            die(2, "unknown kernel family '%s' in --kernels (conv2d, histogram, reduce, scan, lut, "
                   "equalize)", name.c_str());
        bits |= bit;
        if (comma == std::string::npos)
            break;
        start = comma + 1;
    }
    return bits;
}

static void parse_options(int argc, char **argv)
{
    enum {
        O_SIZE = 256, O_CHANNELS, O_MASK, O_KERNELS, O_VERSIONS, O_REPS, O_WARMUP, O_TILE, O_DEVICE, O_JSON,
        O_TIMING
    };
    static const struct option longopts[] = {
        {"size", required_argument, NULL, O_SIZE},
        {"channels", required_argument, NULL, O_CHANNELS},
        {"mask", required_argument, NULL, O_MASK},
        {"kernels", required_argument, NULL, O_KERNELS},
        {"versions", required_argument, NULL, O_VERSIONS},
        {"reps", required_argument, NULL, O_REPS},
        {"warmup", required_argument, NULL, O_WARMUP},
        {"tile", required_argument, NULL, O_TILE},
        {"device", required_argument, NULL, O_DEVICE},
        {"timing", required_argument, NULL, O_TIMING},
        {"json", required_argument, NULL, O_JSON},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    opterr = 0;
    int c;
    long v;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case O_SIZE: {
            Size s;
            if (parse_wxh(optarg, 65536, &s.width, &s.height) < 0)
                die(2, "--size '%s': expected WxH, each 1 to 65536", optarg);
            g_opt.sizes.push_back(s);
            break;
        }
        case O_CHANNELS:
            if (parse_int(optarg, 1, 4, &v) < 0 || (v != 1 && v != 4))
                die(2, "--channels '%s': expected 1 or 4", optarg);
            if (std::find(g_opt.channels.begin(), g_opt.channels.end(), (int)v) == g_opt.channels.end())
                g_opt.channels.push_back((int)v);
            break;
        case O_MASK:
            g_opt.masks.push_back(optarg);
            break;
        case O_KERNELS:
            g_opt.kernels |= parse_kernels(optarg);
            break;
        case O_REPS:
            if (parse_int(optarg, 1, 100000, &v) < 0)
                die(2, "--reps '%s': expected a number from 1 to 100000", optarg);
            g_opt.reps = (int)v;
            break;
        case O_WARMUP:
            if (parse_int(optarg, 0, 100000, &v) < 0)
                die(2, "--warmup '%s': expected a number from 0 to 100000", optarg);
            g_opt.warmup = (int)v;
            break;
        case O_TILE: {
            const char *colon = strchr(optarg, ':');
            int w, h;
            long version = -1;
            if (colon && parse_int(std::string(optarg, colon - optarg).c_str(), 0, 63, &version) < 0)
                die(2, "--tile '%s': expected [V:]WxH, V a conv2d version", optarg);
            if (parse_wxh(colon ? colon + 1 : optarg, 4096, &w, &h) < 0)
                die(2, "--tile '%s': expected [V:]WxH, each 1 to 4096", optarg);
            if (version < 0) {
                g_opt.tile_width = w;
                g_opt.tile_height = h;
                g_opt.tile_given = true;
            } else {
                if (g_opt.version_tile.size() < (size_t)(2 * version + 2))
                    g_opt.version_tile.resize(2 * version + 2, 0);
                g_opt.version_tile[2 * version] = w;
                g_opt.version_tile[2 * version + 1] = h;
            }
            break;
        }
        case O_DEVICE:
            if (parse_int(optarg, 0, 1024, &v) < 0)
                die(2, "--device '%s': expected a device number", optarg);
            g_opt.device = (int)v;
            break;
        case O_JSON:
            g_opt.json = optarg;
            break;
        case O_VERSIONS:
            g_opt.versions = 0;
            for (const char *d = optarg; *d; d++) {
                if (*d >= '0' && *d < '0' + CONV2D_VERSIONS && (d[1] == ',' || d[1] == '\0'))
                    g_opt.versions |= 1u << (*d - '0');
                else if (*d != ',' || d == optarg)
                    die(2, "--versions '%s': expected a list of conv2d versions 0 to %d", optarg,
                        CONV2D_VERSIONS - 1);
            }
            break;
        case O_TIMING:
            if (strcmp(optarg, "alone") && strcmp(optarg, "queued"))
                die(2, "--timing '%s': expected alone or queued", optarg);
            g_opt.queued = strcmp(optarg, "queued") == 0;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        case ':':
            die(2, "option '%s' needs a value (see --help)", argv[optind - 1]);
        default:
            die(2, "unknown option '%s' (see --help)", argv[optind - 1]);
        }
    }
    if (optind < argc)
        die(2, "unexpected argument '%s' (see --help)", argv[optind]);
    if (g_opt.sizes.empty())
        g_opt.sizes.push_back(Size{8192, 8192});
    if (g_opt.channels.empty())
        g_opt.channels = {1, 4};
    if (g_opt.masks.empty())
        for (const char *m : DEFAULT_MASKS)
            g_opt.masks.push_back(m);
    if (!g_opt.kernels)
        g_opt.kernels = K_ALL;
}

static cudaDeviceProp g_prop;

/* The tile rule's last refusal, without the program's name. */
static std::string tile_rule_error()
{
    (void)cudaGetLastError();
    const char *why = gf_error();
    return strncmp(why, "gpufilter: ", 11) ? why : why + 11;
}

/* The tile of one version: --tile V:WxH, else --tile WxH, else the tool's
 * own (tile_rule.c's gf_tile_choose on this device); "" where it launches
 * here, else why not (gf_tile_fits, as the tool refuses a tile). */
static std::string tile_of(int version, conv2d_launch *q)
{
    if (g_opt.version_tile.size() >= (size_t)(2 * version + 2) && g_opt.version_tile[2 * version] > 0) {
        q->tile_width = g_opt.version_tile[2 * version];
        q->tile_height = g_opt.version_tile[2 * version + 1];
    } else if (g_opt.tile_given) {
        q->tile_width = g_opt.tile_width;
        q->tile_height = g_opt.tile_height;
    } else if (gf_tile_choose(&g_prop, version, q) < 0) {
        return tile_rule_error();
    }
    return gf_tile_fits(&g_prop, version, q, NULL) < 0 ? tile_rule_error() : "";
}

/* Named masks are looked up next to the executable (build/../masks); the
 * bench's own masks (random15, box15, gaussian15, box31, gaussian31) live
 * in bench/masks, added to the search path through $GPUFILTER_MASKS, after
 * any folders the user put there. */
static void add_bench_mask_folder(void)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return;
    *slash = '\0';
    std::string folder = std::string(exe) + "/../bench/masks";
    const char *old = getenv("GPUFILTER_MASKS");
    std::string value = old && *old ? std::string(old) + ":" + folder : folder;
    setenv("GPUFILTER_MASKS", value.c_str(), 1);
}

/* ---- device state and timing ----------------------------------------------------- */

/* input buffers a row's runs rotate through, at most (see setup_config) */
static const int kMaxBuffers = 64;
static cudaStream_t g_stream;
static cudaEvent_t g_start, g_stop;

struct Timing {
    double median = NAN, min = NAN, max = NAN;
    double host_us = NAN;  /* the launch call's own time on the host, median */
};

static double host_now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static double median_of(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n == 0 ? NAN : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* --timing queued: an event between each two runs (reps + 1) */
static std::vector<cudaEvent_t> g_marks;

/* launch(i), its call's own time on the host into *host_us */
template <class Launch>
static void launch_timed(Launch launch, int i, const std::string &what, double *host_us)
{
    const double t0 = host_now_us();
    CHECK(launch(i), what);
    *host_us = host_now_us() - t0;
}

/* The runs enqueued back to back behind the warm-up, marks[r] and marks[r +
 * 1] around run r: while the host enqueues faster than the device runs,
 * each run starts as the last one ends, and its time is the device's
 * alone (no launch latency, no idle stream). A launch that synchronizes
 * the host (none of the kernels or peers here does) would time as alone. */
template <class Launch>
static void time_queued(Launch launch, const std::string &what, std::vector<float> &ms,
                        std::vector<double> &host)
{
    while (g_marks.size() < (size_t)g_opt.reps + 1) {
        cudaEvent_t e;
        CHECK(cudaEventCreate(&e), "creating an event");
        g_marks.push_back(e);
    }
    CHECK(cudaEventRecord(g_marks[0], g_stream), "recording an event");
    for (int r = 0; r < g_opt.reps; r++) {
        launch_timed(launch, g_opt.warmup + r, what, &host[r]);
        CHECK(cudaEventRecord(g_marks[r + 1], g_stream), "recording an event");
    }
    CHECK(cudaEventSynchronize(g_marks[g_opt.reps]), what);
    for (int r = 0; r < g_opt.reps; r++)
        CHECK(cudaEventElapsedTime(&ms[r], g_marks[r], g_marks[r + 1]), "reading an event");
}

/* launch(i) enqueues run i on g_stream (i counts warm-up runs too, so that
 * the buffers rotate through both). --timing alone (the default): the
 * timed runs are bracketed by events one by one, each launched on an idle
 * stream, so that each time includes the launch's latency as one call of
 * the tool pays it. queued: see time_queued. */
template <class Launch>
static Timing time_runs(Launch launch, const std::string &what)
{
    for (int i = 0; i < g_opt.warmup; i++)
        CHECK(launch(i), what);
    std::vector<float> ms(g_opt.reps);
    std::vector<double> host(g_opt.reps);
    if (g_opt.queued) {
        time_queued(launch, what, ms, host);  /* behind the warm-up, which is still running */
    } else {
        CHECK(cudaStreamSynchronize(g_stream), what);
        for (int r = 0; r < g_opt.reps; r++) {
            CHECK(cudaEventRecord(g_start, g_stream), "recording an event");
            launch_timed(launch, g_opt.warmup + r, what, &host[r]);
            CHECK(cudaEventRecord(g_stop, g_stream), "recording an event");
            CHECK(cudaEventSynchronize(g_stop), what);
            CHECK(cudaEventElapsedTime(&ms[r], g_start, g_stop), "reading an event");
        }
    }
    Timing t;
    t.median = median_of(std::vector<double>(ms.begin(), ms.end()));
    t.min = *std::min_element(ms.begin(), ms.end());
    t.max = *std::max_element(ms.begin(), ms.end());
    t.host_us = median_of(host);
    return t;
}

/* ---- one size and channel count ----------------------------------------------------- */

struct Config {
    int width = 0, height = 0, channels = 0;
    size_t pixels = 0, bytes = 0;
    int buffers = 0;                      /* distinct input (and output) buffers */
    std::vector<unsigned char> host;      /* the input, as every in[] holds it */
    std::vector<unsigned char *> in, out; /* device */
    double copy_gbs = NAN;
    bool have_stats = false;
    gf_channel_stats stats[4];
};

struct Row {
    std::string kernel, version, mask, peer, note;
    int width = 0, height = 0, channels = 0;
    int tile_width = 0, tile_height = 0;  /* conv2d rows only */
    double bytes = 0, pixels = 0;
    Timing t;
    double gpxs = NAN, gbs = NAN, pct = NAN, peer_ms = NAN, ratio = NAN;
};

static std::vector<Row> g_rows;

static void set_last_tile(const conv2d_launch &q)
{
    g_rows.back().tile_width = q.tile_width;
    g_rows.back().tile_height = q.tile_height;
}

struct Peer {
    std::string name;
    double ms = NAN;
    std::string note;
};

static void add_row(const Config &cfg, const std::string &kernel, const std::string &version,
                    const std::string &mask, const Timing &t, double bytes, double pixels,
                    const Peer &peer, const std::string &note)
{
    Row r;
    r.kernel = kernel;
    r.version = version;
    r.mask = mask;
    r.width = cfg.width;
    r.height = cfg.height;
    r.channels = cfg.channels;
    r.bytes = bytes;
    r.pixels = pixels;
    r.t = t;
    if (t.median > 0) {
        r.gbs = bytes / (t.median * 1e6);
        if (pixels > 0)
            r.gpxs = pixels / (t.median * 1e6);
        if (cfg.copy_gbs > 0)
            r.pct = 100.0 * r.gbs / cfg.copy_gbs;
    }
    r.peer = peer.name;
    r.peer_ms = peer.ms;
    if (peer.ms > 0 && t.median > 0)
        r.ratio = peer.ms / t.median;
    std::string n = note;
    /* the host's own part of our call (plan and launch; for the peers' the
     * same is in their ms, not shown) */
    if (t.host_us >= 0 && kernel != "copy")
        n += format("%shost %.1f us a call", n.empty() ? "" : "; ", t.host_us);
    if (!peer.note.empty())
        n += (n.empty() ? "" : "; ") + peer.note;
    r.note = n;
    g_rows.push_back(r);
}

static void progress(const Config &cfg, const char *what)
{
    if (isatty(STDERR_FILENO))
        fprintf(stderr, "%s: %dx%dx%d: %s\n", PROG, cfg.width, cfg.height, cfg.channels, what);
}

/* xorshift64*, fixed seed: the same input on every run */
static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint64_t next_random(void)
{
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 0x2545F4914F6CDD1Dull;
}

static void upload_inputs(Config &cfg)
{
    for (int b = 0; b < cfg.buffers; b++)
        CHECK(cudaMemcpy(cfg.in[b], cfg.host.data(), cfg.bytes, cudaMemcpyHostToDevice),
              "uploading the input");
}

static void setup_config(Config &cfg, int width, int height, int channels)
{
    cfg.width = width;
    cfg.height = height;
    cfg.channels = channels;
    cfg.pixels = (size_t)width * (size_t)height;
    cfg.bytes = cfg.pixels * (size_t)channels;
    g_rng = 0x9E3779B97F4A7C15ull ^ ((uint64_t)width << 40) ^ ((uint64_t)height << 16) ^ (uint64_t)channels;
    cfg.host.resize(cfg.bytes);
    for (size_t i = 0; i < cfg.bytes; i += 8) {
        uint64_t r = next_random();
        size_t n = cfg.bytes - i < 8 ? cfg.bytes - i : 8;
        memcpy(&cfg.host[i], &r, n);
    }
    /* enough buffers that together they exceed twice the L2, at least two;
     * at most kMaxBuffers, so that a small image (a few KB: millions of
     * buffers) is timed from the L2 rather than never */
    const double l2 = (double)g_prop.l2CacheSize;
    const double wanted = ceil(2.0 * l2 / (double)cfg.bytes);
    cfg.buffers = wanted < kMaxBuffers ? (int)wanted : kMaxBuffers;
    if (cfg.buffers < kMaxBuffers && 2.0 * l2 >= (double)cfg.buffers * (double)cfg.bytes)
        cfg.buffers++;
    if (cfg.buffers < 2)
        cfg.buffers = 2;
    cfg.in.assign(cfg.buffers, NULL);
    cfg.out.assign(cfg.buffers, NULL);
    std::string what = format("allocating %d input and %d output buffers of %zu bytes", cfg.buffers,
                              cfg.buffers, cfg.bytes);
    for (int b = 0; b < cfg.buffers; b++) {
        CHECK(cudaMalloc((void **)&cfg.in[b], cfg.bytes), what);
        CHECK(cudaMalloc((void **)&cfg.out[b], cfg.bytes), what);
    }
    upload_inputs(cfg);
    cfg.have_stats = false;
}

static void free_config(Config &cfg)
{
    for (int b = 0; b < cfg.buffers; b++) {
        cudaFree(cfg.in[b]);
        cudaFree(cfg.out[b]);
    }
    cfg.in.clear();
    cfg.out.clear();
    cfg.host.clear();
    cfg.host.shrink_to_fit();
}

static void ensure_stats(Config &cfg)
{
    if (cfg.have_stats)
        return;
    gf_statistics_cpu(cfg.host.data(), cfg.pixels, cfg.channels, cfg.stats);
    cfg.have_stats = true;
}

static std::string size_name(const Config &cfg)
{
    return format("%dx%dx%d", cfg.width, cfg.height, cfg.channels);
}

/* ---- copy: the ceiling -------------------------------------------------------------- */

static void bench_copy(Config &cfg)
{
    progress(cfg, "device copy");
    Timing t = time_runs(
        [&](int i) {
            int b = i % cfg.buffers;
            return cudaMemcpyAsync(cfg.out[b], cfg.in[b], cfg.bytes, cudaMemcpyDeviceToDevice,
                                   g_stream);
        },
        "copying device to device");
    cfg.copy_gbs = 2.0 * (double)cfg.bytes / (t.median * 1e6);
    add_row(cfg, "copy", "memcpy d2d", "-", t, 2.0 * (double)cfg.bytes, (double)cfg.pixels, Peer(),
            "read + write; the ceiling for this size");
}

/* ---- conv2d ----------------------------------------------------------------------- */

/* Reference rows [y0, y0 + rows) of the whole image, computed by the CPU on a
 * slice that holds every row their taps read; where a tap leaves the image
 * the slice ends at the image's own edge, so the border is the true one. */
struct Band {
    int y0, rows;
    std::vector<unsigned char> ref;
};

static std::vector<Band> reference_bands(const Config &cfg, const gf_mask &m)
{
    const int rows = cfg.height < 16 ? cfg.height : 16;
    const int above = m.height / 2, below = m.height - 1 - m.height / 2;
    const size_t line = (size_t)cfg.width * cfg.channels;
    int starts[3] = {0, cfg.height / 2 - rows / 2, cfg.height - rows};
    std::vector<Band> bands;
    for (int y0 : starts) {
        y0 = std::max(0, std::min(y0, cfg.height - rows));
        bool seen = false;
        for (const Band &b : bands)
            seen |= b.y0 == y0;
        if (seen)
            continue;
        const int s0 = std::max(0, y0 - above), s1 = std::min(cfg.height, y0 + rows + below);
        std::vector<unsigned char> slice((size_t)(s1 - s0) * line);
        if (gf_mask_is_large(&m)) {  /* the reference's bytes but for ties (cpu_conv.h), sooner */
            if (gf_conv2d_fast(cfg.host.data() + (size_t)s0 * line, slice.data(), cfg.width, s1 - s0,
                               cfg.channels, cfg.channels, &m, GF_BORDER_NEAREST, 0) < 0)
                die(1, "out of memory for the CPU reference");
        } else {
            gf_conv2d_cpu(cfg.host.data() + (size_t)s0 * line, slice.data(), cfg.width, s1 - s0,
                          cfg.channels, cfg.channels, &m, GF_BORDER_NEAREST);
        }
        Band b;
        b.y0 = y0;
        b.rows = rows;
        b.ref.assign(slice.begin() + (size_t)(y0 - s0) * line,
                     slice.begin() + (size_t)(y0 - s0 + rows) * line);
        bands.push_back(std::move(b));
    }
    return bands;
}

struct Diff {
    size_t total = 0, off_by_one = 0, worse = 0;
    int max = 0;
    int x = -1, y = -1, c = -1, got = 0, want = 0;  /* the first difference */
    bool acceptable() const { return worse == 0 && off_by_one * 1000 <= total; }
};

static Diff compare_bands(const Config &cfg, const unsigned char *d_out, const std::vector<Band> &bands)
{
    Diff d;
    const size_t line = (size_t)cfg.width * cfg.channels;
    std::vector<unsigned char> got;
    CHECK(cudaStreamSynchronize(g_stream), "running the kernel");
    for (const Band &b : bands) {
        got.resize((size_t)b.rows * line);
        CHECK(cudaMemcpy(got.data(), d_out + (size_t)b.y0 * line, got.size(), cudaMemcpyDeviceToHost),
              "downloading a band");
        for (size_t i = 0; i < got.size(); i++) {
            int delta = abs((int)got[i] - (int)b.ref[i]);
            d.total++;
            if (!delta)
                continue;
            if (d.x < 0) {
                size_t px = i / cfg.channels;
                d.x = (int)(px % cfg.width);
                d.y = b.y0 + (int)(px / cfg.width);
                d.c = (int)(i % cfg.channels);
                d.got = got[i];
                d.want = b.ref[i];
            }
            d.max = std::max(d.max, delta);
            if (delta == 1)
                d.off_by_one++;
            else
                d.worse++;
        }
    }
    return d;
}

static std::string describe_diff(const Diff &d)
{
    return format("%zu of %zu values differ (max %d; first at x=%d y=%d channel %d: %d, reference %d)",
                  d.off_by_one + d.worse, d.total, d.max, d.x, d.y, d.c, d.got, d.want);
}

#ifdef GF_HAVE_NPP
static NppStreamContext npp_context(void)
{
    NppStreamContext ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.hStream = g_stream;
    ctx.nCudaDeviceId = g_opt.device;
    ctx.nMultiProcessorCount = g_prop.multiProcessorCount;
    ctx.nMaxThreadsPerMultiProcessor = g_prop.maxThreadsPerMultiProcessor;
    ctx.nMaxThreadsPerBlock = g_prop.maxThreadsPerBlock;
    ctx.nSharedMemPerBlock = g_prop.sharedMemPerBlock;
    ctx.nCudaDevAttrComputeCapabilityMajor = g_prop.major;
    ctx.nCudaDevAttrComputeCapabilityMinor = g_prop.minor;
    unsigned int flags = 0;
    CHECK(cudaStreamGetFlags(g_stream, &flags), "reading the stream flags");
    ctx.nStreamFlags = flags;
    return ctx;
}

static bool is_integer(double v, double limit)
{
    return v == rint(v) && fabs(v) <= limit;
}

/* nppiFilterBorder with the replicate border (our 'nearest'), one call per
 * matrix of the mask. NPP convolves (its coefficients are 'stored in reverse
 * order'), so each matrix is passed flipped; integer weights go to the 8u
 * variant with the scale as nDivisor, others to the 32f-kernel variant with
 * weight / scale. The anchor is the mask's own (width/2, height/2): exact for
 * odd sizes, unverified for even ones (see bench/RESULTS.md). */
static Peer npp_conv2d(const Config &cfg, const gf_mask &m, const std::vector<Band> &bands)
{
    Peer peer;
    peer.name = cfg.channels == 1 ? "npp 8u_C1R" : "npp 8u_C4R";
    const int taps = m.width * m.height;
    struct Matrix {
        bool integer;
        Npp32s *d_int;
        Npp32f *d_float;
        int divisor;
    };
    std::vector<Matrix> mats(m.count);
    bool any_float = false;
    for (int k = 0; k < m.count; k++) {
        Matrix &mat = mats[k];
        mat.d_int = NULL;
        mat.d_float = NULL;
        double weight_sum = 0;
        bool integer = is_integer(m.scale[k], 1 << 30) && m.scale[k] >= 1;
        for (int i = 0; i < taps; i++) {
            integer = integer && is_integer(m.weights[k][i], 1 << 20);
            weight_sum += fabs(m.weights[k][i]);
        }
        integer = integer && weight_sum * 255.0 < 2147483647.0;
        mat.integer = integer;
        mat.divisor = integer ? (int)m.scale[k] : 1;
        if (integer) {
            std::vector<Npp32s> flipped(taps);
            for (int i = 0; i < taps; i++)
                flipped[i] = (Npp32s)m.weights[k][taps - 1 - i];
            CHECK(cudaMalloc((void **)&mat.d_int, taps * sizeof(Npp32s)), "allocating an NPP kernel");
            CHECK(cudaMemcpy(mat.d_int, flipped.data(), taps * sizeof(Npp32s), cudaMemcpyHostToDevice),
                  "uploading an NPP kernel");
        } else {
            any_float = true;
            std::vector<Npp32f> flipped(taps);
            for (int i = 0; i < taps; i++)
                flipped[i] = (Npp32f)(m.weights[k][taps - 1 - i] / m.scale[k]);
            CHECK(cudaMalloc((void **)&mat.d_float, taps * sizeof(Npp32f)), "allocating an NPP kernel");
            CHECK(cudaMemcpy(mat.d_float, flipped.data(), taps * sizeof(Npp32f), cudaMemcpyHostToDevice),
                  "uploading an NPP kernel");
        }
    }
    const NppStreamContext ctx = npp_context();
    const NppiSize size = {cfg.width, cfg.height};
    const NppiPoint origin = {0, 0};
    const NppiSize ksize = {m.width, m.height};
    const NppiPoint anchor = {m.width / 2, m.height / 2};
    const int step = cfg.width * cfg.channels;
    auto run = [&](int b) -> NppStatus {
        for (const Matrix &mat : mats) {
            NppStatus s;
            if (mat.integer && cfg.channels == 1)
                s = nppiFilterBorder_8u_C1R_Ctx(cfg.in[b], step, size, origin, cfg.out[b], step, size,
                                                mat.d_int, ksize, anchor, mat.divisor,
                                                NPP_BORDER_REPLICATE, ctx);
            else if (mat.integer)
                s = nppiFilterBorder_8u_C4R_Ctx(cfg.in[b], step, size, origin, cfg.out[b], step, size,
                                                mat.d_int, ksize, anchor, mat.divisor,
                                                NPP_BORDER_REPLICATE, ctx);
            else if (cfg.channels == 1)
                s = nppiFilterBorder32f_8u_C1R_Ctx(cfg.in[b], step, size, origin, cfg.out[b], step,
                                                   size, mat.d_float, ksize, anchor,
                                                   NPP_BORDER_REPLICATE, ctx);
            else
                s = nppiFilterBorder32f_8u_C4R_Ctx(cfg.in[b], step, size, origin, cfg.out[b], step,
                                                   size, mat.d_float, ksize, anchor,
                                                   NPP_BORDER_REPLICATE, ctx);
            if (s < 0)
                return s;
        }
        return NPP_SUCCESS;
    };
    std::vector<std::string> notes;
    if (any_float)
        notes.push_back("npp: 32f-kernel variant (weights not integers)");
    NppStatus status = run(0);
    if (status < 0) {
        notes.push_back(format("npp failed (NppStatus %d)", (int)status));
    } else {
        if (m.count > 1)
            notes.push_back(format("npp: %d calls (one per matrix), times summed, no combine", m.count));
        else if (m.combine != GF_COMBINE_NONE || m.offset[0] != 0.0)
            notes.push_back("npp: no offset/combine, output not compared");
        else {
            Diff d = compare_bands(cfg, cfg.out[0], bands);
            notes.push_back(d.off_by_one + d.worse == 0 ? std::string("npp output = CPU reference")
                                                        : "npp vs CPU reference: " + describe_diff(d));
        }
        Timing t = time_runs(
            [&](int i) {
                NppStatus s = run(i % cfg.buffers);
                if (s < 0)
                    status = s;
                return cudaSuccess;
            },
            "running NPP");
        if (status < 0)
            notes.push_back(format("npp failed (NppStatus %d)", (int)status));
        else
            peer.ms = t.median;
    }
    for (Matrix &mat : mats) {
        cudaFree(mat.d_int);
        cudaFree(mat.d_float);
    }
    for (const std::string &n : notes)
        peer.note += (peer.note.empty() ? "" : "; ") + n;
    return peer;
}
#endif

/* A mask's weights on the device, with the host copies a launch passes too
 * (versions that take the weights as kernel parameters read them at launch). */
struct DeviceMask {
    std::vector<float> weights, row, column;
    float *d_weights = NULL, *d_row = NULL, *d_column = NULL;

    explicit DeviceMask(const gf_mask &m)
    {
        const int taps = m.width * m.height;
        weights.resize((size_t)m.count * taps);
        for (int k = 0; k < m.count; k++)
            for (int i = 0; i < taps; i++)
                weights[(size_t)k * taps + i] = (float)m.weights[k][i];
        d_weights = upload(weights);
        if (m.separable) {
            for (int i = 0; i < m.width; i++)
                row.push_back((float)m.row[i]);
            for (int i = 0; i < m.height; i++)
                column.push_back((float)m.column[i]);
            d_row = upload(row);
            d_column = upload(column);
        }
    }
    ~DeviceMask()
    {
        cudaFree(d_weights);
        cudaFree(d_row);
        cudaFree(d_column);
    }
    DeviceMask(const DeviceMask &) = delete;
    DeviceMask &operator=(const DeviceMask &) = delete;

    static float *upload(const std::vector<float> &v)
    {
        float *d = NULL;
        CHECK(cudaMalloc((void **)&d, v.size() * sizeof(float)), "allocating the mask");
        CHECK(cudaMemcpy(d, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice),
              "uploading the mask");
        return d;
    }
};

/* The launch of mask m over the first buffers, every channel filtered (it
 * is a benchmark), nearest border, the bench's default tile. */
static conv2d_launch conv2d_launch_of(const Config &cfg, const gf_mask &m, const DeviceMask &dm)
{
    conv2d_launch p;
    memset(&p, 0, sizeof p);
    p.src = cfg.in[0];
    p.dst = cfg.out[0];
    p.width = cfg.width;
    p.height = cfg.height;
    p.channels = cfg.channels;
    p.channels_filtered = cfg.channels;
    p.border = GF_BORDER_NEAREST;
    p.mask_width = m.width;
    p.mask_height = m.height;
    p.mask_count = m.count;
    p.combine = m.combine;
    p.weights = dm.d_weights;
    for (int k = 0; k < m.count; k++) {
        p.scale[k] = (float)m.scale[k];
        p.offset[k] = (float)m.offset[k];
    }
    p.tile_width = g_opt.tile_width;
    p.tile_height = g_opt.tile_height;
    p.row_weights = dm.d_row;
    p.column_weights = dm.d_column;
    p.scratch = NULL;
    p.host_weights = dm.weights.data();
    p.host_row_weights = m.separable ? dm.row.data() : NULL;
    p.host_column_weights = m.separable ? dm.column.data() : NULL;
    return p;
}

/* One row: version v of the ladder on launch p (its tile from tile_of),
 * checked against the reference bands, then timed. */
static void bench_conv2d_version(Config &cfg, const gf_mask &m, const conv2d_launch &p, int v,
                                 const std::vector<Band> &bands, const Peer &peer)
{
    const std::string mask_label = format("%s %dx%d", m.name, m.width, m.height);
    const double bytes = 2.0 * (double)cfg.bytes;
    const char *name = conv2d_version_name(v);
    const std::string version = format("v%d %s", v, name ? name : "?");
    const std::string what = format("running conv2d %s %s on %s", version.c_str(), m.name,
                                    size_name(cfg).c_str());
    progress(cfg, format("conv2d %s %s", version.c_str(), m.name).c_str());
    conv2d_launch q = p;
    const std::string no_tile = tile_of(v, &q);
    auto row = [&](const Timing &t, const std::string &note) {
        add_row(cfg, "conv2d", version, mask_label, t, bytes, (double)cfg.pixels, peer, note);
        set_last_tile(q);
    };
    const std::string tile = format("tile %dx%d", q.tile_width, q.tile_height);
    if (!no_tile.empty()) {
        row(Timing(), "skipped: " + no_tile);
        return;
    }
    const size_t scratch = conv2d_scratch_bytes(v, &q);
    void *d_scratch = NULL;
    if (scratch)
        CHECK(cudaMalloc(&d_scratch, scratch), format("allocating %zu bytes of conv2d scratch", scratch));
    q.scratch = d_scratch;

    /* a launch the device refuses (a block over its limits) is reported,
     * never timed as zero; any other failure ends the run */
    conv2d_launch_report report;
    cudaError_t err = conv2d_gpu(v, &q, g_stream, &report);
    if (err == cudaErrorInvalidConfiguration || err == cudaErrorInvalidValue) {
        (void)cudaGetLastError();
        cudaFree(d_scratch);
        row(Timing(), format("skipped: %s: conv2d_gpu() failed: %s", tile.c_str(),
                             cudaGetErrorString(err)));
        return;
    }
    CHECK(err, what);
    Diff d = compare_bands(cfg, q.dst, bands);
    if (!d.acceptable())
        die(1, "conv2d %s %s on %s (tile %dx%d) differs from the CPU reference: %s", version.c_str(),
            m.name, size_name(cfg).c_str(), q.tile_width, q.tile_height, describe_diff(d).c_str());
    std::string note = tile;
    if (report.steps > 1)  /* tiles a block walks down */
        note += format(" x %d", report.steps);
    if (d.off_by_one)
        note += format("; %zu of %zu checked values off by 1", d.off_by_one, d.total);

    Timing t = time_runs(
        [&](int i) {
            conv2d_launch r = q;
            int b = i % cfg.buffers;
            r.src = cfg.in[b];
            r.dst = cfg.out[b];
            return conv2d_gpu(v, &r, g_stream, NULL);
        },
        what);
    cudaFree(d_scratch);
    row(t, note);
}

/* A mask past 31x31 (or an unsharp combine) by one method of
 * conv2d_large.cu (fft: src/cuda_fft.c), checked against the reference
 * bands, then timed; the note gives the estimate the tool chooses by. */
static void bench_conv2d_large_method(Config &cfg, const gf_mask &m, int method, const std::vector<Band> &bands,
                                      const Peer &peer)
{
    const std::string label = format("%s %dx%d", m.name, m.width, m.height);
    const char *name = conv2d_large_method_name(method);
    const std::string what = format("running conv2d %s %s", name, m.name);
    progress(cfg, what.c_str());
    conv2d_large_launch p;
    conv2d_large_launch_of(&m, cfg.width, cfg.height, cfg.channels, cfg.channels, GF_BORDER_NEAREST, &p);
    const DeviceMask dm(m);
    p.weights = dm.d_weights;
    p.row = dm.d_row;
    p.column = dm.d_column;
    const size_t scratch = conv2d_large_scratch_bytes(method, &p);
    if (scratch)
        CHECK(cudaMalloc(&p.scratch, scratch), format("allocating %zu bytes of conv2d scratch", scratch));
    gf_cuda_fft *fft = NULL;
    if (method == CONV2D_LARGE_FFT && !(fft = gf_cuda_fft_prepare(&p, g_stream)))
        die(1, "%s", library_error());
    auto run = [&](int b) -> cudaError_t {
        conv2d_large_launch r = p;
        r.src = cfg.in[b];
        r.dst = cfg.out[b];
        if (method != CONV2D_LARGE_FFT)
            return conv2d_large_gpu(method, &r, g_stream);
        return gf_cuda_fft_run(fft, &r, g_stream) == 0 ? cudaSuccess : cudaErrorUnknown;
    };
    CHECK(run(0), what);
    Diff d = compare_bands(cfg, cfg.out[0], bands);
    if (!d.acceptable())
        die(1, "conv2d %s %s differs from the CPU reference: %s", name, m.name, describe_diff(d).c_str());
    std::string note = format("estimate %.2f ms", gf_large_estimate_ms(method, &p));
    if (d.off_by_one)
        note += format("; %zu of %zu checked values off by 1", d.off_by_one, d.total);
    Timing t = time_runs([&](int i) { return run(i % cfg.buffers); }, what);
    gf_cuda_fft_free(fft);
    cudaFree(p.scratch);
    add_row(cfg, "conv2d", name, label, t, 2.0 * (double)cfg.bytes, (double)cfg.pixels, peer, note);
}

/* The mask's own method, and the fft one beside it where cuFFT loads (not
 * for boxes, whose running sums cost less than any transform). */
static void bench_conv2d_large(Config &cfg, const gf_mask &m, const std::vector<Band> &bands, const Peer &peer)
{
    const int own = conv2d_large_method_for(&m);
    bench_conv2d_large_method(cfg, m, own, bands, peer);
    if (own != CONV2D_LARGE_BOX && gf_cufft(NULL))
        bench_conv2d_large_method(cfg, m, CONV2D_LARGE_FFT, bands, peer);
}

static void bench_conv2d(Config &cfg, const gf_mask &m)
{
    if (gf_mask_is_large(&m)) {
        progress(cfg, format("conv2d %s: CPU reference bands", m.name).c_str());
        const std::vector<Band> bands = reference_bands(cfg, m);
        Peer peer;
#ifdef GF_HAVE_NPP
        /* NPP has no separable or running-sum filter: its 2-D filter only
         * beside the masks the direct method runs */
        if (conv2d_large_method_for(&m) == CONV2D_LARGE_DIRECT && m.combine != GF_COMBINE_UNSHARP) {
            progress(cfg, format("conv2d %s: NPP", m.name).c_str());
            peer = npp_conv2d(cfg, m, bands);
        }
#endif
        bench_conv2d_large(cfg, m, bands, peer);
        return;
    }
    progress(cfg, format("conv2d %s: CPU reference bands", m.name).c_str());
    const DeviceMask dm(m);
    conv2d_launch p = conv2d_launch_of(cfg, m, dm);
    conv2d_mask_facts facts;  /* once for the tile rule's plans and the launches, as the tool */
    conv2d_mask_facts_make(&p, &facts);
    p.facts = &facts;
    const std::vector<Band> bands = reference_bands(cfg, m);
    Peer peer;
#ifdef GF_HAVE_NPP
    progress(cfg, format("conv2d %s: NPP", m.name).c_str());
    peer = npp_conv2d(cfg, m, bands);
#endif
    for (int v = 0; v < CONV2D_VERSIONS; v++)
        if (g_opt.versions >> v & 1)
            bench_conv2d_version(cfg, m, p, v, bands, peer);
}

/* ---- histogram ------------------------------------------------------------------ */

/* Whether counts (per channel, 256 each) equal the CPU histograms; the first
 * difference is described in *why. */
template <class Count>
static bool histograms_match(const Config &cfg, const Count *counts, int histograms, std::string *why)
{
    for (int c = 0; c < histograms; c++)
        for (int v = 0; v < GF_BINS; v++)
            if ((unsigned long long)counts[c * GF_BINS + v] != cfg.stats[c].histogram[v]) {
                *why = format("channel %d bin %d: %llu, reference %llu", c, v,
                              (unsigned long long)counts[c * GF_BINS + v], cfg.stats[c].histogram[v]);
                return false;
            }
    return true;
}

static Peer cub_histogram(const Config &cfg)
{
    Peer peer;
    peer.name = cfg.channels == 1 ? "cub HistogramEven" : "cub MultiHistogramEven<4,4>";
    if (cfg.bytes > (size_t)INT_MAX) {
        peer.note = "cub peer skipped (over INT_MAX samples)";
        return peer;
    }
    unsigned int *d_hist = NULL;
    void *d_temp = NULL;
    size_t temp_bytes = 0;
    CHECK(cudaMalloc((void **)&d_hist, 4 * GF_BINS * sizeof(unsigned int)), "allocating histograms");
    const int pixels = (int)cfg.pixels;
    auto call = [&](int b) -> cudaError_t {
        if (cfg.channels == 1)
            return cub::DeviceHistogram::HistogramEven(d_temp, temp_bytes, cfg.in[b], d_hist, GF_BINS + 1,
                                                       0, GF_BINS, pixels, g_stream);
        ::cuda::std::array<unsigned int *, 4> hist = {d_hist, d_hist + GF_BINS, d_hist + 2 * GF_BINS,
                                                      d_hist + 3 * GF_BINS};
        ::cuda::std::array<int, 4> levels = {GF_BINS + 1, GF_BINS + 1, GF_BINS + 1, GF_BINS + 1};
        ::cuda::std::array<int, 4> lower = {0, 0, 0, 0};
        ::cuda::std::array<int, 4> upper = {GF_BINS, GF_BINS, GF_BINS, GF_BINS};
        return cub::DeviceHistogram::MultiHistogramEven<4, 4>(d_temp, temp_bytes, cfg.in[b], hist, levels,
                                                              lower, upper, pixels, g_stream);
    };
    CHECK(call(0), "sizing the CUB histogram");
    CHECK(cudaMalloc(&d_temp, temp_bytes ? temp_bytes : 1), "allocating CUB scratch");
    CHECK(call(0), "running the CUB histogram");
    std::vector<unsigned int> got(4 * GF_BINS);
    CHECK(cudaStreamSynchronize(g_stream), "running the CUB histogram");
    CHECK(cudaMemcpy(got.data(), d_hist, got.size() * sizeof(unsigned int), cudaMemcpyDeviceToHost),
          "downloading histograms");
    std::string why;
    if (!histograms_match(cfg, got.data(), cfg.channels, &why))
        peer.note = "cub output differs from the CPU reference: " + why;
    peer.ms = time_runs([&](int i) { return call(i % cfg.buffers); }, "running the CUB histogram").median;
    cudaFree(d_temp);
    cudaFree(d_hist);
    return peer;
}

static void bench_histogram(Config &cfg)
{
    progress(cfg, "histogram: CPU reference, CUB");
    ensure_stats(cfg);
    unsigned long long *d_hist = NULL;
    CHECK(cudaMalloc((void **)&d_hist, 4 * GF_BINS * sizeof *d_hist), "allocating histograms");
    const Peer peer = cub_histogram(cfg);
    std::vector<unsigned long long> got(4 * GF_BINS);
    for (int v = 0; v < HISTOGRAM_VERSIONS; v++) {
        const std::string what = format("running histogram v%d on %s", v, size_name(cfg).c_str());
        progress(cfg, format("histogram v%d", v).c_str());
        CHECK(histogram_gpu(v, cfg.in[0], cfg.pixels, cfg.channels, 0, d_hist, g_stream), what);
        CHECK(cudaStreamSynchronize(g_stream), what);
        CHECK(cudaMemcpy(got.data(), d_hist, got.size() * sizeof got[0], cudaMemcpyDeviceToHost),
              "downloading histograms");
        std::string why;
        if (!histograms_match(cfg, got.data(), cfg.channels, &why))
            die(1, "histogram v%d on %s differs from the CPU reference: %s", v, size_name(cfg).c_str(),
                why.c_str());
        Timing t = time_runs(
            [&](int i) {
                return histogram_gpu(v, cfg.in[i % cfg.buffers], cfg.pixels, cfg.channels, 0, d_hist,
                                     g_stream);
            },
            what);
        add_row(cfg, "histogram", format("v%d", v), "-", t, (double)cfg.bytes, (double)cfg.pixels, peer,
                "");
    }
    cudaFree(d_hist);
}

/* ---- reduce ----------------------------------------------------------------------- */

static bool stats_match(const Config &cfg, const unsigned int *min, const unsigned int *max,
                        const unsigned long long *sum, const unsigned long long *squares, std::string *why)
{
    for (int c = 0; c < cfg.channels; c++) {
        const gf_channel_stats &s = cfg.stats[c];
        if ((int)min[c] != s.min || (int)max[c] != s.max || sum[c] != s.sum || squares[c] != s.sum_squares) {
            *why = format("channel %d: min %u max %u sum %llu squares %llu, reference %d %d %llu %llu", c,
                          min[c], max[c], sum[c], squares[c], s.min, s.max, s.sum, s.sum_squares);
            return false;
        }
    }
    return true;
}

/* CUB's peer of the reduction: cub::DeviceReduce::Reduce of the same
 * bytes into one 64-bit sum (one statistic of the four; a TransformReduce
 * into a struct of all four stopped with a misaligned address inside CUB
 * 3.0 on CUDA 13.0, with or without 16-byte alignment of the struct). */
static Peer cub_reduce(const Config &cfg)
{
    Peer peer;
    peer.name = "cub Reduce (sum)";
    if (cfg.bytes > (size_t)INT_MAX) {
        peer.note = "cub peer skipped (over INT_MAX items)";
        return peer;
    }
    unsigned long long *d_out = NULL;
    void *d_temp = NULL;
    size_t temp_bytes = 0;
    CHECK(cudaMalloc((void **)&d_out, sizeof *d_out), "allocating the CUB result");
    const int items = (int)cfg.bytes;
    auto call = [&](int b) -> cudaError_t {
        return cub::DeviceReduce::Reduce(d_temp, temp_bytes, (const unsigned char *)cfg.in[b], d_out, items,
                                         cuda::std::plus<unsigned long long>(), 0ull, g_stream);
    };
    CHECK(call(0), "sizing the CUB reduction");
    CHECK(cudaMalloc(&d_temp, temp_bytes ? temp_bytes : 1), "allocating CUB scratch");
    CHECK(call(0), "running the CUB reduction");
    CHECK(cudaStreamSynchronize(g_stream), "running the CUB reduction");
    unsigned long long got = 0, want = 0;
    CHECK(cudaMemcpy(&got, d_out, sizeof got, cudaMemcpyDeviceToHost), "downloading the CUB result");
    for (int c = 0; c < cfg.channels; c++)
        want += cfg.stats[c].sum;
    peer.note = got == want ? "cub: the sum of all bytes only"
                            : format("cub sum %llu differs from the CPU reference %llu", got, want);
    peer.ms = time_runs([&](int i) { return call(i % cfg.buffers); }, "running the CUB reduction").median;
    cudaFree(d_temp);
    cudaFree(d_out);
    return peer;
}

static void bench_reduce(Config &cfg)
{
    progress(cfg, "reduce: CPU reference, CUB");
    ensure_stats(cfg);
    const Peer peer = cub_reduce(cfg);
    reduce_result *d_range = NULL;
    CHECK(cudaMalloc((void **)&d_range, sizeof *d_range), "allocating the reduction");
    CHECK(cudaMemset(d_range, 0, sizeof *d_range), "allocating the reduction");
    static const char *const names[REDUCE_VERSIONS] = {NULL, "v1 one-pass", "v2 histogram", "v3 dp4a",
                                                                "v4 dp4a tiles"};
    for (int v = 1; v < REDUCE_VERSIONS; v++) {
        const std::string what = format("running reduce %s on %s", names[v], size_name(cfg).c_str());
        progress(cfg, format("reduce %s", names[v]).c_str());
        CHECK(reduce_gpu(v, cfg.in[0], cfg.pixels, cfg.channels, d_range, g_stream), what);
        CHECK(cudaStreamSynchronize(g_stream), what);
        reduce_result got;
        CHECK(cudaMemcpy(&got, d_range, sizeof got, cudaMemcpyDeviceToHost), "downloading the reduction");
        std::string why;
        if (!stats_match(cfg, got.min, got.max, got.sum, got.sum_squares, &why))
            die(1, "reduce %s on %s differs from the CPU reference: %s", names[v], size_name(cfg).c_str(),
                why.c_str());
        Timing t = time_runs(
            [&](int i) { return reduce_gpu(v, cfg.in[i % cfg.buffers], cfg.pixels, cfg.channels, d_range, g_stream); },
            what);
        add_row(cfg, "reduce", names[v], "-", t, (double)cfg.bytes, (double)cfg.pixels, peer,
                "min, max, sum, sum of squares");
    }
    cudaFree(d_range);
}

/* ---- scan --------------------------------------------------------------------------- */

struct HistogramOfBin {
    __host__ __device__ int operator()(int i) const { return i / GF_BINS; }
};

static Peer cub_scan(const unsigned long long *d_hist, int histograms, const std::vector<unsigned long long> &want)
{
    Peer peer;
    peer.name = histograms == 1 ? "cub InclusiveSum" : "cub InclusiveSumByKey";
    unsigned long long *d_cdf = NULL;
    void *d_temp = NULL;
    size_t temp_bytes = 0;
    const int items = histograms * GF_BINS;
    CHECK(cudaMalloc((void **)&d_cdf, items * sizeof *d_cdf), "allocating CDFs");
    auto keys = thrust::make_transform_iterator(thrust::counting_iterator<int>(0), HistogramOfBin());
    auto call = [&](int) -> cudaError_t {
        if (histograms == 1)
            return cub::DeviceScan::InclusiveSum(d_temp, temp_bytes, d_hist, d_cdf, items, g_stream);
        return cub::DeviceScan::InclusiveSumByKey(d_temp, temp_bytes, keys, d_hist, d_cdf, items,
                                                  ::cuda::std::equal_to<>(), g_stream);
    };
    CHECK(call(0), "sizing the CUB scan");
    CHECK(cudaMalloc(&d_temp, temp_bytes ? temp_bytes : 1), "allocating CUB scratch");
    CHECK(call(0), "running the CUB scan");
    CHECK(cudaStreamSynchronize(g_stream), "running the CUB scan");
    std::vector<unsigned long long> got(items);
    CHECK(cudaMemcpy(got.data(), d_cdf, items * sizeof got[0], cudaMemcpyDeviceToHost), "downloading CDFs");
    if (got != want)
        peer.note = "cub output differs from the CPU reference";
    else if (histograms > 1)
        peer.note = "cub: by key (one segment per histogram)";
    peer.ms = time_runs(call, "running the CUB scan").median;
    cudaFree(d_temp);
    cudaFree(d_cdf);
    return peer;
}

/* The scans run on the CPU's histograms of the input (equal to the GPU's, as
 * the histogram rows check): 2 KiB in and 2 KiB out per histogram, so the
 * data sits in L2 and the launch dominates; no rotation is attempted. */
static void bench_scan(Config &cfg)
{
    progress(cfg, "scan");
    ensure_stats(cfg);
    const int histograms = cfg.channels;
    const int items = histograms * GF_BINS;
    std::vector<unsigned long long> hist(items), want(items);
    for (int c = 0; c < histograms; c++) {
        unsigned long long total = 0;
        for (int v = 0; v < GF_BINS; v++) {
            hist[c * GF_BINS + v] = cfg.stats[c].histogram[v];
            want[c * GF_BINS + v] = total += cfg.stats[c].histogram[v];
        }
    }
    unsigned long long *d_hist = NULL, *d_cdf = NULL;
    CHECK(cudaMalloc((void **)&d_hist, items * sizeof *d_hist), "allocating histograms");
    CHECK(cudaMalloc((void **)&d_cdf, items * sizeof *d_cdf), "allocating CDFs");
    CHECK(cudaMemcpy(d_hist, hist.data(), items * sizeof hist[0], cudaMemcpyHostToDevice),
          "uploading histograms");
    const Peer peer = cub_scan(d_hist, histograms, want);
    const double bytes = 2.0 * items * sizeof(unsigned long long);
    std::vector<unsigned long long> got(items);
    for (int v = 0; v < SCAN_VERSIONS; v++) {
        const std::string what = format("running scan v%d on %d histograms", v, histograms);
        CHECK(cudaMemset(d_cdf, 0, items * sizeof *d_cdf), "clearing CDFs");
        CHECK(scan_gpu(v, d_hist, d_cdf, histograms, g_stream), what);
        CHECK(cudaStreamSynchronize(g_stream), what);
        CHECK(cudaMemcpy(got.data(), d_cdf, items * sizeof got[0], cudaMemcpyDeviceToHost),
              "downloading CDFs");
        for (int i = 0; i < items; i++)
            if (got[i] != want[i])
                die(1, "scan v%d on %d histograms of %s differs from the CPU reference: histogram %d bin %d: "
                       "%llu, reference %llu", v, histograms, size_name(cfg).c_str(), i / GF_BINS,
                    i % GF_BINS, got[i], want[i]);
        Timing t = time_runs([&](int) { return scan_gpu(v, d_hist, d_cdf, histograms, g_stream); }, what);
        add_row(cfg, "scan", format("v%d", v), "-", t, bytes, 0.0, peer,
                format("%d x 256 bins, 64-bit; L2-resident, launch-bound", histograms));
    }
    cudaFree(d_hist);
    cudaFree(d_cdf);
}

/* ---- LUT apply and the equalize chain (in place) ------------------------------------- */

static int colour_of(const Config &cfg)
{
    return cfg.channels == 1 ? 1 : 3;
}

/* Copy in[0] into out[0], run op on out[0], and download it into got. */
template <class Op>
static void run_on_copy(const Config &cfg, Op op, const std::string &what, std::vector<unsigned char> &got)
{
    CHECK(cudaMemcpyAsync(cfg.out[0], cfg.in[0], cfg.bytes, cudaMemcpyDeviceToDevice, g_stream),
          "copying the input");
    CHECK(op(cfg.out[0]), what);
    CHECK(cudaStreamSynchronize(g_stream), what);
    got.resize(cfg.bytes);
    CHECK(cudaMemcpy(got.data(), cfg.out[0], cfg.bytes, cudaMemcpyDeviceToHost), "downloading the image");
}

static void first_difference(const Config &cfg, const std::vector<unsigned char> &got,
                             const std::vector<unsigned char> &want, const char *kernel)
{
    for (size_t i = 0; i < cfg.bytes; i++)
        if (got[i] != want[i]) {
            size_t px = i / cfg.channels;
            die(1, "%s on %s differs from the CPU reference: first at x=%d y=%d channel %d: %d, reference %d",
                kernel, size_name(cfg).c_str(), (int)(px % cfg.width), (int)(px / cfg.width),
                (int)(i % cfg.channels), got[i], want[i]);
        }
}

static void bench_lut(Config &cfg)
{
    progress(cfg, "lut apply");
    const int colour = colour_of(cfg);
    /* one random permutation per colour channel: values stay uniformly
     * spread however often the timed runs map a buffer in place */
    unsigned char lut[3 * GF_BINS];
    g_rng = 0xC0FFEE1234567ull;
    for (int c = 0; c < 3; c++) {
        unsigned char *t = lut + c * GF_BINS;
        for (int v = 0; v < GF_BINS; v++)
            t[v] = (unsigned char)v;
        for (int v = GF_BINS - 1; v > 0; v--)
            std::swap(t[v], t[next_random() % (uint64_t)(v + 1)]);
    }
    unsigned char *d_lut = NULL;
    CHECK(cudaMalloc((void **)&d_lut, sizeof lut), "allocating LUTs");
    CHECK(cudaMemcpy(d_lut, lut, sizeof lut, cudaMemcpyHostToDevice), "uploading LUTs");
    const std::string what = format("running lut_apply on %s", size_name(cfg).c_str());
    auto op = [&](unsigned char *px) {
        return lut_apply_gpu(px, cfg.pixels, cfg.channels, colour, d_lut, 1, g_stream);
    };
    std::vector<unsigned char> got, want(cfg.host);
    run_on_copy(cfg, op, what, got);
    for (size_t i = 0; i < cfg.pixels; i++)
        for (int c = 0; c < colour; c++)
            want[i * cfg.channels + c] = lut[c * GF_BINS + want[i * cfg.channels + c]];
    first_difference(cfg, got, want, "lut_apply");
    Timing t = time_runs([&](int i) { return op(cfg.in[i % cfg.buffers]); }, what);
    upload_inputs(cfg);  /* the timed runs mapped the inputs in place */
    add_row(cfg, "lut", "apply", "-", t, 2.0 * (double)cfg.bytes, (double)cfg.pixels, Peer(),
            format("in place, %d table%s", colour, colour > 1 ? "s" : ""));
    cudaFree(d_lut);
}

static void bench_equalize(Config &cfg)
{
    progress(cfg, "equalize chain");
    const int colour = colour_of(cfg);
    const int hv = HISTOGRAM_VERSIONS - 1, sv = SCAN_VERSIONS - 1;
    unsigned long long *d_hist = NULL, *d_cdf = NULL;
    unsigned char *d_lut = NULL;
    CHECK(cudaMalloc((void **)&d_hist, 4 * GF_BINS * sizeof *d_hist), "allocating histograms");
    CHECK(cudaMalloc((void **)&d_cdf, 4 * GF_BINS * sizeof *d_cdf), "allocating CDFs");
    CHECK(cudaMalloc((void **)&d_lut, 4 * GF_BINS), "allocating LUTs");
    /* --equalize=channels (gray: --equalize): what the CUDA backend runs */
    auto chain = [&](unsigned char *px) {
        cudaError_t err = histogram_gpu(hv, px, cfg.pixels, cfg.channels, 0, d_hist, g_stream);
        if (err == cudaSuccess)
            err = scan_gpu(sv, d_hist, d_cdf, colour, g_stream);
        if (err == cudaSuccess)
            err = lut_equalize_gpu(d_hist, d_cdf, colour, d_lut, g_stream);
        if (err == cudaSuccess)
            err = lut_apply_gpu(px, cfg.pixels, cfg.channels, colour, d_lut, 1, g_stream);
        return err;
    };
    const std::string what = format("running the equalize chain on %s", size_name(cfg).c_str());
    std::vector<unsigned char> got, want(cfg.host);
    run_on_copy(cfg, chain, what, got);
    gf_equalize_cpu(want.data(), cfg.pixels, cfg.channels, GF_EQUALIZE_CHANNELS, colour);
    first_difference(cfg, got, want, "the equalize chain");
    Timing t = time_runs([&](int i) { return chain(cfg.in[i % cfg.buffers]); }, what);
    upload_inputs(cfg);
    add_row(cfg, "equalize", format("hist v%d+scan v%d+lut", hv, sv), "-", t, 2.0 * (double)cfg.bytes,
            (double)cfg.pixels, Peer(), "4 launches; counted as 1 read + 1 write");
    cudaFree(d_hist);
    cudaFree(d_cdf);
    cudaFree(d_lut);
}

/* ---- report -------------------------------------------------------------------------- */

static std::string g_device_line, g_versions_line, g_npp_line;

static std::string number(double v, const char *fmt)
{
    return isfinite(v) ? format(fmt, v) : std::string("-");
}

static std::string ms_text(double ms)
{
    return !isfinite(ms) ? std::string("-") : ms < 0.1 ? format("%.4f", ms) : format("%.3f", ms);
}

static void print_table(void)
{
    const char *heads[] = {"kernel", "version", "size",    "mask",    "ms",        "Gpx/s", "GB/s",
                           "%copy",  "peer",    "peer ms", "peer/ours", "note"};
    const int columns = sizeof heads / sizeof heads[0];
    const bool left[] = {true, true, true, true, false, false, false, false, true, false, false, true};
    std::vector<std::vector<std::string>> cells;
    for (const Row &r : g_rows) {
        cells.push_back({r.kernel, r.version, format("%dx%dx%d", r.width, r.height, r.channels), r.mask,
                         ms_text(r.t.median), number(r.gpxs, "%.1f"), number(r.gbs, "%.0f"),
                         number(r.pct, "%.1f"), r.peer.empty() ? "-" : r.peer, ms_text(r.peer_ms),
                         number(r.ratio, "%.2f"), r.note});
    }
    std::vector<size_t> width(columns);
    for (int c = 0; c < columns; c++) {
        width[c] = strlen(heads[c]);
        for (const auto &row : cells)
            width[c] = std::max(width[c], row[c].size());
    }
    printf("%s\n%s\n%s\n", g_device_line.c_str(), g_versions_line.c_str(), g_npp_line.c_str());
    printf("bytes: each input read once, each output written once (conv2d, lut, equalize: read + write; "
           "histogram, reduce: read); %%copy: of the copy row of the same size; peer/ours: peer ms / our ms "
           "(> 1: ours is faster)\n");
    auto print_row = [&](const std::vector<std::string> &row) {
        std::string line;
        for (int c = 0; c < columns; c++) {
            const bool last = c == columns - 1;
            if (last)
                line += row[c];
            else if (left[c])
                line += format("%-*s  ", (int)width[c], row[c].c_str());
            else
                line += format("%*s  ", (int)width[c], row[c].c_str());
        }
        while (!line.empty() && line.back() == ' ')
            line.pop_back();
        printf("%s\n", line.c_str());
    };
    print_row(std::vector<std::string>(heads, heads + columns));
    for (const auto &row : cells)
        print_row(row);
}

static std::string json_string(const std::string &s)
{
    std::string out = "\"";
    for (char ch : s) {
        unsigned char c = (unsigned char)ch;
        if (c == '"' || c == '\\')
            out += '\\', out += ch;
        else if (c < 0x20)
            out += format("\\u%04x", c);
        else
            out += ch;
    }
    return out + "\"";
}

static std::string json_number(double v)
{
    return isfinite(v) ? format("%.6g", v) : std::string("null");
}

static void write_json(const char *path, int driver, int runtime, int clock_khz)
{
    FILE *f = fopen(path, "w");
    if (!f)
        die(1, "cannot write %s: %s", path, strerror(errno));
    fprintf(f, "{\n  \"device\": {\"name\": %s, \"ordinal\": %d, \"sms\": %d, \"l2_bytes\": %d, "
               "\"sm_clock_mhz\": %d, \"compute_capability\": \"%d.%d\", \"driver\": %d, \"runtime\": %d, "
               "\"npp\": %s},\n",
            json_string(g_prop.name).c_str(), g_opt.device, g_prop.multiProcessorCount, g_prop.l2CacheSize,
            clock_khz / 1000, g_prop.major, g_prop.minor, driver, runtime,
#ifdef GF_HAVE_NPP
            "true"
#else
            "false"
#endif
    );
    fprintf(f, "  \"reps\": %d, \"warmup\": %d, \"timing\": \"%s\", \"tile\": %s,\n  \"rows\": [\n",
            g_opt.reps, g_opt.warmup, g_opt.queued ? "queued" : "alone",
            g_opt.tile_given ? format("[%d, %d]", g_opt.tile_width, g_opt.tile_height).c_str() : "null");
    for (size_t i = 0; i < g_rows.size(); i++) {
        const Row &r = g_rows[i];
        fprintf(f,
                "    {\"kernel\": %s, \"version\": %s, \"width\": %d, \"height\": %d, \"channels\": %d, "
                "\"mask\": %s, \"tile\": %s, \"ms\": %s, \"ms_min\": %s, \"ms_max\": %s, \"host_us\": %s, "
                "\"bytes\": %.0f, "
                "\"gpx_per_s\": %s, \"gb_per_s\": %s, \"percent_of_copy\": %s, \"peer\": %s, "
                "\"peer_ms\": %s, \"peer_over_ours\": %s, \"note\": %s}%s\n",
                json_string(r.kernel).c_str(), json_string(r.version).c_str(), r.width, r.height, r.channels,
                r.mask == "-" ? "null" : json_string(r.mask).c_str(),
                r.tile_width ? format("[%d, %d]", r.tile_width, r.tile_height).c_str() : "null",
                json_number(r.t.median).c_str(),
                json_number(r.t.min).c_str(), json_number(r.t.max).c_str(), json_number(r.t.host_us).c_str(),
                r.bytes,
                json_number(r.gpxs).c_str(), json_number(r.gbs).c_str(), json_number(r.pct).c_str(),
                r.peer.empty() ? "null" : json_string(r.peer).c_str(), json_number(r.peer_ms).c_str(),
                json_number(r.ratio).c_str(), json_string(r.note).c_str(), i + 1 < g_rows.size() ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    if (fclose(f) != 0)
        die(1, "cannot write %s: %s", path, strerror(errno));
}

/* ---- main -------------------------------------------------------------------------------- */

static const char *no_device_reason(cudaError_t err)
{
    switch (err) {
    case cudaSuccess:
    case cudaErrorNoDevice:
        return "no CUDA device found";
    case cudaErrorInsufficientDriver:
        return "no NVIDIA driver, or one too old for this build's CUDA runtime";
    default:
        return cudaGetErrorString(err);
    }
}

int main(int argc, char **argv)
{
    parse_options(argc, argv);
    add_bench_mask_folder();
    std::vector<gf_mask> masks;
    if (g_opt.kernels & K_CONV2D)
        for (const std::string &name : g_opt.masks) {
            gf_mask m;
            if (gf_mask_load(name.c_str(), &m) < 0)
                die(2, "%s", library_error());
            masks.push_back(m);
        }

    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0)
        die(1, "no usable GPU (%s)", no_device_reason(err));
    if (g_opt.device >= count)
        die(2, "no CUDA device %d (this machine has %d)", g_opt.device, count);
    CHECK(cudaSetDevice(g_opt.device), "selecting the device");
    CHECK(cudaGetDeviceProperties(&g_prop, g_opt.device), "reading device properties");
    CHECK(cudaStreamCreate(&g_stream), "creating a stream");
    CHECK(cudaEventCreate(&g_start), "creating an event");
    CHECK(cudaEventCreate(&g_stop), "creating an event");

    int driver = 0, runtime = 0, clock_khz = 0, mem_clock_khz = 0, bus_bits = 0;
    CHECK(cudaDriverGetVersion(&driver), "reading the driver version");
    CHECK(cudaRuntimeGetVersion(&runtime), "reading the runtime version");
    CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, g_opt.device), "reading the clock");
    CHECK(cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, g_opt.device),
          "reading the memory clock");
    CHECK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, g_opt.device),
          "reading the bus width");
    g_device_line = format("%s on %s (device %d, compute %d.%d): %d SMs, L2 %.1f MiB, SM clock %d MHz, "
                           "memory %d-bit at %d MHz, %.1f GiB",
                           PROG, g_prop.name, g_opt.device, g_prop.major, g_prop.minor,
                           g_prop.multiProcessorCount, g_prop.l2CacheSize / 1048576.0, clock_khz / 1000,
                           bus_bits, mem_clock_khz / 1000, g_prop.totalGlobalMem / 1073741824.0);
    g_versions_line = format("driver %d.%d, runtime %d.%d, CUB %d.%d.%d; median of %d runs%s after %d "
                             "warm-up, %s, inputs rotated over buffers > 2x L2 (at most %d buffers); conv2d tile: gpufilter's own unless --tile (x N: N tiles a block walks down), border nearest",
                             driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10,
                             CUB_MAJOR_VERSION, CUB_MINOR_VERSION, CUB_SUBMINOR_VERSION, g_opt.reps,
                             g_opt.reps < 20 ? " (fewer than the 20 the method asks for)" : "",
                             g_opt.warmup,
                             g_opt.queued ? "queued back to back (device time, no launch latency)"
                                          : "each launched alone (launch latency counted)",
                             kMaxBuffers);
#ifdef GF_HAVE_NPP
#ifdef NPP_VERSION_MAJOR
    g_npp_line = format("NPP %d.%d.%d: conv2d peer nppiFilterBorder_8u_C1R/_C4R_Ctx, NPP_BORDER_REPLICATE",
                        NPP_VERSION_MAJOR, NPP_VERSION_MINOR, NPP_VERSION_BUILD);
#else
    g_npp_line = "NPP: conv2d peer nppiFilterBorder_8u_C1R/_C4R_Ctx, NPP_BORDER_REPLICATE";
#endif
#else
    g_npp_line = "NPP missing: built without npp.h (GF_HAVE_NPP unset), so the conv2d peer columns are empty";
#endif

    for (const Size &size : g_opt.sizes)
        for (int channels : g_opt.channels) {
            Config cfg;
            setup_config(cfg, size.width, size.height, channels);
            progress(cfg, format("%d input buffers of %.1f MiB (L2 %.1f MiB)", cfg.buffers,
                                 cfg.bytes / 1048576.0, g_prop.l2CacheSize / 1048576.0).c_str());
            bench_copy(cfg);
            if (g_opt.kernels & K_CONV2D)
                for (const gf_mask &m : masks)
                    bench_conv2d(cfg, m);
            if (g_opt.kernels & K_HISTOGRAM)
                bench_histogram(cfg);
            if (g_opt.kernels & K_REDUCE)
                bench_reduce(cfg);
            if (g_opt.kernels & K_SCAN)
                bench_scan(cfg);
            if (g_opt.kernels & K_LUT)
                bench_lut(cfg);
            if (g_opt.kernels & K_EQUALIZE)
                bench_equalize(cfg);
            free_config(cfg);
        }

    if (!g_opt.json.empty())
        write_json(g_opt.json.c_str(), driver, runtime, clock_khz);
    print_table();
    cudaEventDestroy(g_start);
    cudaEventDestroy(g_stop);
    cudaStreamDestroy(g_stream);
    return 0;
}
