/* image_write.c - writing an encoded image: to standard output, straight
 * into a character device or FIFO, or by atomic replacement of a regular
 * file (never a partial file, never anything left after an interrupt).
 *
 * A regular file is written into an anonymous file in the output's folder
 * (O_TMPFILE), which gets a name only once it is complete: a new output is
 * linked at its path; an existing one is replaced by linking the file as
 * ".gpufilter-PID-N" and renaming that onto the output at once. Killed at
 * any moment, even by SIGKILL, it leaves no temporary behind, except one
 * killed between that link and the rename. Where the file system has no
 * O_TMPFILE, the file is written under the temporary name from the start.
 *
 * Interrupts: the span in which a named temporary exists is a window that
 * a thread enters with SIGINT, SIGTERM and SIGHUP blocked. The signal
 * handler (gf_image_abort_save) marks the run as aborting and waits until
 * no thread is in a window; a thread that finds the run aborting does not
 * enter one. So when the handler returns, every temporary is either renamed
 * onto its output, complete, or was never named. */
#define _GNU_SOURCE  /* O_TMPFILE, AT_EMPTY_PATH (Linux) */
#include "image.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

/* ---- interrupts ------------------------------------------------------------- */

/* lock-free atomics: safe to touch from the signal handler */
static atomic_int aborting;
static atomic_int threads_in_window;

void gf_image_abort_save(void)
{
    atomic_store(&aborting, 1);
    const struct timespec pause_ms = {0, 1000000};
    while (atomic_load(&threads_in_window) > 0)
        nanosleep(&pause_ms, NULL);
}

static void interrupt_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGHUP);
}

/* Enter a window, or, once the run is aborting, wait for the handler to end
 * the process (printing nothing: the interrupt is not this file's failure). */
static void enter_window(sigset_t *saved)
{
    sigset_t block;
    interrupt_signals(&block);
    pthread_sigmask(SIG_BLOCK, &block, saved);
    atomic_fetch_add(&threads_in_window, 1);
    if (!atomic_load(&aborting))
        return;
    atomic_fetch_sub(&threads_in_window, 1);
    pthread_sigmask(SIG_SETMASK, saved, NULL);
    for (;;)
        pause();
}

static void leave_window(const sigset_t *saved)
{
    atomic_fetch_sub(&threads_in_window, 1);
    pthread_sigmask(SIG_SETMASK, saved, NULL);
}

/* ---- helpers ---------------------------------------------------------------- */

static int write_all(int fd, const unsigned char *data, size_t size)
{
    while (size > 0) {
        ssize_t n = write(fd, data, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = EIO;
            return -1;
        }
        data += n;
        size -= (size_t)n;
    }
    return 0;
}

/* The process's umask, read once: reading it means setting it, and a
 * thread creating a file in between would get the wrong mode. */
static mode_t process_umask;
static pthread_once_t umask_once = PTHREAD_ONCE_INIT;

static void read_umask(void)
{
    process_umask = umask(0);
    umask(process_umask);
}

void gf_image_read_umask(void)
{
    pthread_once(&umask_once, read_umask);
}

/* "DIR/" of path, or "" for a bare name. */
static int folder_of(const char *path, char *folder, size_t size)
{
    const char *slash = strrchr(path, '/');
    int length = slash ? (int)(slash - path + 1) : 0;
    return snprintf(folder, size, "%.*s", length, path) < (int)size ? 0 : -1;
}

/* "DIR/.gpufilter-PID-N": unique within the process (N counts) and across
 * processes (PID); one left by a killed run is stepped over (EEXIST). Its
 * length does not grow with the output's name. */
static void temporary_name(const char *folder, char *name, size_t size)
{
    static atomic_ulong counter;
    snprintf(name, size, "%s.gpufilter-%ld-%lu", folder, (long)getpid(),
             atomic_fetch_add(&counter, 1));
}

/* ---- regular files ---------------------------------------------------------- */

static int fill_file(int fd, mode_t mode, const unsigned char *data, size_t size)
{
    return fchmod(fd, mode) < 0 || write_all(fd, data, size) < 0 ? -1 : 0;
}

/* A file that is to replace another goes to the disk first: a rename that
 * reaches the disk before the data could otherwise leave, after a crash of
 * the system, an empty file where the old one was (the output may be the
 * input). A new output replaces nothing and is not synced, as cp does. */
static int sync_if_replacing(int fd, const char *path, int *synced)
{
    *synced = access(path, F_OK) == 0;
    return *synced ? fsync(fd) : 0;
}

/* Link the anonymous file (open as fd) at 'name'; -1 with errno on failure
 * (EEXIST when the name is taken). */
static int link_anonymous(int fd, const char *name)
{
    char proc_path[64];
    snprintf(proc_path, sizeof proc_path, "/proc/self/fd/%d", fd);
    if (linkat(AT_FDCWD, proc_path, AT_FDCWD, name, AT_SYMLINK_FOLLOW) == 0)
        return 0;
    if (errno != ENOENT || access("/proc/self/fd", F_OK) == 0)
        return -1;
    return linkat(fd, "", AT_FDCWD, name, AT_EMPTY_PATH);  /* no /proc: root may */
}

