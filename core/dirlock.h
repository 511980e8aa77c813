/*
 * dirlock.h - one owner per tune (or bisection) directory.
 *
 * The owner holds an exclusive open-file-description lock (fcntl
 * F_OFD_SETLK) on DIR/moetune.lock for its whole life, with its PID written
 * into the file.  The kernel releases the lock when the last descriptor of
 * that open file goes: on exit, on a crash, on kill -9, so a resume after
 * any of them takes the directory at once; nothing stale is ever left to
 * clean up.  The descriptor is close-on-exec (programs moetune runs never
 * hold it) but survives fork(), so a forked job child keeps the directory
 * owned until it too is gone.  Another process asking for the directory is
 * refused at once (no waiting), told the owner's PID.
 *
 * Linux (OFD locks, 3.15+), on a local filesystem: the store refuses the
 * others anyway (store.h).
 */
#ifndef MT_DIRLOCK_H
#define MT_DIRLOCK_H

#include "diag.h"

#include <sys/types.h>

#define MT_DIRLOCK_FILE "moetune.lock"

/* Takes DIR/moetune.lock (creating it; DIR must exist).  what names the
 * directory's use in messages ("tune", "bisection").  Returns the lock's
 * descriptor (>= 0; keep it open for as long as the directory is owned,
 * mt_dirlock_release to give it up), or:
 *   -EBUSY  another process owns DIR; its PID in *owner (0 when it has not
 *           written it yet) and the refusal in d, naming DIR and the PID;
 *   other negative errno  the lock file cannot be opened or locked (d says
 *           why). */
int mt_dirlock_acquire(const char *dir, const char *what, pid_t *owner, mt_diag *d);

/* Closes the descriptor (the lock goes with it) and sets *fd to -1. */
void mt_dirlock_release(int *fd);

/* Whether a process owns DIR now, without taking the lock: 1 (its PID in
 * *owner, 0 when unknown), 0 nobody (no lock file, or nobody holds it),
 * negative errno when the lock file cannot be read. */
int mt_dirlock_owner(const char *dir, pid_t *owner);

#endif
