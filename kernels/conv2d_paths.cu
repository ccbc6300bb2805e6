/* conv2d_paths.cu - version 4's arithmetic paths: conv2d_paths4, the
 * planner's order of them (conv2d_pick4 tries them in it), each with its
 * kernels, the name -v prints and the masks it takes; the names of a
 * plan's path and --list-paths's rows, whose sizes and layouts come from
 * the instantiation table (conv2d.cu). Host only. */
#include <stdio.h>
#include <string.h>

#include "conv2d_lanes4.cuh"
#include "conv2d_stream.cuh"
#include "conv2d_planner.h"

const conv2d_path4 conv2d_paths4[kPaths4] = {
    {kStream4 + kStreamBinomial, 0, "separable integer, row streams in 16-bit lanes",
     "3x3 binomial column times binomial row, in range, rows of whole 16-byte words"},
    {kStream4 + kStreamOnes, 0, "separable integer, row streams in 16-bit lanes",
     "3x3 of ones, in range, rows of whole 16-byte words"},
    {kStream4 + kStreamAny, 0, "separable integer, row streams in 16-bit lanes",
     "3x3 integer column times row, in range, rows of whole 16-byte words"},
    {kMma4, 1, "separable integer, tensor cores", "box of ones from 11x11"},
    {kBoxScan4, 0, "box, prefix sums across a warp", "box of ones over an odd integer, tiles of whole warps"},
    {kRunning4, 0, "box, running sums in 16-bit lanes", "box of ones over an odd integer"},
    {kBinomial4, 0, "separable integer, binomial column", "binomial column times a row of -128..127, in range"},
    {kBox4, 0, "separable integer, column of ones", "column of ones times a row of -128..127, in range"},
    {kMma4, 0, "separable integer, tensor cores", "column times row of 0..255 from 11x11, sums in 16 bits"},
    {kSeparable4, 0, "separable integer", "integer column times a row of -128..127"},
    {CONV2D_DP4A, 0, "DP4A", "integer weights of -128..127"},
    {CONV2D_DP2A, 0, "DP2A", "integer weights of 16 bits, sums below 2^22"},
    {0, 0, "float", "any weights"},
};
const conv2d_path4 conv2d_gradient_path4 = {kGradient4, 0, "gradient pair, 16-bit lanes",
                                            "3x3 integer pair with Sobel's zero taps, by magnitude"};

/* Version 4's path of kernels dp: its entry of conv2d_paths4 (the first:
 * the tensor cores' two entries share a name), or the gradient pairs'. */
static const conv2d_path4 &conv2d_path_of(int dp)
{
    for (int i = 0; i < kPaths4; i++)
        if (conv2d_paths4[i].dp == dp)
            return conv2d_paths4[i];
    return conv2d_gradient_path4;
}

void conv2d_path_name(const conv2d_plan &pl, char *name, size_t size)
{
    const bool in_range = pl.v->mode != kModeAny && (pl.v->mode & kInRange);
    /* the running sums' kernels past 15x15 keep their rows in the lanes */
    const char *path = pl.v->ws == kRunning4 && pl.v->MW > 15 ? "box, running sums, rows in 16-bit lanes"
                                                                : conv2d_path_of(pl.v->ws).name;
    snprintf(name, size, "%s%s", path, in_range ? ", no clamp" : "");
}

extern "C" int conv2d_path_describe(int i, conv2d_path_info *info)
{
    if (i < 0 || i > kPaths4)
        return 0;
    const conv2d_path4 &path = i == 0 ? conv2d_gradient_path4 : conv2d_paths4[i - 1];
    info->name = path.name;
    info->weights = path.weights;
    memset(info->sizes, 0, sizeof info->sizes);
    int count = 0;
    const conv2d_variant *variants = conv2d_variant_table(&count);
    for (int k = 0; k < count; k++) {
        const conv2d_variant &v = variants[k];
        if (v.version == 4 && (i == 0 ? conv2d_gradient4(v.ws) : v.ws == path.dp) && v.MW == v.MH &&
            (!path.channels || v.C == path.channels))
            info->sizes[(v.C - 1) * 4 + (v.CF - 1)] |= 1u << v.MW;
    }
    return 1;
}
