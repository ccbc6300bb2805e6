/* conv2d_set_v23.cu - the kernels' set of versions 2 and 3 (blocked, separable), every layout: a module of its own
 * (conv2d_variants.cuh). */
#include "conv2d_plan.cuh"

namespace {
constexpr bool conv2d_set_takes([[maybe_unused]] int version, [[maybe_unused]] int C, [[maybe_unused]] int M)
{
    return version == 2 || version == 3;
}
}  /* namespace */

#define CONV2D_SET conv2d_set_v23
#include "conv2d_variants.cuh"
