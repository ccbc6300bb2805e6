/* conv2d.cu - the CUDA 2-D correlation: the table the planner
 * (conv2d_plan.cu) launches every kernel through, gathered from the sets
 * that instantiate them (conv2d_set_*.cu), and versions 0 and 1.
 *
 * An interleaved 8-bit image of 1..4 channels is correlated with 1..4
 * matrices of up to 31x31, the responses combined per pixel (magnitude,
 * max, min, sum), scaled, offset, rounded half to even and clamped to a
 * byte; channels past channels_filtered are copied. Five versions, each a
 * family of kernels in a header of its own:
 *
 *   0 naive      (conv2d_tiled.cuh) one thread an output, every tap read
 *                from global memory through the border mapping: the
 *                correctness baseline.
 *   1 tiled      (conv2d_tiled.cuh) the block's tile and halo staged in
 *                shared memory once, the border mapped while staging.
 *   2 blocked    (conv2d_blocked.cuh) any mask: P x Q outputs a thread, a
 *                window of Q pixels sliding along each staged float row,
 *                weights in the parameter bank; 3x3, 5x5 and 7x7 fully
 *                unrolled, a generic kernel for the rest. Version 1's bytes.
 *   3 separable  (conv2d_separable.cuh) one-matrix masks that factor as a
 *                column times a row: a fused row pass and column pass
 *                through a ring in shared memory, w + h FMA a pixel.
 *   4 direct     no staging barrier: each thread streams its own rows. The
 *                plan picks the first path that fits the mask
 *                (conv2d_make_plan): row streams of 3x3 separable masks
 *                (conv2d_stream.cuh), the tensor cores for 11x11 to 31x31
 *                of byte factors (conv2d_mma.cuh), box masks as prefix sums
 *                across a warp (conv2d_scan.cuh), and in conv2d_direct.cuh
 *                running sums of box masks, the separable integer path,
 *                DP4A / DP2A for integer weights, 16-bit lanes for the
 *                gradient pairs, float for the rest.
 *
 * Roofline, per output pixel of C channels, K matrices, T = w x h taps:
 * C bytes read and C written, 2 T C K flops (one FMA a tap, channel and
 * matrix). An H100 copies ~3.0 TB/s and issues ~60 TFLOP/s of FP32, a
 * balance near 20 flop/B: RGBA 3x3 (9 flop/B) is memory-bound, 5x5 sits
 * at the balance, 7x7 and above are compute-bound (or bound by the issue
 * of what feeds the FMAs). Each family's header gives its own budget.
 *
 * Arithmetic (conv2d_common.cuh): integer weights give exact integer sums,
 * so every version and path returns the CPU reference's bytes for the
 * built-in masks; versions 2 and 4 also keep version 1's summation order
 * and finishing operations for fractional weights, version 3 may differ by
 * one level there.
 *
 * Instantiations: each family's kernels are templates over the channel
 * layout (C channels, CF computed), the mask size and the path; the table
 * (conv2d_variant_list.cuh) names every instantiation once, with its
 * runner (which fills the kernel's parameters and launches it) and the
 * facts the planner matches a launch against. A kernel not in the table
 * is not compiled. Each set compiles the entries of one layout and size
 * range (conv2d_variants.cuh says why); the order of the table does not
 * matter (conv2d_find matches every fact). */
#include <assert.h>

#include "conv2d_tiled.cuh"
#include "conv2d_plan.cuh"

extern const conv2d_set conv2d_set_v23, conv2d_set_gray, conv2d_set_gray_large, conv2d_set_rgb,
    conv2d_set_rgba, conv2d_set_rgba_large;

namespace {

/* every set's entries but the empty ones, gathered once in the order of
 * the list (each set holds the whole list, its own entries filled): each
 * entry is one set's, exactly */
struct conv2d_table {
    conv2d_variant *entries = nullptr;
    int count = 0;
    conv2d_table()
    {
        const conv2d_set *sets[] = {&conv2d_set_v23, &conv2d_set_gray, &conv2d_set_gray_large,
                                    &conv2d_set_rgb, &conv2d_set_rgba, &conv2d_set_rgba_large};
        const int listed = sets[0]->count;
        entries = new conv2d_variant[listed];
        for (int i = 0; i < listed; i++) {
            int taken = 0;
            for (const conv2d_set *set : sets) {
                assert(set->count == listed);
                if (set->entries[i].version != 0) {
                    entries[count++] = set->entries[i];
                    taken++;
                }
            }
            assert(taken == 1);
            (void)taken;
        }
    }
};

}  /* namespace */

const conv2d_variant *conv2d_variant_table(int *count)
{
    static const conv2d_table table;
    *count = table.count;
    return table.entries;
}

conv2d_entry conv2d_entry_for(int version, int channels)
{
    static const conv2d_entry table[2][4] = {
        {conv2d_kernel0<1>, conv2d_kernel0<2>, conv2d_kernel0<3>, conv2d_kernel0<4>},
        {conv2d_kernel1<1>, conv2d_kernel1<2>, conv2d_kernel1<3>, conv2d_kernel1<4>},
    };
    if (version < 0 || version > 1 || channels < 1 || channels > 4)
        return NULL;
    return table[version][channels - 1];
}
