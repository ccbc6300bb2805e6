/* exit_release.h - GPUFILTER_EARLY_EXIT=1: a call that used the GPU ends
 * before the driver releases its context. */
#ifndef GF_EXIT_RELEASE_H
#define GF_EXIT_RELEASE_H

#include <stdio.h>

/* Whether GPUFILTER_EARLY_EXIT=1 asks for the early exit. */
int gf_early_exit_wanted(void);

/* Flushes every stream and, where the early exit is wanted, this process
 * holds an NVIDIA device open and no CUDA tool is attached, exits with
 * 'status' at once, leaving the driver's release of the process's GPU
 * context to a child that outlives it by an instant (said on 'log' where
 * not NULL). Otherwise returns 'status', for main to return. */
int gf_exit_leaving_release(int status, FILE *log);

#endif
