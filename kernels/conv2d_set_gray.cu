/* conv2d_set_gray.cu - the kernels' set of version 4, gray and gray+alpha, masks up to 9x9: a module of its own
 * (conv2d_variants.cuh). */
#include "conv2d_plan.cuh"

namespace {
constexpr bool conv2d_set_takes([[maybe_unused]] int version, [[maybe_unused]] int C, [[maybe_unused]] int M)
{
    return version == 4 && C <= 2 && M <= 9;
}
}  /* namespace */

#define CONV2D_SET conv2d_set_gray
#include "conv2d_variants.cuh"
