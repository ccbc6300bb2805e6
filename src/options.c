/* options.c - the command line: getopt_long options -> gf_job. */
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diffuse_params.h"
#include "jpeg_turbo.h"
#include "mask.h"
#include "nvjpeg_codec.h"
#include "util.h"

#ifndef GF_VERSION
#define GF_VERSION "0.1.0"
#endif

enum {
    OPT_BACKEND = 256,
    OPT_TILE,
    OPT_KERNEL,
    OPT_FFT,
    OPT_DEVICE,
    OPT_FILTER_ALPHA,
    OPT_LIST_MASKS,
    OPT_LIST_DEVICES,
    OPT_LIST_PATHS,
    OPT_STATS,
    OPT_EQUALIZE,
    OPT_NORMALIZE,
    OPT_CLAHE,
    OPT_AUTO_LEVEL,
    OPT_MAX_PIXELS,
    OPT_FILES_FROM,
    OPT_SUFFIX,
    OPT_SHARD,
    OPT_QUIET,
    OPT_PNG_LEVEL,
    OPT_GPU_MEMORY,
    OPT_DEVICES,
    OPT_CSV,
    OPT_MAX_MEMORY,
    OPT_DECODE_TIMEOUT,
    OPT_OUTPUT,
    OPT_FORCE,
    OPT_GRAY,
    OPT_DEPTH,
    OPT_VERIFY,
    OPT_SUMMARY,
    OPT_CODEC,
    OPT_NO_AUTOROTATE,
    OPT_DIFFUSE,
};

void gf_job_init(gf_job *j)
{
    memset(j, 0, sizeof *j);
    j->png_level = GF_DEFAULT_PNG_LEVEL;
    j->decode_timeout = -1.0;
    j->quality = 92;
    j->autorotate = 1;
    j->backend_options.conv_version = GF_CONV_AUTO;
}

void gf_job_free(gf_job *j)
{
    gf_pipeline_free(&j->pipeline);
}

