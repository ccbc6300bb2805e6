/* cuda_paths.c - --list-paths: the direct kernel's arithmetic paths in the
 * order it tries them, each with the masks it takes and, from the kernels
 * compiled (kernels/conv2d.cu's table), their sizes per channel layout.
 * The names and masks come from the planner's table (conv2d_paths4 in
 * kernels/conv2d_paths.cu), so this list, -v and the planner agree. Needs
 * no GPU. */
#include <stdio.h>

#include "../kernels/kernels.h"
#include "backend.h"

int gf_cuda_list_paths(FILE *out)
{
    static const struct {
        int channels, filtered;
        const char *name;
    } layouts[] = {{1, 1, "gray"}, {2, 2, "gray+alpha"}, {3, 3, "RGB"},
                   {4, 3, "RGBA"}, {4, 4, "RGBA --filter-alpha"}};
    fputs("# --kernel direct (and auto where it runs) takes the first of these paths that\n"
          "# has the mask, its size and the image's layout; naive, tiled and blocked run\n"
          "# any mask up to 31x31, separable any that factors as a column times a row\n",
          out);
    conv2d_path_info info;
    for (int i = 0; conv2d_path_describe(i, &info); i++) {
        fprintf(out, "%s\n  masks: %s\n", info.name, info.weights);
        for (size_t l = 0; l < sizeof layouts / sizeof *layouts; l++) {
            const unsigned sizes = info.sizes[4 * (layouts[l].channels - 1) + layouts[l].filtered - 1];
            if (!sizes)
                continue;
            fprintf(out, "  %s:", layouts[l].name);
            for (int m = 1; m < 32; m++)
                if (sizes & (1u << m))
                    fprintf(out, " %dx%d", m, m);
            fputc('\n', out);
        }
    }
    return 0;
}
