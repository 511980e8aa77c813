/*
 * report.c - mt_report_write (search/report.h): DIR/bundle.json read into
 * its model (report_read.c), rendered by both views (report_html.c,
 * report_md.c), and written beside it, each file through a temporary one
 * renamed into place.  It sits above the reader and the views, so none of
 * them calls another.
 */
#include "report.h"
#include "report_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *join_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* Writes text to DIR/NAME through a temporary file renamed into place. */
static int write_atomic(const char *dir, const char *name, const mt__sb *text, mt_diag *d)
{
    char *path = join_path(dir, name), *tmp = NULL;
    size_t off = 0;
    int fd = -1, err = 0;
    if (!path || !(tmp = malloc(strlen(path) + 16))) {
        free(path);
        return -ENOMEM;
    }
    sprintf(tmp, "%s.tmp.XXXXXX", path);
    fd = mkstemp(tmp);
    if (fd < 0) {
        err = -errno;
        mt_diag_add(d, path, 0, NULL, "cannot create a temporary file beside it: %s",
                    strerror(errno));
        goto out;
    }
    while (off < text->n) {
        ssize_t w = write(fd, text->s + off, text->n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            err = -errno;
            mt_diag_add(d, tmp, 0, NULL, "cannot write: %s", strerror(errno));
            goto out;
        }
        off += (size_t)w;
    }
    if (fchmod(fd, 0644) < 0 || fsync(fd) < 0) {
        err = -errno;
        mt_diag_add(d, tmp, 0, NULL, "cannot finish writing: %s", strerror(errno));
        goto out;
    }
    if (close(fd) < 0) {
        fd = -1;
        err = -errno;
        mt_diag_add(d, tmp, 0, NULL, "cannot close: %s", strerror(errno));
        goto out;
    }
    fd = -1;
    if (rename(tmp, path) < 0) {
        err = -errno;
        mt_diag_add(d, path, 0, NULL, "cannot rename %s into place: %s", tmp, strerror(errno));
    }
out:
    if (fd >= 0)
        close(fd);
    if (err && tmp)
        unlink(tmp);
    free(tmp);
    free(path);
    return err;
}

int mt_report_write(const char *dir, mt_diag *d)
{
    mt__bundle b;
    mt__sb html = {0}, md = {0};
    int err = mt__bundle_read(dir, &b, d);
    if (!err) {
        mt__report_html(&html, &b.m);
        mt__report_md(&md, &b.m);
        if (html.oom || md.oom) {
            err = -ENOMEM;
            mt_diag_add(d, dir, 0, NULL, "out of memory while rendering the report");
        }
    }
    if (!err)
        err = write_atomic(dir, "report.html", &html, d);
    if (!err)
        err = write_atomic(dir, "REPORT.md", &md, d);
    mt__sb_clear(&html);
    mt__sb_clear(&md);
    mt__bundle_clear(&b);
    return err;
}
