/* cufft_dl.c - cuFFT through dlopen (see cufft_dl.h). */
#include "cufft_dl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define GF_STR_(x) #x
#define GF_STR(x) GF_STR_(x)
#define LIBRARY "libcufft.so." GF_STR(CUFFT_VER_MAJOR)

static gf_cufft_api api;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int loaded;
static char load_note[256] = "not loaded";

static void *open_library(void)
{
    static const char *const names[] = {
        LIBRARY,
#ifdef GF_CUFFT_LIBDIR
        GF_CUFFT_LIBDIR "/" LIBRARY,
#endif
    };
    return gf_open_library("GPUFILTER_CUFFT", names, sizeof names / sizeof *names);
}

static int resolve(void *lib, const char *name, void **slot)
{
    *slot = dlsym(lib, name);
    if (!*slot)
        snprintf(load_note, sizeof load_note, "libcufft lacks %s", name);
    return *slot != NULL;
}

static void load(void)
{
    void *lib = open_library();
    if (!lib) {
        const char *chosen = getenv("GPUFILTER_CUFFT");
        snprintf(load_note, sizeof load_note, "%s",
                 chosen && strcmp(chosen, "none") == 0 ? "off (GPUFILTER_CUFFT=none)"
                                                       : LIBRARY " not found");
        return;
    }
    cufftResult (*version)(int *) = NULL;
    if (!resolve(lib, "cufftPlan2d", (void **)&api.plan2d) ||
        !resolve(lib, "cufftExecR2C", (void **)&api.exec_r2c) ||
        !resolve(lib, "cufftExecC2R", (void **)&api.exec_c2r) ||
        !resolve(lib, "cufftSetStream", (void **)&api.set_stream) ||
        !resolve(lib, "cufftDestroy", (void **)&api.destroy) ||
        !resolve(lib, "cufftGetVersion", (void **)&version))
        return;
    int v = 0;
    version(&v);
    snprintf(load_note, sizeof load_note, "cuFFT %d.%d.%d", v / 1000, v % 1000 / 100, v % 100);
    loaded = 1;
}

const gf_cufft_api *gf_cufft(const char **why)
{
    pthread_once(&load_once, load);
    if (why)
        *why = load_note;
    return loaded ? &api : NULL;
}