/* Put the complete anonymous file at path. A new output is linked there
 * at once: complete from the moment it has a name. An existing one is
 * replaced through a temporary name and a rename, inside one window. */
static int publish_anonymous(int fd, const char *folder, const char *path, int synced)
{
    sigset_t saved;
    enter_window(&saved);
    int status = link_anonymous(fd, path);
    if (status < 0 && errno == EEXIST) {
        char temp[PATH_MAX + 32];
        if (!synced && fsync(fd) < 0) {  /* created since sync_if_replacing looked */
            leave_window(&saved);
            return -1;
        }
        do {
            temporary_name(folder, temp, sizeof temp);
            status = link_anonymous(fd, temp);
        } while (status < 0 && errno == EEXIST);
        if (status == 0 && rename(temp, path) < 0) {
            int saved_errno = errno;
            unlink(temp);
            errno = saved_errno;
            status = -1;
        }
    }
    leave_window(&saved);
    return status;
}

/* Where O_TMPFILE is missing: the whole write is one window, since the
 * named file exists from its creation. */
static int replace_through_named_file(const char *folder, const char *path, mode_t mode,
                                      const unsigned char *data, size_t size)
{
    char temp[PATH_MAX + 32];
    sigset_t saved;
    enter_window(&saved);
    int fd;
    do {
        temporary_name(folder, temp, sizeof temp);
        fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    } while (fd < 0 && errno == EEXIST);
    int synced;
    int status = fd < 0 ? -1 : fill_file(fd, mode, data, size);
    if (status == 0)
        status = sync_if_replacing(fd, path, &synced);
    int saved_errno = errno;
    if (fd >= 0 && close(fd) < 0 && status == 0) {
        status = -1;
        saved_errno = errno;
    }
    if (status == 0 && rename(temp, path) < 0) {
        status = -1;
        saved_errno = errno;
    }
    if (status < 0 && fd >= 0)
        unlink(temp);
    leave_window(&saved);
    errno = saved_errno;
    return status;
}

/* An unnamed file in folder; -1 with EOPNOTSUPP where there is no such thing
 * (EISDIR or EINVAL from kernels and file systems that lack it). */
static int open_anonymous(const char *folder)
{
#ifdef O_TMPFILE
    return open(folder[0] ? folder : ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
#else
    (void)folder;
    errno = EOPNOTSUPP;
    return -1;
#endif
}

static int replace_regular_file(const char *path, mode_t mode, const unsigned char *data,
                                size_t size)
{
    char folder[PATH_MAX];
    if (folder_of(path, folder, sizeof folder) < 0) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = open_anonymous(folder);
    if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL))
        return replace_through_named_file(folder, path, mode, data, size);
    if (fd < 0)
        return -1;
    int synced = 0;
    int status = fill_file(fd, mode, data, size);
    if (status == 0)
        status = sync_if_replacing(fd, path, &synced);
    if (status == 0)
        status = publish_anonymous(fd, folder, path, synced);
    int saved_errno = errno;
    close(fd);
    errno = saved_errno;
    return status;
}

/* ---- the output path -------------------------------------------------------- */

/* A character device (/dev/null, a terminal) or a FIFO is written into as
 * it is, as a shell redirection would; it is never replaced. */
static int write_into_special_file(const char *path, const unsigned char *data, size_t size)
{
    int fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int status = write_all(fd, data, size);
    int saved_errno = errno;
    if (close(fd) < 0 && status == 0)
        return -1;
    errno = saved_errno;
    return status;
}

/* What the output path stands for: a symbolic link is followed to the file
 * it names, so that the link stays and its target gets the image. */
static int resolve_output(const char *path, char **target)
{
    struct stat st;
    *target = NULL;
    if (lstat(path, &st) < 0 || !S_ISLNK(st.st_mode))
        return 0;
    *target = realpath(path, NULL);
    if (*target)
        return 0;
    gf_set_error("%s: a symbolic link to nothing (%s); not replacing the link", path,
                 strerror(errno));
    return -1;
}

static int write_to_path(const char *path, const unsigned char *data, size_t size)
{
    char *resolved;
    if (resolve_output(path, &resolved) < 0)
        return -1;
    const char *target = resolved ? resolved : path;
    struct stat st;
    int status = -1;
    gf_image_read_umask();
    mode_t mode = 0666 & ~process_umask;
    if (stat(target, &st) == 0) {
        mode = st.st_mode & 07777;
        if (S_ISDIR(st.st_mode)) {
            gf_set_error("%s: is a directory", path);
            goto done;
        }
        if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
            status = write_into_special_file(target, data, size);
            if (status < 0)
                gf_set_error("%s: cannot write the output: %s", path, strerror(errno));
            goto done;
        }
        if (!S_ISREG(st.st_mode)) {
            gf_set_error("%s: not a regular file, a character device or a FIFO; not replacing it",
                         path);
            goto done;
        }
    }
    status = replace_regular_file(target, mode, data, size);
    if (status < 0)
        gf_set_error("%s: cannot write the output: %s", path, strerror(errno));
