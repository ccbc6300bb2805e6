/* conv2d_set_rgba.cu - the kernels' set of version 4, RGBA, masks up to 9x9: a module of its own
 * (conv2d_variants.cuh). */
#include "conv2d_plan.cuh"

namespace {
constexpr bool conv2d_set_takes([[maybe_unused]] int version, [[maybe_unused]] int C, [[maybe_unused]] int M)
{
    return version == 4 && C == 4 && M <= 9;
}
}  /* namespace */

#define CONV2D_SET conv2d_set_rgba
#include "conv2d_variants.cuh"
