/* fuzz_options.c - libFuzzer target: the option parser on arbitrary argument
 * vectors (the input split at newlines, at most 32 arguments). */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    /* device files could block (a mask read from /dev/stdin) */
    if (strstr(text, "/dev") || strstr(text, "/proc")) {
        free(text);
        return 0;
    }
    char *argv[34] = {"gpufilter"};
    int argc = 1;
    for (char *arg = text; arg && argc < 33; argc++) {
        argv[argc] = arg;
        arg = strchr(arg, '\n');
        if (arg)
            *arg++ = '\0';
    }
    argv[argc] = NULL;
    optind = 0;  /* glibc: start a fresh parse */
    gf_job job;
    gf_job_init(&job);
    int status = gf_parse_options(argc, argv, &job);
    if (status != -1 && status != 0 && status != GF_EXIT_FILE && status != GF_EXIT_USAGE)
        abort();
    /* a job to run always has somewhere to read and something to produce
     * (--tile sweep: its table) */
    if (status == -1 && job.action == GF_ACTION_RUN && !job.batch &&
        (!job.input || (!job.output && !job.stats && !job.tile_sweep)))
        abort();
    if (status == -1 && job.action == GF_ACTION_RUN && job.batch &&
        ((job.input_count == 0 && !job.files_from) || (!job.output_dir && !job.stats)))
        abort();
    gf_job_free(&job);
    free(text);
    return 0;
}