done:
    free(resolved);
    return status;
}

int gf_image_save(const gf_image *img, const char *path, gf_format format, int quality)
{
    unsigned char *data;
    size_t size;
    const int to_stdout = strcmp(path, "-") == 0;
    if (format == GF_FORMAT_NONE && (format = gf_format_from_path(path)) == GF_FORMAT_NONE) {
        gf_set_error("%s: cannot tell the output format from the name", path);
        return -1;
    }
    if (gf_image_encode(img, format, quality, &data, &size) < 0 ||
        gf_image_mark(format, &data, &size) < 0) {
        gf_error_name_file(to_stdout ? "standard output" : path);
        return -1;
    }
    int status = gf_image_write_encoded(path, data, size);
    free(data);
    return status;
}

int gf_image_write_encoded(const char *path, const unsigned char *data, size_t size)
{
    if (strcmp(path, "-") != 0)
        return write_to_path(path, data, size);
    int status = write_all(STDOUT_FILENO, data, size);
    if (status < 0)
        gf_set_error("standard output: %s", strerror(errno));
    return status;
}

/* ---- an output in pieces ---------------------------------------------------- */

struct gf_output {
    char *path;          /* as given, for messages and the buffered write */
    char *target;        /* the regular file replaced (a link's target) */
    char folder[PATH_MAX];
    mode_t mode;
    int fd;              /* the anonymous file; -1: the pieces are buffered */
    gf_bytes buffered;
};

static void free_output(gf_output *out)
{
    if (out->fd >= 0)
        close(out->fd);  /* an anonymous file vanishes with its descriptor */
    free(out->path);
    free(out->target);
    free(out->buffered.data);
    free(out);
}

/* Where the pieces go: the anonymous file of the regular file at the
 * output's path, or the buffer (standard output, devices, FIFOs, and file
 * systems without anonymous files). 0, or -1 with the error set. */
static int choose_destination(gf_output *out)
{
    if (strcmp(out->path, "-") == 0)
        return 0;
    if (resolve_output(out->path, &out->target) < 0)
        return -1;
    if (!out->target && !(out->target = strdup(out->path))) {
        gf_set_error("out of memory");
        return -1;
    }
    struct stat st;
    gf_image_read_umask();
    out->mode = 0666 & ~process_umask;
    if (stat(out->target, &st) == 0) {
        out->mode = st.st_mode & 07777;
        if (S_ISDIR(st.st_mode)) {
            gf_set_error("%s: is a directory", out->path);
            return -1;
        }
        if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))
            return 0;
        if (!S_ISREG(st.st_mode)) {
            gf_set_error("%s: not a regular file, a character device or a FIFO; not replacing it",
                         out->path);
            return -1;
        }
    }
    if (folder_of(out->target, out->folder, sizeof out->folder) < 0) {
        gf_set_error("%s: cannot write the output: %s", out->path, strerror(ENAMETOOLONG));
        return -1;
    }
    out->fd = open_anonymous(out->folder);
    if (out->fd >= 0 || errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)
        return 0;
    gf_set_error("%s: cannot write the output: %s", out->path, strerror(errno));
    return -1;
}

gf_output *gf_output_open(const char *path)
{
    gf_output *out = calloc(1, sizeof *out);
    if (!out || !(out->path = strdup(path))) {
        free(out);
        gf_set_error("out of memory");
        return NULL;
    }
    out->fd = -1;
    if (choose_destination(out) < 0) {
        free_output(out);
        return NULL;
    }
    return out;
}

int gf_output_write(gf_output *out, const unsigned char *data, size_t size)
{
    if (out->fd >= 0) {
        if (write_all(out->fd, data, size) == 0)
            return 0;
        gf_set_error("%s: cannot write the output: %s", out->path, strerror(errno));
        return -1;
    }
    if (gf_bytes_append(&out->buffered, data, size) == 0)
        return 0;
    gf_set_error("%s: out of memory for the output", out->path);
    return -1;
}

int gf_output_commit(gf_output *out)
{
    int status;
    if (out->fd < 0) {
        status = gf_image_write_encoded(out->path, out->buffered.data, out->buffered.size);
    } else {
        int synced = 0;
        status = fchmod(out->fd, out->mode);
        if (status == 0)
            status = sync_if_replacing(out->fd, out->target, &synced);
        if (status == 0)
            status = publish_anonymous(out->fd, out->folder, out->target, synced);
        if (status < 0)
            gf_set_error("%s: cannot write the output: %s", out->path, strerror(errno));
    }
    free_output(out);
    return status;
}

void gf_output_discard(gf_output *out)
{
    if (out)
        free_output(out);
}
