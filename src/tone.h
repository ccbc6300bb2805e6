/* tone.h - the arithmetic of the tone operations, shared by the CPU backend
 * and the CUDA kernels (plain C, host and device) so that both compute the
 * same look-up tables bit for bit; and the statistics the tool reports.
 *
 *   equalize   OpenCV's equalizeHist: LUT[v] = round((cdf(v) - cdf(vmin)) *
 *              (255 / (N - hist[vmin]))) in float, as OpenCV computes it;
 *              a constant image is left unchanged.
 *   luminance  OpenCV's 8-bit fixed-point BT.601 (full range) RGB <-> YCrCb.
 *   normalize  lo = smallest v with cdf(v) > B% of N, hi = largest v with
 *              more than W% of N at or above v, on the luminance histogram.
 *   auto-level lo, hi = min and max over the colour channels.
 *   stretch    x -> clamp(round((x - lo) * 255 / (hi - lo))), double,
 *              round half to even; identity when hi <= lo. */
#ifndef GF_TONE_H
#define GF_TONE_H

#include <math.h>

#include "border.h"  /* GF_HOST_DEVICE */

#define GF_BINS 256

/* ---- luminance: OpenCV's fixed-point coefficients (14 fractional bits) ---- */

#define GF_YUV_SHIFT 14
#define GF_YUV_HALF (1 << (GF_YUV_SHIFT - 1))

GF_HOST_DEVICE int gf_clamp_byte(int v)
{
    return v < 0 ? 0 : v > 255 ? 255 : v;
}

GF_HOST_DEVICE int gf_luma(int r, int g, int b)
{
    return (4899 * r + 9617 * g + 1868 * b + GF_YUV_HALF) >> GF_YUV_SHIFT;
}

/* Replace the luma of an RGB pixel through lut, keeping its chroma: RGB ->
 * YCrCb (rounded to 8 bits as OpenCV stores it), Y -> lut[Y], back to RGB. */
GF_HOST_DEVICE void gf_map_luma(unsigned char *rgb, const unsigned char *lut)
{
    int r = rgb[0], g = rgb[1], b = rgb[2];
    int y = gf_luma(r, g, b);
    int cr = gf_clamp_byte(((r - y) * 11682 + (128 << GF_YUV_SHIFT) + GF_YUV_HALF) >> GF_YUV_SHIFT);
    int cb = gf_clamp_byte(((b - y) * 9241 + (128 << GF_YUV_SHIFT) + GF_YUV_HALF) >> GF_YUV_SHIFT);
    int y2 = lut[y];
    cr -= 128;
    cb -= 128;
    rgb[0] = (unsigned char)gf_clamp_byte(y2 + ((cr * 22987 + GF_YUV_HALF) >> GF_YUV_SHIFT));
    rgb[1] = (unsigned char)gf_clamp_byte(
        y2 + ((cb * -5636 + cr * -11698 + GF_YUV_HALF) >> GF_YUV_SHIFT));
    rgb[2] = (unsigned char)gf_clamp_byte(y2 + ((cb * 29049 + GF_YUV_HALF) >> GF_YUV_SHIFT));
}

/* ---- look-up tables ------------------------------------------------------ */

GF_HOST_DEVICE void gf_identity_lut(unsigned char *lut)
{
    for (int v = 0; v < GF_BINS; v++)
        lut[v] = (unsigned char)v;
}

GF_HOST_DEVICE int gf_is_identity_lut(const unsigned char *lut)
{
    for (int v = 0; v < GF_BINS; v++)
        if (lut[v] != v)
            return 0;
    return 1;
}

/* hist and its inclusive prefix sum cdf (cdf[255] = N). */
GF_HOST_DEVICE void gf_equalize_lut(const unsigned long long *hist, const unsigned long long *cdf,
                                    unsigned char *lut)
{
    const unsigned long long n = cdf[GF_BINS - 1];
    int first = 0;
    while (first < GF_BINS - 1 && hist[first] == 0)
        first++;
    if (hist[first] == n) {
        gf_identity_lut(lut);
        return;
    }
    const float scale = 255.0f / (float)(n - hist[first]);
    for (int v = 0; v < GF_BINS; v++) {
        float mapped = v <= first ? 0.0f : (float)(cdf[v] - cdf[first]) * scale;
        lut[v] = (unsigned char)gf_clamp_byte((int)rintf(mapped));
    }
}

GF_HOST_DEVICE void gf_stretch_lut(int lo, int hi, unsigned char *lut)
{
    if (hi <= lo) {
        gf_identity_lut(lut);
        return;
    }
    for (int v = 0; v < GF_BINS; v++) {
        double mapped = rint((double)(v - lo) * 255.0 / (double)(hi - lo));
        lut[v] = (unsigned char)(mapped < 0.0 ? 0 : mapped > 255.0 ? 255 : (int)mapped);
    }
}

/* Percentile limits for normalize, from an inclusive cdf of 'bins' bins;
 * black and white in percent. */
