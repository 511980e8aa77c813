/*
 * clock.h - the two clocks moetune reads: wall time (timestamps, status,
 * deadlines shared between processes) and monotonic time (durations inside
 * one process), both in seconds.
 */
#ifndef MT_CLOCK_H
#define MT_CLOCK_H

#include <time.h>

/* Seconds since the epoch (CLOCK_REALTIME). */
static inline double mt_clock_wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Seconds on CLOCK_MONOTONIC: only differences mean anything. */
static inline double mt_clock_mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
