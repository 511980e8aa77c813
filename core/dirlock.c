/*
 * dirlock.c - one owner per tune directory (dirlock.h).
 */
#include "dirlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The PID the owner wrote into the lock file; 0 when none can be read. */
static pid_t read_owner(int fd)
{
    char buf[32];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    long v;
    char *end;
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    v = strtol(buf, &end, 10);
    return v > 0 && (*end == '\n' || *end == '\0') ? (pid_t)v : 0;
}

static void whole_file(struct flock *fl, short type)
{
    memset(fl, 0, sizeof *fl);
    fl->l_type = type;
    fl->l_whence = SEEK_SET; /* l_start = l_len = 0: the whole file; l_pid 0 (OFD) */
}

int mt_dirlock_acquire(const char *dir, const char *what, pid_t *owner, mt_diag *d)
{
    char path[4096], pid[32];
    struct flock fl;
    int fd, err, n;
    if (owner)
        *owner = 0;
    if (snprintf(path, sizeof path, "%s/%s", dir, MT_DIRLOCK_FILE) >= (int)sizeof path) {
        mt_diag_add(d, dir, 0, NULL, "the directory's path is too long");
        return -ENAMETOOLONG;
    }
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        err = errno;
        mt_diag_add(d, path, 0, NULL, "cannot create the %s directory's lock file: %s", what,
                    strerror(err));
        return -err;
    }
    whole_file(&fl, F_WRLCK);
    if (fcntl(fd, F_OFD_SETLK, &fl) != 0) {
        err = errno;
        if (err == EAGAIN || err == EACCES) {
            pid_t who = read_owner(fd);
            if (owner)
                *owner = who;
            if (who > 0)
                mt_diag_add(d, dir, 0, NULL,
                            "is in use: the %s there is owned by process %ld (it holds %s); "
                            "wait for it to end, or stop it (kill %ld) and resume",
                            what, (long)who, path, (long)who);
            else
                mt_diag_add(d, dir, 0, NULL,
                            "is in use: another process owns the %s there (it holds %s)", what,
                            path);
            close(fd);
            return -EBUSY;
        }
        mt_diag_add(d, path, 0, NULL, "cannot lock the %s directory: %s", what, strerror(err));
        close(fd);
        return -err;
    }
    /* ours: the PID for whoever is refused next (a crash leaves a stale PID
     * in the file, but no lock, and the next owner overwrites it) */
    n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
        err = errno;
        mt_diag_add(d, path, 0, NULL, "cannot write the owner's PID: %s", strerror(err));
        close(fd);
        return -err;
    }
    return fd;
}

void mt_dirlock_release(int *fd)
{
    if (fd && *fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

int mt_dirlock_owner(const char *dir, pid_t *owner)
{
    char path[4096];
    struct flock fl;
    int fd, err;
    if (owner)
        *owner = 0;
    snprintf(path, sizeof path, "%s/%s", dir, MT_DIRLOCK_FILE);
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno;
    whole_file(&fl, F_WRLCK);
    if (fcntl(fd, F_OFD_GETLK, &fl) != 0) {
        err = errno;
        close(fd);
        return -err;
    }
    if (fl.l_type == F_UNLCK) {
        close(fd);
        return 0;
    }
    if (owner)
        *owner = read_owner(fd);
    close(fd);
    return 1;
}
