/* exit_release.c - GPUFILTER_EARLY_EXIT=1: a call that used the GPU ends
 * before the driver releases its context (exit_release.h).
 *
 * When a process's last descriptor of /dev/nvidia* closes, the kernel
 * driver tears its CUDA context down inside that close, during the exit
 * the shell waits for: 45-110 ms on an H200, a quarter of a short call.
 * With the early exit the process forks first. The child holds copies of
 * the descriptors, so the parent's exit closes none for the last time and
 * ends at once; the child waits on a pipe until the parent is gone, then
 * exits and pays the release while a shell loop's next call starts.
 *
 * Not the default: the child outlives its parent, so whatever adopts it
 * (PID 1, or a subreaper) must reap it. A container whose PID 1 is the
 * job itself and reaps nothing would keep one zombie a call, and a long
 * loop could exhaust its process IDs.
 *
 * The child calls only async-signal-safe functions (a fork of a threaded
 * process), takes /dev/null as its standard streams (a pipeline's reader
 * sees the end of the output when the call ends) and the default action
 * for the signals main catches. The parent leaves by _exit: the CUDA
 * runtime's exit handler would destroy the context itself. Never done
 * where a CUDA tool is attached (CUDA_INJECTION64_PATH: compute-sanitizer,
 * Nsight), which expects the process to release its context itself.
 */
#include "exit_release.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Whether one of this process's descriptors is an NVIDIA device. */
static int holds_nvidia_device(void)
{
    DIR *dir = opendir("/proc/self/fd");
    if (!dir)
        return 0;
    int found = 0;
    const struct dirent *entry;
    while (!found && (entry = readdir(dir)) != NULL) {
        char path[32 + sizeof entry->d_name], target[64];
        if (entry->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/self/fd/%s", entry->d_name);
        const ssize_t n = readlink(path, target, sizeof target - 1);
        if (n > 0) {
            target[n] = '\0';
            found = strncmp(target, "/dev/nvidia", strlen("/dev/nvidia")) == 0;
        }
    }
    closedir(dir);
    return found;
}

/* The child: the parent's descriptors but its standard streams, until
 * the parent has exited (the pipe's end, the parent's only, closes). */
static void outlive_parent(int parent_end)
{
    const int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        dup2(null, STDIN_FILENO);
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
    }
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGINT, &dfl, NULL);
    sigaction(SIGTERM, &dfl, NULL);
    sigaction(SIGHUP, &dfl, NULL);
    char c;
    while (read(parent_end, &c, 1) > 0)
        ;
    _exit(0);
}

int gf_early_exit_wanted(void)
{
    const char *wanted = getenv("GPUFILTER_EARLY_EXIT");
    return wanted && strcmp(wanted, "1") == 0;
}

int gf_exit_leaving_release(int status, FILE *log)
{
    fflush(NULL);
    const char *tool = getenv("CUDA_INJECTION64_PATH");
    if (!gf_early_exit_wanted() || (tool && *tool) || !holds_nvidia_device())
        return status;
    int ends[2];
    if (pipe(ends) != 0)
        return status;
    const pid_t child = fork();
    if (child < 0) {
        close(ends[0]);
        close(ends[1]);
        return status;
    }
    if (child == 0) {
        close(ends[1]);
        outlive_parent(ends[0]);
    }
    close(ends[0]);
    if (log) {
        fprintf(log, "gpufilter: the GPU context's release left to process %d\n", (int)child);
        fflush(log);
    }
    _exit(status);
}
