/*
 * callguard.h - the guard around every call into a plugin.
 *
 * Plugins run in moetune's own process (abi/moetune/plugin.h), so a plugin
 * that crashes, hangs or exits takes moetune with it.  The guard makes sure
 * it never does so without a word:
 *
 *   - a fatal signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGSYS) during
 *     a call writes "moetune: plugin NAME (PATH) crashed in CALL: SIGNAL" to
 *     stderr from an async-signal-safe handler (one write(2) of a message
 *     built when the call began, on an alternate stack, so a stack overflow
 *     is reported too), then the signal is re-raised with the handler that
 *     was there before (the default: the process dies of it, a core dump
 *     where enabled);
 *   - a call that has not returned within the per-call limit makes a
 *     watchdog thread print the plugin, the call and the limit and end the
 *     process with exit 1;
 *   - exit() called inside a call becomes exit 1 with the plugin and the
 *     call named (an atexit hook that sees the "inside a call" flag).
 *
 * Calls outside the guard (the host's own code) keep the default signal
 * behaviour.  The guard is per process: a forked child that calls a plugin
 * gets its own watchdog at its first call.  Calls are not nested (the host
 * serializes calls into plugins).
 */
#ifndef MT_CALLGUARD_H
#define MT_CALLGUARD_H

/* The default per-call limit, in seconds. */
#define MT_CALLGUARD_DEFAULT_S 60.0

/* Marks the start of a call: plugin is the plugin's name (or its file while
 * it is being opened), path its file (may be NULL), call what is called,
 * e.g. "propose()"; they are copied (the messages are rebuilt only when
 * they change). */
void mt_callguard_enter(const char *plugin, const char *path, const char *call);
void mt_callguard_leave(void);

/* The per-call limit in seconds; 0 switches the watchdog off.  Until set,
 * MOETUNE_PLUGIN_TIMEOUT (seconds) or MT_CALLGUARD_DEFAULT_S.  Returns 0, or
 * -1 when seconds is negative or not finite. */
int mt_callguard_set_limit(double seconds);
double mt_callguard_limit(void);

#endif
