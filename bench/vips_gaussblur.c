/* vips_gaussblur.c - `vips gaussblur IN OUT SIGMA` where only libvips's
 * shared library is there (the pyvips-binary wheel ships it without the
 * command): the same calls as the command, in a process of its own, so
 * bench/blur_e2e.sh times libvips's start with its blur.
 *
 *   cc -O2 -o build/vips-gaussblur bench/vips_gaussblur.c -ldl
 *   build/vips-gaussblur LIBVIPS.so IN OUT[Q=92] SIGMA
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef void *(*new_from_file_fn)(const char *name, ...);
typedef int (*gaussblur_fn)(void *in, void **out, double sigma, ...);
typedef int (*write_fn)(void *image, const char *name, ...);

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s LIBVIPS.so IN OUT SIGMA\n", argv[0]);
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    int (*init)(const char *) = (int (*)(const char *))dlsym(lib, "vips_init");
    new_from_file_fn open_image = (new_from_file_fn)dlsym(lib, "vips_image_new_from_file");
    gaussblur_fn gaussblur = (gaussblur_fn)dlsym(lib, "vips_gaussblur");
    write_fn write_image = (write_fn)dlsym(lib, "vips_image_write_to_file");
    const char *(*error_buffer)(void) = (const char *(*)(void))dlsym(lib, "vips_error_buffer");
    if (!init || !open_image || !gaussblur || !write_image || !error_buffer || init(argv[0])) {
        fprintf(stderr, "libvips did not start\n");
        return 1;
    }
    void *in = open_image(argv[2], "access", 1 /* VIPS_ACCESS_SEQUENTIAL */, NULL), *out = NULL;
    if (!in || gaussblur(in, &out, atof(argv[4]), NULL) || write_image(out, argv[3], NULL)) {
        fprintf(stderr, "%s", error_buffer());
        return 1;
    }
    return 0;
}
