/* border.h - border modes, named and defined as in scipy.ndimage.
 *
 * Shared by the CPU backend and the CUDA kernels (plain C, host and device),
 * so that both extend the image identically:
 *   nearest   a a a | a b c d | d d d    (the default)
 *   constant  0 0 0 | a b c d | 0 0 0
 *   reflect   c b a | a b c d | d c b    (half-sample symmetric)
 *   mirror    d c b | a b c d | c b a    (whole-sample symmetric)
 *   wrap      b c d | a b c d | a b c    (periodic)
 * Any distance outside the image works, so a mask may be larger than it. */
#ifndef GF_BORDER_H
#define GF_BORDER_H

#ifdef __CUDACC__
#define GF_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define GF_HOST_DEVICE static inline
#endif

typedef enum {
    GF_BORDER_NEAREST = 0,
    GF_BORDER_CONSTANT,
    GF_BORDER_REFLECT,
    GF_BORDER_MIRROR,
    GF_BORDER_WRAP,
} gf_border;

/* Index inside 0..n-1 that coordinate i (any integer) reads, or -1 for the
 * constant border's zero. */
GF_HOST_DEVICE int gf_border_index(int i, int n, gf_border mode)
{
    if (i >= 0 && i < n)
        return i;
    switch (mode) {
    case GF_BORDER_CONSTANT:
        return -1;
    case GF_BORDER_REFLECT: {
        int period = 2 * n;
        int m = i % period;
        if (m < 0)
            m += period;
        return m < n ? m : period - 1 - m;
    }
    case GF_BORDER_MIRROR: {
        if (n == 1)
            return 0;
        int period = 2 * n - 2;
        int m = i % period;
        if (m < 0)
            m += period;
        return m < n ? m : period - m;
    }
    case GF_BORDER_WRAP: {
        int m = i % n;
        return m < 0 ? m + n : m;
    }
    case GF_BORDER_NEAREST:
    default:
        return i < 0 ? 0 : n - 1;
    }
}

#endif