GF_HOST_DEVICE void gf_normalize_limits_bins(const unsigned long long *cdf, int bins, double black,
                                             double white, int *lo, int *hi)
{
    const double n = (double)cdf[bins - 1];
    *lo = bins - 1;
    for (int v = 0; v < bins; v++)
        if ((double)cdf[v] * 100.0 > black * n) {
            *lo = v;
            break;
        }
    *hi = 0;
    for (int v = bins - 1; v >= 0; v--) {
        double at_or_above = n - (v > 0 ? (double)cdf[v - 1] : 0.0);
        if (at_or_above * 100.0 > white * n) {
            *hi = v;
            break;
        }
    }
}

GF_HOST_DEVICE void gf_normalize_limits(const unsigned long long *cdf, double black, double white,
                                        int *lo, int *hi)
{
    gf_normalize_limits_bins(cdf, GF_BINS, black, white, lo, hi);
}

/* ---- 16 bits a sample ----------------------------------------------------
 *
 *   luminance  OpenCV's RGB <-> YCrCb for CV_16U: the same coefficients,
 *              chroma centred on 32768, results saturated to 0..65535.
 *   equalize   65536 bins; LUT[v] = round((cdf(v) - cdf(vmin)) * 65535 /
 *              (N - hist[vmin])) in double, left to right, half to even
 *              (OpenCV's equalizeHist takes 8 bits only).
 *   normalize, auto-level, stretch: as at 8 bits over 65536 values, with
 *              65535 for 255. */

#define GF_BINS16 65536

GF_HOST_DEVICE int gf_clamp_u16(int v)
{
    return v < 0 ? 0 : v > 65535 ? 65535 : v;
}

/* gf_map_luma for 16-bit samples (int arithmetic cannot overflow: every
 * product stays under 2^31). */
GF_HOST_DEVICE void gf_map_luma16(unsigned short *rgb, const unsigned short *lut)
{
    int r = rgb[0], g = rgb[1], b = rgb[2];
    int y = gf_luma(r, g, b);
    int cr = gf_clamp_u16(((r - y) * 11682 + (32768 << GF_YUV_SHIFT) + GF_YUV_HALF) >> GF_YUV_SHIFT);
    int cb = gf_clamp_u16(((b - y) * 9241 + (32768 << GF_YUV_SHIFT) + GF_YUV_HALF) >> GF_YUV_SHIFT);
    int y2 = lut[y];
    cr -= 32768;
    cb -= 32768;
    rgb[0] = (unsigned short)gf_clamp_u16(y2 + ((cr * 22987 + GF_YUV_HALF) >> GF_YUV_SHIFT));
    rgb[1] = (unsigned short)gf_clamp_u16(
        y2 + ((cb * -5636 + cr * -11698 + GF_YUV_HALF) >> GF_YUV_SHIFT));
    rgb[2] = (unsigned short)gf_clamp_u16(y2 + ((cb * 29049 + GF_YUV_HALF) >> GF_YUV_SHIFT));
}

GF_HOST_DEVICE void gf_identity_lut16(unsigned short *lut)
{
    for (int v = 0; v < GF_BINS16; v++)
        lut[v] = (unsigned short)v;
}

GF_HOST_DEVICE int gf_is_identity_lut16(const unsigned short *lut)
{
    for (int v = 0; v < GF_BINS16; v++)
        if (lut[v] != v)
            return 0;
    return 1;
}

/* hist and its inclusive prefix sum cdf (cdf[65535] = N). */
GF_HOST_DEVICE void gf_equalize_lut16(const unsigned long long *hist,
                                      const unsigned long long *cdf, unsigned short *lut)
{
    const unsigned long long n = cdf[GF_BINS16 - 1];
    int first = 0;
    while (first < GF_BINS16 - 1 && hist[first] == 0)
        first++;
    if (hist[first] == n) {
        gf_identity_lut16(lut);
        return;
    }
    const double rest = (double)(n - hist[first]);
    for (int v = 0; v < GF_BINS16; v++) {
        double mapped = v <= first ? 0.0 : (double)(cdf[v] - cdf[first]) * 65535.0 / rest;
        lut[v] = (unsigned short)gf_clamp_u16((int)rint(mapped));
    }
}

GF_HOST_DEVICE void gf_stretch_lut16(int lo, int hi, unsigned short *lut)
{
    if (hi <= lo) {
        gf_identity_lut16(lut);
        return;
    }
    for (int v = 0; v < GF_BINS16; v++) {
        double mapped = rint((double)(v - lo) * 65535.0 / (double)(hi - lo));
        lut[v] = (unsigned short)(mapped < 0.0 ? 0 : mapped > 65535.0 ? 65535 : (int)mapped);
    }
}

/* ---- statistics ----------------------------------------------------------- */

/* What a backend measures per channel; everything else derives from it.
 * One bin a value: 256 bins at depth 8, 65536 at depth 16 (the rest of the
 * array unused, and not cleared). */
typedef struct {
    unsigned long long histogram[GF_BINS16];
    unsigned long long sum, sum_squares;
    int min, max;
    int depth;  /* of the image measured: 8 or 16 */
} gf_channel_stats;

static inline int gf_stats_bins(const gf_channel_stats *s)
{
    return s->depth == 16 ? GF_BINS16 : GF_BINS;
}

#endif
