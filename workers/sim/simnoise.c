/*
 * simnoise.c - the noise model moetune is judged under
 * (shared/facts/statistics.md): a per-run Gaussian offset (SD 1% by default)
 * and per-step AR(1) jitter (CV 2%, lag-1 autocorrelation 0.5), seeded by
 * (seed, config id, replicate) so replicates differ and reruns repeat.
 *
 * Its interface: workers/sim/sim.h.
 */
#include "sim.h"

#include <math.h>

/* splitmix64: small, fast, and good enough for simulation noise. */
static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double uniform01(uint64_t *s)
{
    /* 53 random bits in (0, 1): never exactly 0, so log() is safe */
    return ((double)(next(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

double sim_noise_gauss(sim_noise *n)
{
    double u1 = uniform01(&n->state), u2 = uniform01(&n->state);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void sim_noise_init(sim_noise *n, uint64_t seed, uint64_t config_id, int replicate,
                    double offset_sd, double jitter_cv, double rho)
{
    uint64_t mix = seed * 0x9e3779b97f4a7c15ULL;
    mix ^= config_id + 0x632be59bd9b4e019ULL + (mix << 6) + (mix >> 2);
    mix ^= (uint64_t)(unsigned)replicate * 0xd1b54a32d192ed03ULL + (mix << 6) + (mix >> 2);
    n->state = mix;
    next(&n->state);
    if (rho < 0)
        rho = 0;
    if (rho > 0.99)
        rho = 0.99;
    n->cv = jitter_cv > 0 ? jitter_cv : 0;
    n->rho = rho;
    n->offset = 1.0 + (offset_sd > 0 ? offset_sd * sim_noise_gauss(n) : 0);
    if (n->offset < 0.5)
        n->offset = 0.5; /* a 50-sigma draw cannot make time negative */
    /* start the AR(1) process in its stationary distribution */
    n->prev = n->cv * sim_noise_gauss(n);
}

double sim_noise_step(sim_noise *n)
{
    double e = n->rho * n->prev + sqrt(1.0 - n->rho * n->rho) * n->cv * sim_noise_gauss(n);
    double m;
    n->prev = e;
    m = n->offset * (1.0 + e);
    return m > 0.05 ? m : 0.05;
}
