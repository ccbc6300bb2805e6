/* conv2d_set_rgb.cu - the kernels' set of version 4, RGB: a module of its own
 * (conv2d_variants.cuh). */
#include "conv2d_plan.cuh"

namespace {
constexpr bool conv2d_set_takes([[maybe_unused]] int version, [[maybe_unused]] int C, [[maybe_unused]] int M)
{
    return version == 4 && C == 3;
}
}  /* namespace */

#define CONV2D_SET conv2d_set_rgb
#include "conv2d_variants.cuh"