static void usage(FILE *out)
{
    fprintf(out,
"Usage: gpufilter [OPTION]... INPUT OUTPUT\n"
"       gpufilter [OPTION]... --output OUTPUT INPUT\n"
"       gpufilter [OPTION]... --stats[=FORMAT] [--output OUTPUT] INPUT...\n"
"       gpufilter --tile sweep [--csv] -m MASK|--diffuse[=...] INPUT\n"
"       gpufilter [OPTION]... -o DIR [--files-from FILE] [INPUT]...\n"
"Filter an image with convolution masks and tone operations, on the GPU when\n"
"there is one. INPUT and OUTPUT may be '-' for standard input and output.\n"
"\n"
"Operations, applied in command-line order:\n"
"  -m, --mask NAME|FILE   convolve with a mask. NAME is a built-in or\n"
"                         installed mask (--list-masks), or one with\n"
"                         parameters: gaussian:sigma=S (,boxes=N: N box\n"
"                         blurs instead, constant time), box:radius=R,\n"
"                         unsharp:sigma=S,amount=A,threshold=T, sharpen,\n"
"                         log, dog (--list-masks); a value with a '/' or\n"
"                         ending in .mask is a file (up to 4095x4095)\n"
"      --equalize[=MODE]  histogram equalization: luminance (default; colours\n"
"                         kept) or channels (each channel on its own)\n"
"      --normalize[=B,W]  stretch contrast so that B%% of the pixels turn black\n"
"                         and W%% white, on luminance, channels linked\n"
"                         (default 2,1)\n"
"      --clahe[=CLIP[,COLSxROWS[,MODE]]]\n"
"                         contrast-limited adaptive histogram equalization, as\n"
"                         OpenCV's createCLAHE(CLIP, (COLS, ROWS)) (default\n"
"                         40,8x8; CLIP 0: no limit), on luminance (default) or\n"
"                         MODE channels (each channel on its own)\n"
"      --auto-level       stretch the darkest value to 0 and the brightest to\n"
"                         255, over all colour channels\n"
"      --diffuse[=KIND[:KEY=VALUE,...]]\n"
"                         iterative diffusion in double precision (float on\n"
"                         the GPU), rounded once at the end: KIND heat, pm-exp\n"
"                         (Perona-Malik, g = exp(-(|d|/K)^2); the default) or\n"
"                         pm-rational (g = 1/(1+(|d|/K)^2)); keys iterations\n"
"                         (16), step (0.2, at most 0.25), k (default: the\n"
"                         percentile of the gradient magnitudes), percentile\n"
"                         (90), e.g. --diffuse=pm-exp:iterations=20,k=12;\n"
"                         follows -b and --filter-alpha as masks do\n"
"      --gray             convert colour to luminance (BT.601, as --equalize)\n"
"                         right after decoding: RGB -> gray, RGBA -> gray+alpha\n"
"      --depth 8|16       bits a sample, set right after decoding: 8 rounds\n"
"                         16-bit samples to round(v / 257), 16 takes 8-bit ones\n"
"                         to v * 257 (default: the input's; 16-bit PNG and PNM\n"
"                         of maxval over 255 are read at 16). PNG is written at\n"
"                         the image's depth; JPEG, BMP and TGA hold 8 bits and\n"
"                         get 16-bit images rounded as --depth 8 does\n"
"      --stats[=FORMAT]   print statistics of the result: table (default) or\n"
"                         json (a document a file); on stderr when OUTPUT is\n"
"                         '-'. Every argument is an INPUT: an image is written\n"
"                         only to --output or -o DIR\n"
"Tone operations never change alpha.\n"
"\n"
"      --summary          with --stats over several files: then the statistics\n"
"                         of all their pixels together, per channel name\n"
"\n"
"Options:\n"
"      --output FILE      write the result to FILE ('-': standard output)\n"
"      --force            let a positional OUTPUT replace an existing image that\n"
"                         gpufilter did not write (refused by default: it may\n"
"                         be an input typed where the output goes)\n"
"  -b, --border MODE      how pixels outside the image are read (scipy.ndimage\n"
"                         names): nearest (default), constant (zero), reflect,\n"
"                         mirror, wrap\n"
"      --filter-alpha     filter the alpha channel too (default: unchanged)\n"
"      --no-autorotate    keep a JPEG's pixels in their stored order; by default\n"
"                         they are turned by its EXIF Orientation tag first, as\n"
"                         viewers show it (the output carries no such tag)\n"
"  -f, --format FMT       output format: png, jpg (jpeg), bmp, tga; default: from\n"
"                         OUTPUT's extension, png for standard output\n"
"  -q, --quality N        JPEG quality 1-100 (default 92)\n"
"      --codec C          JPEG codec: auto (default: nvJPEG for a batch of 256\n"
"                         MiB of JPEG or more on a GPU with a hardware decoder;\n"
"                         else the CPU's), cpu, gpu (one INPUT too)\n"
"      --png-level N      PNG compression 0 (fastest, largest) to 12 (default 1)\n"
"      --backend B        auto (default: the CPU for small work, else the GPU\n"
"                         if usable; -v says why), cuda, cpu (all cores),\n"
"                         reference (the one-thread double-precision oracle:\n"
"                         the same bytes as cpu, slower)\n"
"      --device N         CUDA device to use (default 0; see --list-devices)\n"
"      --devices all|LIST spread a batch over these CUDA devices, e.g. 0,2\n"
"      --tile WxH|auto    CUDA thread-block tile for masks up to 31x31, e.g. 32x8\n"
"                         (default auto: chosen with the occupancy API, or\n"
"                         a tile measured faster for the kernel's path)\n"
"      --tile sweep       time the one -m MASK or --diffuse on INPUT with\n"
"                         every candidate tile: threads, occupancy, shared\n"
"                         memory, ms (the median of 20 runs, in 4 rounds\n"
"                         over the tiles), Gpx/s, %% of the copy bandwidth;\n"
"                         the auto choice is marked. --csv prints it as CSV\n"
"      --kernel VERSION   CUDA conv2d version for masks up to 31x31: auto\n"
"                         (default: the fastest measured for the mask and\n"
"                         image; -v names it), or for experiments direct,\n"
"                         separable, blocked, tiled, naive; for --diffuse:\n"
"                         global, shared, temporal[:K] (K 1-8 iterations\n"
"                         a launch on a shared tile, --tile WxH), or\n"
"                         stream[:K] (the default: K iterations a launch in\n"
"                         registers, a warp streaming down a strip; --tile\n"
"                         WxH: W 64 or 128 columns a strip, H rows a warp;\n"
"                         default K 8, 64x64; -v prints them)\n"
"      --fft MODE         GPU masks past 31x31 (boxes aside) by FFT: auto\n"
"                         (default: where the estimates say it is faster;\n"
"                         -v names the method), always, never\n"
"      --gpu-memory SIZE  GPU memory the image buffers may use, e.g. 512M\n"
"                         (default: what the device has free). A larger image\n"
"                         is processed in horizontal strips\n"
"\n"
"Batches (several inputs, written to a folder):\n"
"  -o, --output-dir DIR   write each INPUT's result to DIR (created if missing),\n"
"                         named after the input: DIR/NAME[SUFFIX].EXT\n"
"      --files-from FILE  read input paths from FILE, one per line ('-': stdin)\n"
"      --suffix S         add S to each output name before its extension\n"
"  -j, --jobs N           threads (default: the cores): a batch's files at once;\n"
"                         for one image, its bands of rows (CPU filtering, PNG\n"
"                         encoding)\n"
"      --shard I/N        process only shard I (0 <= I < N) of the inputs, split\n"
"                         by a hash of each path: N runs cover every file once\n"
"      --quiet            no progress line (shown only when stderr is a terminal)\n"
"                         and no notes; errors are still printed\n"
"  A file that fails is reported and skipped; the exit status is then 1.\n"
"\n"
"      --max-pixels N     refuse images of more than N pixels before decoding\n"
"                         them (default 1073741824, 1 Gpx)\n"
"      --max-memory SIZE  memory the images being decoded and filtered may\n"
"                         take together, e.g. 8G (default: half the RAM); a\n"
"                         batch waits for room, a larger image is refused\n"
"      --decode-timeout S give up on a file whose decoding takes over S\n"
"                         seconds (default 120; 0: no limit)\n"
"      --verify           run the reference (CPU, double precision) too and print\n"
"                         the largest difference and where; exit 1, nothing\n"
"                         written, if it is over 1 level\n"
"  -v, --verbose          print each launch (the direct kernel's arithmetic\n"
"                         path, tile, block, grid, tiles per block,\n"
"                         occupancy, shared memory, time) and the time of\n"
"                         each stage\n"
"      --list-masks       list the masks found and exit\n"
"      --list-devices     list the CUDA devices and exit (status 1 if none)\n"
"      --list-paths       list the direct kernel's paths (masks, sizes) and exit\n"
"  -h, --help             show this help and exit\n"
"  -V, --version          show the version and exit\n"
"\n"
"Masks are searched next to the executable (masks/, ../masks/,\n"
"../share/gpufilter/masks/), in " "the install prefix, in the folders of\n"
"$GPUFILTER_MASKS (':'-separated), then among the built-in masks.\n"
"\n"
"Exit status: 0 success, 1 a file or the device failed, 2 bad usage.\n"
"\n"
"Examples:\n"
"  gpufilter -m sobel in.png out.png\n"
"  gpufilter -m gaussian5 -m sharpen --border reflect photo.jpg out.jpg\n"
"  cat in.png | gpufilter -m box3 - - > out.png\n");
}

