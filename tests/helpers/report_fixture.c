/*
 * report_fixture - renders a bundle.json into a report, for the headless
 * browser test: report_fixture BUNDLE.json OUTDIR copies the bundle to
 * OUTDIR/bundle.json (creating OUTDIR) and writes OUTDIR/REPORT.md and
 * OUTDIR/report.html with mt_report_write.
 */
#include "diag.h"
#include "report.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int main(int argc, char **argv)
{
    char path[4096], buf[65536];
    FILE *in, *out;
    size_t n;
    mt_diag *d;
    int rc;
    if (argc != 3) {
        fprintf(stderr, "usage: report_fixture BUNDLE.json OUTDIR\n");
        return 2;
    }
    if (mkdir(argv[2], 0755) < 0 && errno != EEXIST) {
        fprintf(stderr, "report_fixture: %s: %s\n", argv[2], strerror(errno));
        return 1;
    }
    if (snprintf(path, sizeof path, "%s/bundle.json", argv[2]) >= (int)sizeof path) {
        fprintf(stderr, "report_fixture: %s: path too long\n", argv[2]);
        return 1;
    }
    in = fopen(argv[1], "rb");
    out = fopen(path, "wb");
    if (!in || !out) {
        fprintf(stderr, "report_fixture: %s: %s\n", in ? path : argv[1], strerror(errno));
        return 1;
    }
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n)
            break;
    fclose(in);
    if (fclose(out) != 0) {
        fprintf(stderr, "report_fixture: %s: write failed\n", path);
        return 1;
    }
    d = mt_diag_new();
    rc = mt_report_write(argv[2], d);
    mt_diag_print(d, stderr);
    mt_diag_destroy(&d);
    if (rc) {
        fprintf(stderr, "report_fixture: mt_report_write: %s\n", strerror(-rc));
        return 1;
    }
    printf("%s/report.html\n", argv[2]);
    return 0;
}
