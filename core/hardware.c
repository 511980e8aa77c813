#include "hardware.h"

#include <string.h>

/* Dense per-GPU peaks, HBM, NVLink domain and scale-out bandwidth as listed in
 * shared/facts/calibration.md; SM counts and compute capabilities from the vendors'
 * data sheets. */
static const mt_gpu_spec gpus[] = {
    {"H100", "hopper", 989, 1979, 80, 3.35, 8, 900, 50, 132, "9.0"},
    {"H200", "hopper", 989, 1979, 141, 4.8, 8, 900, 50, 132, "9.0"},
    {"B200", "blackwell", 2250, 4500, 180, 8, 8, 1800, 50, 148, "10.0"},
    {"GB200", "blackwell", 2500, 5000, 186, 8, 72, 1800, 50, 152, "10.0"},
    {"GB300", "blackwell", 2500, 5000, 279, 8, 72, 1800, 100, 160, "10.3"},
};

static const char *const names[] = {"H100", "H200", "B200", "GB200", "GB300", NULL};

double mt_gpu_oom_bytes(const mt_gpu_spec *g)
{
    return g ? (g->hbm_gb - 0.5) * 1024.0 * 1024.0 * 1024.0 : 0;
}

const mt_gpu_spec *mt_gpu_find(const char *name)
{
    size_t i;
    for (i = 0; name && i < sizeof gpus / sizeof gpus[0]; i++)
        if (!strcmp(gpus[i].name, name))
            return &gpus[i];
    return NULL;
}

const char *const *mt_gpu_names(void) { return names; }