static int usage_error(const char *fmt, const char *value)
{
    fprintf(stderr, "gpufilter: ");
    fprintf(stderr, fmt, value);
    fprintf(stderr, "\nTry 'gpufilter --help' for more information.\n");
    return GF_EXIT_USAGE;
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || errno != 0 || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

static int out_of_memory(void)
{
    fprintf(stderr, "gpufilter: out of memory\n");
    return GF_EXIT_FILE;
}

/* "B,W": two finite percentages, each >= 0, summing to less than 100. */
static int parse_percentages(const char *s, double *black, double *white)
{
    char *end;
    errno = 0;
    double b = strtod(s, &end);
    if (end == s || *end != ',' || errno)
        return -1;
    const char *second = end + 1;
    double w = strtod(second, &end);
    if (end == second || *end != '\0' || errno)
        return -1;
    if (!(b >= 0.0 && w >= 0.0 && b + w < 100.0))  /* also rejects NaN */
        return -1;
    *black = b;
    *white = w;
    return 0;
}

/* "I/N": shard I of N, 0 <= I < N. */
static int parse_shard(const char *s, int *index, int *count)
{
    const char *slash = strchr(s, '/');
    char left[32];
    size_t n = slash ? (size_t)(slash - s) : 0;
    if (!slash || n == 0 || n >= sizeof left)
        return -1;
    memcpy(left, s, n);
    left[n] = '\0';
    if (parse_int(left, 0, 1 << 20, index) < 0 || parse_int(slash + 1, 1, 1 << 20, count) < 0 ||
        *index >= *count)
        return -1;
    return 0;
}

/* One image: INPUT OUTPUT, or INPUT with --output FILE, or INPUT alone with
 * --stats (an image written only when --output names it). */
static int parse_single_paths(gf_job *j, char **paths, int count)
{
    if (count == 0)
        return usage_error("%s", j->stats || j->output_named ? "expected an INPUT path"
                                                             : "expected an INPUT and an OUTPUT path");
    if ((j->stats || j->output_named) && count > 1)
        return usage_error("%s", "--output names the output: give one INPUT beside it");
    if (count > 2)
        return usage_error("%s", "too many arguments: expected INPUT OUTPUT (for several "
                                 "inputs, -o DIR)");
    if (count == 1 && !j->stats && !j->output_named)
        return usage_error("%s", "expected an OUTPUT path (or --stats)");
    j->input = paths[0];
    if (count == 2)
        j->output = paths[1];
    return -1;
}

/* Batch mode: every argument is an input; the outputs go to -o DIR. */
static int check_batch(gf_job *j, char **paths, int count)
{
    if (!j->output_dir && !j->stats)
        return usage_error("%s", "a batch needs -o DIR for its outputs (or --stats alone)");
    if (count == 0 && !j->files_from)
        return usage_error("%s", "no input files: give them as arguments or with --files-from");
    for (int i = 0; i < count; i++)
        if (strcmp(paths[i], "-") == 0)
            return usage_error("%s", "'-' cannot be an input of a batch; use --files-from - for a list of paths");
    j->inputs = paths;
    j->input_count = count;
    return -1;
}

/* The index of s among a NULL-terminated list of names (an enum's values
 * in order), or -1. */
static int parse_choice(const char *s, const char *const *names)
{
    for (int i = 0; names[i]; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

static const char *const border_names[] = {"nearest", "constant", "reflect", "mirror", "wrap", NULL};
static const char *const backend_names[] = {"auto", "cpu", "cuda", "reference", NULL};
static const char *const codec_names[] = {"auto", "cpu", "gpu", NULL};
/* indexed by gf_conv_version */
static const char *const kernel_names[] = {"naive", "tiled", "blocked", "separable", "direct", "auto", NULL};
/* indexed by gf_fft_mode */
static const char *const fft_names[] = {"auto", "always", "never", NULL};

static int parse_tile(const char *s, int *width, int *height)
{
    if (strcmp(s, "auto") == 0) {
        *width = *height = 0;
        return 0;
    }
    const char *x = strchr(s, 'x');
    if (!x || x == s)
        return -1;
    char left[32];
    size_t n = (size_t)(x - s);
    if (n >= sizeof left)
        return -1;
    memcpy(left, s, n);
    left[n] = '\0';
    return parse_int(left, 1, 1 << 16, width) < 0 || parse_int(x + 1, 1, 1 << 16, height) < 0 ? -1 : 0;
}

/* --clahe's "CLIP[,COLSxROWS[,MODE]]": OpenCV's clipLimit (finite, >= 0;
 * 0 does not clip), tileGridSize of 1..256 a side, luminance or channels. */
static int parse_clahe(const char *s, gf_clahe *how)
{
    char *end;
    errno = 0;
    how->clip = strtod(s, &end);
    if (end == s || errno || !(how->clip >= 0.0) || !isfinite(how->clip))
        return -1;
    if (*end == '\0')
        return 0;
    char grid[32];
    const char *field = end + 1, *comma = strchr(field, ',');
    size_t n = comma ? (size_t)(comma - field) : strlen(field);
    if (*end != ',' || n >= sizeof grid)
        return -1;
    memcpy(grid, field, n);
    grid[n] = '\0';
    if (parse_tile(grid, &how->tiles_x, &how->tiles_y) < 0 || how->tiles_x < 1 ||
        how->tiles_x > 256 || how->tiles_y < 1 || how->tiles_y > 256)
        return -1;
    if (!comma)
        return 0;
    if (strcmp(comma + 1, "channels") != 0 && strcmp(comma + 1, "luminance") != 0)
        return -1;
    how->per_channel = strcmp(comma + 1, "channels") == 0;
    return 0;
}

/* "all", or distinct device numbers separated by commas. */
static int parse_devices(const char *s, gf_job *j)
{
    j->all_devices = strcmp(s, "all") == 0;
    j->device_count = 0;
    if (j->all_devices)
        return 0;
    char copy[256];
    if (strlen(s) >= sizeof copy || s[0] == '\0' || s[strlen(s) - 1] == ',')
        return -1;
    strcpy(copy, s);
    for (char *save = NULL, *item = strtok_r(copy, ",", &save); item;
         item = strtok_r(NULL, ",", &save)) {
        int d;
        if (j->device_count == GF_MAX_DEVICES || parse_int(item, 0, 1023, &d) < 0)
            return -1;
        for (int i = 0; i < j->device_count; i++)
            if (j->devices[i] == d)
                return -1;
        j->devices[j->device_count++] = d;
    }
    return j->device_count > 0 && !strstr(s, ",,") ? 0 : -1;
}

/* The largest tile any kernel version takes: version 4's row streams at
 * 512x64 (gray: 32 x 8 threads of 16 pixels by 8 rows; the sweep's widest
 * and tallest). Versions 2 and 3 compute up to 16 pixels per thread, 256
 * threads a block; each version checks its own tiles when it runs. */
#define GF_TILE_MAX_PIXELS 32768  /* the usage message below names it */

/* A positive size in bytes with an optional K, M or G suffix (powers of 1024). */
static int parse_bytes(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno || s[0] == '-' || v == 0)
        return -1;
    int shift = 0;
    if (*end == 'K' || *end == 'k')
        shift = 10;
    else if (*end == 'M' || *end == 'm')
        shift = 20;
    else if (*end == 'G' || *end == 'g')
        shift = 30;
    if (shift && *++end == 'B')
        end++;
    if (*end != '\0' || v > (SIZE_MAX >> shift))
        return -1;
    *out = (size_t)v << shift;
    return 0;
}

/* --tile sweep -m MASK INPUT: one image, one mask, the CUDA backend. */
static int check_sweep(gf_job *j, char **paths, int count)
{
    if (j->batch || count != 1)
        return usage_error("%s", "--tile sweep takes one INPUT image and no OUTPUT");
    if (j->pipeline.count != 1 ||
        (j->pipeline.ops[0].kind != GF_OP_CONVOLVE && j->pipeline.ops[0].kind != GF_OP_DIFFUSE))
        return usage_error("%s", "--tile sweep needs exactly one -m MASK or one --diffuse (and no "
                                 "other operation)");
    if (j->backend == GF_BACKEND_CPU || j->backend == GF_BACKEND_REFERENCE)
        return usage_error("%s", "--tile sweep measures CUDA launches; it needs --backend cuda or auto");
    j->input = paths[0];
    return -1;
}

#define NOT_MINE (-2)  /* a group parser's answer for another group's option */

/* The operations and what they apply to: masks, border, tone, statistics.
 * -1 when c is parsed, NOT_MINE when c is another group's, else the
 * exit status (printed). */
static int parse_operation_option(int c, const char *arg, gf_job *j)
{
    int choice;
    switch (c) {
    case 'm':
        if (gf_pipeline_name_mask(&j->pipeline, arg) < 0)
            return out_of_memory();
        break;
    case 'b':
        if ((choice = parse_choice(arg, border_names)) < 0)
            return usage_error("unknown border mode '%s' (nearest, constant, reflect, mirror, wrap)", arg);
        j->pipeline.border = (gf_border)choice;
        break;
    case OPT_FILTER_ALPHA:
        j->pipeline.filter_alpha = 1;
        break;
    case OPT_STATS:
        if (!arg || strcmp(arg, "table") == 0)
            j->stats = GF_STATS_TABLE;
        else if (strcmp(arg, "json") == 0)
            j->stats = GF_STATS_JSON;
        else
            return usage_error("unknown statistics format '%s' (table, json)", arg);
        break;
    case OPT_EQUALIZE: {
        gf_equalize_mode mode;
        if (!arg || strcmp(arg, "luminance") == 0)
            mode = GF_EQUALIZE_LUMINANCE;
        else if (strcmp(arg, "channels") == 0)
            mode = GF_EQUALIZE_CHANNELS;
        else
            return usage_error("unknown equalize mode '%s' (luminance, channels)", arg);
        if (gf_pipeline_add_equalize(&j->pipeline, mode) < 0)
            return out_of_memory();
        break;
    }
    case OPT_NORMALIZE: {
        gf_stretch how = {.kind = GF_STRETCH_NORMALIZE, .black = 2.0, .white = 1.0};
        if (arg && parse_percentages(arg, &how.black, &how.white) < 0)
            return usage_error("--normalize=%s: expected B,W: two percentages, each 0 or more, "
                               "summing to less than 100", arg);
        if (gf_pipeline_add_stretch(&j->pipeline, &how) < 0)
            return out_of_memory();
        break;
    }
    case OPT_CLAHE: {
        gf_clahe how = {.clip = 40.0, .tiles_x = 8, .tiles_y = 8};
        if (arg && parse_clahe(arg, &how) < 0)
            return usage_error("--clahe=%s: expected CLIP[,COLSxROWS[,MODE]]: a clip limit of 0 "
                               "or more, 1 to 256 tiles a side, luminance or channels", arg);
        if (gf_pipeline_add_clahe(&j->pipeline, &how) < 0)
            return out_of_memory();
        break;
    }
    case OPT_AUTO_LEVEL: {
        gf_stretch how = {.kind = GF_STRETCH_AUTO_LEVEL};
        if (gf_pipeline_add_stretch(&j->pipeline, &how) < 0)
            return out_of_memory();
        break;
    }
    case OPT_DIFFUSE: {
        gf_diffuse how;
        if (gf_diffuse_parse(arg ? arg : "pm-exp", &how) < 0)
            return usage_error("%s", gf_error() + strlen("gpufilter: "));
        if (gf_pipeline_add_diffuse(&j->pipeline, &how) < 0)
            return out_of_memory();
        break;
    }
    case OPT_GRAY:
        j->gray = 1;
        break;
    case OPT_DEPTH:
        if (strcmp(arg, "8") != 0 && strcmp(arg, "16") != 0)
            return usage_error("--depth '%s' is not 8 or 16", arg);
        j->depth = atoi(arg);
        break;
    case OPT_NO_AUTOROTATE:
        j->autorotate = 0;
        break;
    default:
        return NOT_MINE;
    }
    return -1;
}

/* What is written and how: format, quality, codec, the output file, -v.
 * -1 when c is parsed, NOT_MINE when c is another group's, else the
 * exit status (printed). */
static int parse_output_option(int c, const char *arg, gf_job *j)
{
    int choice;
    switch (c) {
    case 'f':
        if ((j->format = gf_format_from_name(arg)) == GF_FORMAT_NONE)
            return usage_error("unknown output format '%s' (png, jpg, bmp, tga)", arg);
        break;
    case 'q':
        if (parse_int(arg, 1, 100, &j->quality) < 0)
            return usage_error("quality '%s' is not a whole number from 1 to 100", arg);
        break;
    case 'v':
        j->verbose = 1;
        break;
    case OPT_CODEC:
        if ((choice = parse_choice(arg, codec_names)) < 0)
            return usage_error("unknown codec '%s' (auto, cpu, gpu)", arg);
        j->codec = (gf_codec_choice)choice;
        break;
    case OPT_CSV:
        j->csv = 1;
        break;
    case OPT_OUTPUT:
        if (arg[0] == '\0')
            return usage_error("%s", "--output '' is empty; give a file name, or - for "
                                     "standard output");
        j->output = arg;
        j->output_named = 1;
        break;
    case OPT_FORCE:
        j->force = 1;
        break;
    case OPT_VERIFY:
        j->verify = 1;
        break;
    case OPT_SUMMARY:
        j->summary = 1;
        break;
    case OPT_PNG_LEVEL:
        if (parse_int(arg, 0, 12, &j->png_level) < 0)
            return usage_error("--png-level '%s' is not a whole number from 0 to 12", arg);
        break;
    case OPT_QUIET:
        j->quiet = 1;
        break;
    default:
        return NOT_MINE;
    }
    return -1;
}

/* --kernel global|shared|temporal[:K]|stream[:K] (--diffuse's versions):
 * -1 when parsed, NOT_MINE for another name, else the exit status (printed). */
static int parse_diffuse_kernel(const char *arg, gf_backend_options *o)
{
    static const char *const names[] = {"global", "shared", "temporal", "stream", NULL};
    const char *colon = strchr(arg, ':');
    char name[16];
    const size_t length = colon ? (size_t)(colon - arg) : strlen(arg);
    if (length >= sizeof name)
        return NOT_MINE;
    memcpy(name, arg, length);
    name[length] = '\0';
    const int choice = parse_choice(name, names);
    if (choice < 0)
        return NOT_MINE;
    o->diffuse_version = choice + 1;  /* DIFFUSE_GLOBAL.. (kernels/diffuse_gpu.h) */
    if (colon && (choice < 2 || parse_int(colon + 1, 1, 8, &o->diffuse_steps) < 0))
        return usage_error("--kernel %s: only temporal and stream take :K, K 1 to 8", arg);
    return -1;
}

/* Where the work runs: backend, tile, kernel version, devices.
 * -1 when c is parsed, NOT_MINE when c is another group's, else the
 * exit status (printed). */
static int parse_device_option(int c, const char *arg, gf_job *j, const char **tile_text)
{
    int choice;
    switch (c) {
    case OPT_BACKEND:
        if ((choice = parse_choice(arg, backend_names)) < 0)
            return usage_error("unknown backend '%s' (auto, cuda, cpu, reference)", arg);
        j->backend = (gf_backend_kind)choice;
        break;
    case OPT_TILE:
        j->tile_sweep = strcmp(arg, "sweep") == 0;
        if (j->tile_sweep)
            break;
        if (parse_tile(arg, &j->backend_options.tile_width, &j->backend_options.tile_height) < 0)
            return usage_error("tile '%s' is not WxH with positive whole numbers, or auto", arg);
        /* the limits of every device and kernel version (checked again
         * below for the version chosen); the device's own limits (shared
         * memory) are checked when the tile is launched */
        if ((long long)j->backend_options.tile_width * j->backend_options.tile_height >
            GF_TILE_MAX_PIXELS)
            return usage_error("tile %s cannot launch: over 32768 output pixels per block, "
                               "the largest any kernel version takes", arg);
        *tile_text = arg;
        break;
    case OPT_FFT:
        if ((choice = parse_choice(arg, fft_names)) < 0)
            return usage_error("--fft takes auto, always or never, not '%s'", arg);
        j->backend_options.fft = (gf_fft_mode)choice;
        break;
    case OPT_KERNEL:
        if ((choice = parse_diffuse_kernel(arg, &j->backend_options)) != NOT_MINE)
            return choice;
        if ((choice = parse_choice(arg, kernel_names)) < 0)
            return usage_error("unknown kernel version '%s' (auto, direct, blocked, separable, "
                               "tiled, naive; for --diffuse: global, shared, temporal, "
                               "temporal:K, stream, stream:K)", arg);
        j->backend_options.conv_version = (gf_conv_version)choice;
        break;
    case OPT_DEVICE:
        if (parse_int(arg, 0, 1023, &j->backend_options.device) < 0)
            return usage_error("device '%s' is not a device number", arg);
        break;
    case OPT_DEVICES:
        if (parse_devices(arg, j) < 0)
            return usage_error("--devices '%s' is not 'all' or a list of distinct device "
                               "numbers such as 0,2", arg);
        j->backend_options.device = j->all_devices ? 0 : j->devices[0];
        break;
    case OPT_GPU_MEMORY:
        if (parse_bytes(arg, &j->backend_options.memory_limit) < 0)
            return usage_error("--gpu-memory '%s' is not a size such as 512M or 4G", arg);
        break;
    default:
        return NOT_MINE;
    }
    return -1;
}

/* Batches and the limits on each image: folders, jobs, shards, memory, time, pixels.
 * -1 when c is parsed, NOT_MINE when c is another group's, else the
 * exit status (printed). */
static int parse_batch_option(int c, const char *arg, gf_job *j)
{
    switch (c) {
    case 'o':
        if (arg[0] == '\0')
            return usage_error("%s", "--output-dir '' is empty; give a folder, e.g. -o .");
        j->output_dir = arg;
        j->batch = 1;
        break;
    case OPT_FILES_FROM:
        j->files_from = arg;
        j->batch = 1;
        break;
    case OPT_SUFFIX:
        if (strchr(arg, '/'))
            return usage_error("--suffix '%s' must not contain '/'", arg);
        j->suffix = arg;
        break;
    case 'j':
        if (parse_int(arg, 1, 1024, &j->jobs) < 0)
            return usage_error("--jobs '%s' is not a whole number from 1 to 1024", arg);
        break;
    case OPT_SHARD:
        if (parse_shard(arg, &j->shard_index, &j->shard_count) < 0)
            return usage_error("--shard '%s' is not I/N with 0 <= I < N", arg);
        break;
    case OPT_MAX_MEMORY: {
        size_t bytes;
        if (parse_bytes(arg, &bytes) < 0)
            return usage_error("--max-memory '%s' is not a size such as 512M or 4G", arg);
        j->max_memory = bytes;
        break;
    }
    case OPT_DECODE_TIMEOUT: {
        char *end;
        errno = 0;
        double seconds = strtod(arg, &end);
        if (end == arg || *end != '\0' || errno || !(seconds >= 0.0 && seconds <= 1e6))
            return usage_error("--decode-timeout '%s' is not a number of seconds from 0 "
                               "(no limit) to 1000000", arg);
        j->decode_timeout = seconds;
        break;
    }
    case OPT_MAX_PIXELS: {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(arg, &end, 10);
        if (end == arg || *end != '\0' || errno || v == 0 || arg[0] == '-')
            return usage_error("--max-pixels '%s' is not a positive whole number", arg);
        j->max_pixels = (size_t)v;
        break;
    }
    default:
        return NOT_MINE;
    }
    return -1;
}

static int has_diffuse(const gf_pipeline *pipeline)
{
    for (int i = 0; i < pipeline->count; i++)
        if (pipeline->ops[i].kind == GF_OP_DIFFUSE)
            return 1;
    return 0;
}

/* The options together: what no single option can check. -1 when the job
 * goes on, else the exit status (printed). */
static int check_job(gf_job *j, char **paths, int count, const char *tile_text)
{
    const gf_conv_version version = j->backend_options.conv_version;
    if (tile_text && (version == GF_CONV_NAIVE || version == GF_CONV_TILED) &&
        (long long)j->backend_options.tile_width * j->backend_options.tile_height > 1024)
        return usage_error("tile %s cannot launch: over 1024 threads per block, the CUDA limit "
                           "(the naive and tiled kernels run one thread per pixel)", tile_text);
    if (j->csv && !j->tile_sweep)
        return usage_error("%s", "--csv goes with --tile sweep");
    if (j->backend_options.diffuse_version && !has_diffuse(&j->pipeline))
        return usage_error("%s", "--kernel global, shared, temporal and stream are --diffuse's "
                                 "versions: the job has no --diffuse");
    if (j->tile_sweep)
        return check_sweep(j, paths, count);
    if (j->stats && count > 1)
        j->batch = 1;  /* with --stats every argument is an input, as with identify */
    if (j->summary && !(j->stats && j->batch))
        return usage_error("%s", "--summary goes with --stats over several files");
    if (j->codec == GF_CODEC_GPU &&
        (j->backend == GF_BACKEND_CPU || j->backend == GF_BACKEND_REFERENCE))
        return usage_error("%s", "--codec gpu runs on the GPU: not with --backend cpu or reference");
    if (j->codec == GF_CODEC_GPU && j->verify)
        return usage_error("%s", "--verify compares with the CPU codecs' pixels: not with --codec gpu");
    if (j->verify && j->batch)
        return usage_error("%s", "--verify checks one INPUT: it runs the filter twice");
    if (j->batch && j->output_named)
        return usage_error("%s", "--output names the one output of one INPUT; a batch writes "
                                 "to -o DIR");
    if (j->batch)
        return check_batch(j, paths, count);
    if (j->suffix || j->shard_count)
        return usage_error("%s", "--suffix and --shard need a batch: -o DIR or --files-from");
    if (parse_single_paths(j, paths, count) == GF_EXIT_USAGE)
        return GF_EXIT_USAGE;
    if (j->output && j->format == GF_FORMAT_NONE) {
        j->format = strcmp(j->output, "-") == 0 ? GF_FORMAT_PNG : gf_format_from_path(j->output);
        if (j->format == GF_FORMAT_NONE)
            return usage_error("cannot tell the output format from '%s'; use a .png, .jpg, .bmp "
                               "or .tga name, or --format", j->output);
    }
    return -1;
}

/* Returns -1 to go on, or the exit status when the options end the program. */
int gf_parse_options(int argc, char **argv, gf_job *j)
{
    static const struct option longopts[] = {
        {"mask", required_argument, NULL, 'm'},
        {"border", required_argument, NULL, 'b'},
        {"format", required_argument, NULL, 'f'},
        {"quality", required_argument, NULL, 'q'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {"backend", required_argument, NULL, OPT_BACKEND},
        {"codec", required_argument, NULL, OPT_CODEC},
        {"tile", required_argument, NULL, OPT_TILE},
        {"kernel", required_argument, NULL, OPT_KERNEL},
        {"fft", required_argument, NULL, OPT_FFT},
        {"device", required_argument, NULL, OPT_DEVICE},
        {"filter-alpha", no_argument, NULL, OPT_FILTER_ALPHA},
        {"list-masks", no_argument, NULL, OPT_LIST_MASKS},
        {"list-devices", no_argument, NULL, OPT_LIST_DEVICES},
        {"list-paths", no_argument, NULL, OPT_LIST_PATHS},
        {"stats", optional_argument, NULL, OPT_STATS},
        {"equalize", optional_argument, NULL, OPT_EQUALIZE},
        {"normalize", optional_argument, NULL, OPT_NORMALIZE},
        {"clahe", optional_argument, NULL, OPT_CLAHE},
        {"auto-level", no_argument, NULL, OPT_AUTO_LEVEL},
        {"diffuse", optional_argument, NULL, OPT_DIFFUSE},
        {"max-pixels", required_argument, NULL, OPT_MAX_PIXELS},
        {"output-dir", required_argument, NULL, 'o'},
        {"files-from", required_argument, NULL, OPT_FILES_FROM},
        {"suffix", required_argument, NULL, OPT_SUFFIX},
        {"jobs", required_argument, NULL, 'j'},
        {"shard", required_argument, NULL, OPT_SHARD},
        {"quiet", no_argument, NULL, OPT_QUIET},
        {"png-level", required_argument, NULL, OPT_PNG_LEVEL},
        {"gpu-memory", required_argument, NULL, OPT_GPU_MEMORY},
        {"devices", required_argument, NULL, OPT_DEVICES},
        {"csv", no_argument, NULL, OPT_CSV},
        {"max-memory", required_argument, NULL, OPT_MAX_MEMORY},
        {"output", required_argument, NULL, OPT_OUTPUT},
        {"force", no_argument, NULL, OPT_FORCE},
        {"gray", no_argument, NULL, OPT_GRAY},
        {"depth", required_argument, NULL, OPT_DEPTH},
        {"no-autorotate", no_argument, NULL, OPT_NO_AUTOROTATE},
        {"verify", no_argument, NULL, OPT_VERIFY},
        {"summary", no_argument, NULL, OPT_SUMMARY},
        {"decode-timeout", required_argument, NULL, OPT_DECODE_TIMEOUT},
        {NULL, 0, NULL, 0},
    };
    opterr = 0;
    const char *tile_text = NULL;
    int c;
    while ((c = getopt_long(argc, argv, ":m:b:f:q:o:j:vhV", longopts, NULL)) != -1) {
        const gf_action action = c == 'h' ? GF_ACTION_HELP : c == 'V' ? GF_ACTION_VERSION
                               : c == OPT_LIST_MASKS ? GF_ACTION_LIST_MASKS
                               : c == OPT_LIST_DEVICES ? GF_ACTION_LIST_DEVICES
                               : c == OPT_LIST_PATHS ? GF_ACTION_LIST_PATHS : GF_ACTION_RUN;
        if (action != GF_ACTION_RUN) {
            j->action = action;
            return -1;
        }
        if (c == ':')
            return usage_error("option '%s' needs a value", argv[optind - 1]);
        int status = parse_operation_option(c, optarg, j);
        if (status == NOT_MINE)
            status = parse_output_option(c, optarg, j);
        if (status == NOT_MINE)
            status = parse_device_option(c, optarg, j, &tile_text);
        if (status == NOT_MINE)
            status = parse_batch_option(c, optarg, j);
        if (status == NOT_MINE)
            return usage_error("unknown option '%s'", argv[optind - 1]);
        if (status != -1)
            return status;
    }
    return check_job(j, argv + optind, argc - optind, tile_text);
}

int gf_job_prepare(gf_job *j)
{
    gf_image_set_png_level(j->png_level);
    if (j->max_memory)
        gf_image_set_memory_budget(j->max_memory);
    if (j->decode_timeout >= 0.0)
        gf_image_set_decode_timeout(j->decode_timeout);
    if (j->max_pixels)
        gf_image_set_max_pixels(j->max_pixels);
    gf_image_set_autorotate(j->autorotate);
    gf_image_set_budget_depth(j->depth);
    for (int i = 0; i < j->pipeline.count; i++)  /* -v given anywhere on the line */
        if (j->pipeline.ops[i].kind == GF_OP_DIFFUSE)
            j->pipeline.ops[i].diffuse.log = j->verbose ? stderr : NULL;
    if (gf_pipeline_load_masks(&j->pipeline) < 0) {
        fprintf(stderr, "%s\n", gf_error());
        return GF_EXIT_USAGE;
    }
    return -1;
}

int gf_job_print(const gf_job *j)
{
    switch (j->action) {
    case GF_ACTION_HELP:
        usage(stdout);
        return EXIT_SUCCESS;
    case GF_ACTION_VERSION:
        printf("gpufilter " GF_VERSION " (PNG deflate: %s, JPEG: %s, GPU JPEG: %s)\n",
               gf_png_deflater(), gf_jpeg_turbo_available() ? "libjpeg-turbo" : "stb_image",
               gf_nvjpeg_describe());
        return EXIT_SUCCESS;
    case GF_ACTION_LIST_MASKS:
        if (gf_mask_list() < 0) {
            fprintf(stderr, "%s\n", gf_error());
            return GF_EXIT_FILE;
        }
        return EXIT_SUCCESS;
    case GF_ACTION_LIST_DEVICES:
        if (gf_cuda_list_devices(stdout) < 0) {
            fprintf(stderr, "%s\n", gf_error());
            return GF_EXIT_FILE;
        }
        return EXIT_SUCCESS;
    case GF_ACTION_LIST_PATHS:
        return gf_cuda_list_paths(stdout) < 0 ? GF_EXIT_FILE : EXIT_SUCCESS;
    case GF_ACTION_RUN:
        break;
    }
    return EXIT_SUCCESS;
}
