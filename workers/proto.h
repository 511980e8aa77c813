/*
 * proto.h - the coordinator <-> worker message layer (protocol version 1),
 * as written down in workers/PROTOCOL.md.  Keep the two in step: every
 * command, field, type and limit named here is in the document.
 *
 * A message is three ZeroMQ frames (a ROUTER sees one more in front: the
 * peer's routing id):
 *
 *   frame 0  tag      "moetune/1"  (the protocol and its version)
 *   frame 1  command  ready | job | job-ack | progress | result |
 *                     result-ack | heartbeat | cancel | disconnect
 *   frame 2  body     a JSON object, at most MT_PROTO_MAX_BODY bytes and
 *                     MT_PROTO_MAX_VALUES values, nested at most
 *                     MT_PROTO_MAX_DEPTH deep
 *
 * Decoding validates everything (tag, command, body, every field the
 * command requires and its type) and never crashes on any input: a bad
 * message gives a one-line error naming the frame and the field, and the
 * caller logs and drops it.  Fields a command does not know are ignored, so
 * a version-1 peer may add optional fields without breaking the other side.
 * Sending validates the body against the same rules first, so a sender bug
 * is caught where it happens, not on the other machine.
 *
 * This is the message layer only; the worker loop and the coordinator's
 * executor (job states, heartbeats, re-queueing) follow PROTOCOL.md.
 */
#ifndef MT_PROTO_H
#define MT_PROTO_H

#include "store.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#define MT_PROTO_VERSION 1
#define MT_PROTO_TAG "moetune/1"
#define MT_PROTO_MAX_BODY (8u << 20) /* bytes of the JSON body */
#define MT_PROTO_MAX_DEPTH 32        /* nesting of objects and arrays */
#define MT_PROTO_MAX_VALUES 2000000  /* JSON values in a body (bounds the parsed tree) */
#define MT_PROTO_ID_MAX 200          /* job ids, worker names, kinds */
#define MT_PROTO_IDENTITY_MAX 255    /* a ZeroMQ routing id */

/* The protocol's timing defaults (PROTOCOL.md, "Timeouts"). */
#define MT_PROTO_HEARTBEAT_MS 1000      /* heartbeat interval, both ways */
#define MT_PROTO_LIVENESS 3             /* intervals of silence: unreachable */
#define MT_PROTO_JOB_GRACE_S 60         /* unreachable this long: job lost */
#define MT_PROTO_ACK_TIMEOUT_MS 5000    /* no job-ack: send the same job again */
#define MT_PROTO_HOSTS_MAX 4096         /* a job's nodelist, bytes */
#define MT_PROTO_RECONNECT_MS 500       /* worker reconnect back-off ... */
#define MT_PROTO_RECONNECT_MAX_MS 30000 /* ... doubling up to this */

enum mt_proto_cmd {
    MT_PROTO_NONE = 0, /* not a message (a failed decode) */
    MT_PROTO_READY,
    MT_PROTO_JOB,
    MT_PROTO_JOB_ACK,
    MT_PROTO_PROGRESS,
    MT_PROTO_RESULT,
    MT_PROTO_RESULT_ACK,
    MT_PROTO_HEARTBEAT,
    MT_PROTO_CANCEL,
    MT_PROTO_DISCONNECT
};
#define MT_PROTO_COMMANDS 10 /* including MT_PROTO_NONE */

/* "ready", "job-ack", ...; "?" for MT_PROTO_NONE or out of range. */
const char *mt_proto_cmd_name(int command);
/* The command named (exact, case-sensitive), or MT_PROTO_NONE. */
int mt_proto_cmd_parse(const char *name, size_t len);

/* A decoded message.  body is owned (cJSON_Delete by mt_proto_msg_clear);
 * the views below borrow from it. */
typedef struct mt_proto_msg {
    int command;                                       /* enum mt_proto_cmd */
    cJSON *body;                                       /* the JSON object; NULL on failure */
    unsigned char identity[MT_PROTO_IDENTITY_MAX + 1]; /* ROUTER: peer's routing id */
    size_t idlen;                                      /* 0 on a DEALER */
    char user_id[128]; /* ZAP User-Id of the peer: its key's name ("" when none) */
    char peer[64];     /* Peer-Address of the connection ("" when unknown) */
    size_t frames;     /* frames received (identity included) */
    size_t bytes;      /* bytes received, every frame */
} mt_proto_msg;

void mt_proto_msg_init(mt_proto_msg *m);
/* Frees the body and resets *m; safe on an initialized or cleared msg. */
void mt_proto_msg_clear(mt_proto_msg *m);

/* Validates the frames of one message (the routing id already removed) and
 * sets out->command and out->body (overwritten, not freed: clear a previous
 * message first; mt_proto_msg_clear this one after; the other fields are
 * left as they are).  Pure: no I/O, no global state,
 * safe on any bytes.  Returns 0, or, with a one-line reason in err naming
 * the frame and the field, and out->command == MT_PROTO_NONE:
 *   -EPROTONOSUPPORT  a moetune tag of another version ("moetune/2")
 *   -EMSGSIZE         a body over MT_PROTO_MAX_BODY or MT_PROTO_MAX_VALUES
 *   -EPROTO           anything else malformed
 * err may be NULL when errlen is 0. */
int mt_proto_decode(const void *const *frames, const size_t *lens, size_t n, mt_proto_msg *out,
                    char *err, size_t errlen);

/* Checks a body for a command by the same rules decode applies: 0, or
 * -EINVAL with the field named in err. */
int mt_proto_validate(int command, const cJSON *body, char *err, size_t errlen);

/* Socket options for either end, set before bind/connect:
 *   both: ZMQ_MAXMSGSIZE (a frame over MT_PROTO_MAX_BODY + 4 KiB drops the
 *         connection in libzmq, before it is ever buffered whole);
 *   router (coordinator): ZMQ_ROUTER_MANDATORY (a send to a peer that is
 *         gone fails with EHOSTUNREACH instead of vanishing) and
 *         ZMQ_ROUTER_HANDOVER (a worker that reconnects under its routing id
 *         takes its old connection over);
 *   dealer (worker, router == 0): routing id = the worker's name (required,
 *         1..MT_PROTO_ID_MAX id characters) so a reconnect keeps it, and
 *         the reconnect back-off MT_PROTO_RECONNECT_MS doubling to
 *         MT_PROTO_RECONNECT_MAX_MS.
 * 0 or -errno with err. */
int mt_proto_socket_setup(void *socket, int router, const char *worker_name, char *err,
                          size_t errlen);

/* Sends one message: [identity] tag command body.  identity/idlen name the
 * peer on a ROUTER (NULL/0 on a DEALER).  The body is validated first and
 * never sent when it breaks the rules.  Never blocks (ZMQ_DONTWAIT).
 * Returns 0, or -EINVAL (bad command, body or identity: err names it),
 * -EMSGSIZE (body too large), -EHOSTUNREACH (ROUTER: no such peer now),
 * -EAGAIN (the peer's queue is full; try later), another -errno from
 * libzmq.  err may be NULL when errlen is 0. */
int mt_proto_send(void *socket, const void *identity, size_t idlen, int command, const cJSON *body,
                  char *err, size_t errlen);

/* Receives one whole message (every frame of it, whatever happens) and
 * decodes it; blocks as the socket's ZMQ_RCVTIMEO says (poll first to not
 * block).  router: the first frame is the peer's routing id.  out is
 * overwritten (mt_proto_msg_init; a previous body is not freed, so clear a
 * message before reusing its struct); identity, user_id and peer are
 * filled even when the
 * message is malformed, so the caller can log who sent it.  Returns 0, the
 * negative codes of mt_proto_decode (message dropped, err says why),
 * -EAGAIN (nothing to receive), or another -errno from libzmq. */
int mt_proto_recv(void *socket, int router, mt_proto_msg *out, char *err, size_t errlen);

/* mt_proto_recv of a message already queued: -EAGAIN at once (nothing
 * received) when the socket has none, so a loop draining what arrived
 * never blocks. */
int mt_proto_recv_queued(void *socket, int router, mt_proto_msg *out, char *err, size_t errlen);

/* Formats one error line into err (when given) and returns rc: the one
 * error helper of proto.c, result_json.c and keys.c (here, so that none of
 * them calls another for it). */
static inline int mt_proto_fail(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline int mt_proto_fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    va_list ap;
    if (err && errlen) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* ---- typed views of a decoded message ----------------------------------------- */
/* Each get returns 0 and fills *out with strings borrowed from m->body, or
 * -EINVAL when m is not that command.  Optional fields absent from the
 * message get the default named beside them.  Each body builder returns a
 * new object (cJSON_Delete it, or hand it to mt_proto_send) that passes
 * mt_proto_validate when the struct's required fields are set; NULL on a
 * NULL required string or out of memory.  Optional strings left NULL and
 * optional numbers left at their "absent" value are not written. */

/* A job as both sides name it: job id + retry is the unit of de-duplication. */
typedef struct mt_proto_jobref {
    const char *job_id;
    int retry;
} mt_proto_jobref;

/* ready: worker -> coordinator, first message after every (re)connect. */
typedef struct mt_proto_ready {
    const char *worker;     /* the worker's name (also its routing id) */
    const char *host;       /* hostname */
    int gpus;               /* GPUs per node, >= 0 */
    const char *gpu_type;   /* e.g. "NVIDIA H100 80GB HBM3"; "" when none */
    int nodes;              /* nodes it can run a job on, >= 1 */
    const cJSON *launchers; /* array of strings: local, srun, sbatch */
    const cJSON *programs;  /* array of strings: the argv[0] allowlist */
    const cJSON *running;   /* array of jobrefs it is running */
    const cJSON *finished;  /* array of jobrefs whose result is not yet acked */
    int slots;              /* optional: jobs at once, >= 1 (default 1) */
    const char *version;    /* optional: moetune version (NULL) */
} mt_proto_ready;

/* job: coordinator -> worker. */
typedef struct mt_proto_job {
    const char *job_id;
    int retry;
    const char *kind;     /* screen | validate | profile | fit | bisect */
    const char *contract; /* the contract file's text */
    const char *config;   /* the config's canonical text */
    int replicate;
    double time_limit_s;  /* >= 0; 0: from the contract */
    int profile;          /* optional bool (0) */
    double hang_factor;   /* optional, >= 0 (0: the default) */
    const char *sim_seed; /* optional: decimal uint64 (NULL) */
    const char *launcher; /* optional: the launcher to use (NULL: contract's) */
    const char *routing;  /* optional: "natural" to measure with the router's own
                             routing although the contract forces it (NULL) */
    const char *nodelist; /* optional: "a,b" the srun step's --nodelist (NULL: Slurm
                             places it) -- a comparison's replicates on the nodes of
                             its first control run */
    /* a bisect job (kind "bisect"): the revision, its prepare step's argv
     * templates (workers/prepare.h; {work} is the worker's own work
     * directory) and the repository path {repo} stands for */
    const char *rev;          /* optional (NULL) */
    const char *repo;         /* optional (NULL) */
    const cJSON *prepare;     /* decoded: array of strings, or NULL */
    const char *const *prepare_v; /* to encode: the templates ... */
    size_t n_prepare;         /* ... and their number */
    double prepare_timeout_s; /* optional, >= 0 (0: the worker's default) */
} mt_proto_job;

/* job-ack: worker -> coordinator, for every job received. */
typedef struct mt_proto_job_ack {
    const char *job_id;
    int retry;
    int accepted;           /* bool */
    const char *reason;     /* required when !accepted; optional otherwise */
    const char *slurm_step; /* optional: the Slurm job step ("1234.0") once known (NULL) */
} mt_proto_job_ack;

/* progress: worker -> coordinator, while a job runs (job liveness). */
typedef struct mt_proto_progress {
    const char *job_id;
    int retry;
    const cJSON *lines;     /* array of strings: new iteration lines, in order */
    long iteration;         /* optional: last iteration seen, >= 0 (-1) */
    double elapsed_s;       /* optional: seconds since the job started, >= 0 (NAN) */
    double step_ms;         /* optional: last step time, >= 0 (NAN) */
    const char *slurm_step; /* optional: the Slurm job step ("1234.0") (NULL) */
} mt_proto_progress;

/* result: worker -> coordinator, resent until result-ack. */
typedef struct mt_proto_result {
    const char *job_id;
    int retry;
    const cJSON *memo;    /* object: the job's memo (search/exec.c job_memo) */
    const cJSON *run;     /* object, or NULL when no run exists (could not be set up) */
    const cJSON *samples; /* array (mt_proto_result_to_store) */
    const cJSON *gpus;    /* array */
} mt_proto_result;

/* result-ack: coordinator -> worker, once the result is durable. */
typedef struct mt_proto_result_ack {
    const char *job_id;
    int retry;
    const char *status; /* stored | duplicate | discarded */
    long long run_id;   /* optional: the store's run id (-1) */
} mt_proto_result_ack;

/* heartbeat: both ways, every MT_PROTO_HEARTBEAT_MS; every field optional. */
typedef struct mt_proto_heartbeat {
    long long seq;        /* >= 0 (-1 absent) */
    double time;          /* sender's Unix time (NAN absent) */
    const cJSON *running; /* worker: array of jobrefs it runs (NULL absent) */
    int reannounce;       /* coordinator: "I do not know you; send ready" (0) */
} mt_proto_heartbeat;

/* cancel: coordinator -> worker. */
typedef struct mt_proto_cancel {
    const char *job_id;
    int retry;
    const char *reason;
} mt_proto_cancel;

/* disconnect: either side, before it goes away on purpose. */
typedef struct mt_proto_disconnect {
    const char *reason;
} mt_proto_disconnect;

int mt_proto_get_ready(const mt_proto_msg *m, mt_proto_ready *out);
int mt_proto_get_job(const mt_proto_msg *m, mt_proto_job *out);
int mt_proto_get_job_ack(const mt_proto_msg *m, mt_proto_job_ack *out);
int mt_proto_get_progress(const mt_proto_msg *m, mt_proto_progress *out);
int mt_proto_get_result(const mt_proto_msg *m, mt_proto_result *out);
int mt_proto_get_result_ack(const mt_proto_msg *m, mt_proto_result_ack *out);
int mt_proto_get_heartbeat(const mt_proto_msg *m, mt_proto_heartbeat *out);
int mt_proto_get_cancel(const mt_proto_msg *m, mt_proto_cancel *out);
int mt_proto_get_disconnect(const mt_proto_msg *m, mt_proto_disconnect *out);

/* The job id and retry of any command that carries them (job, job-ack,
 * progress, result, result-ack, cancel): 0, or -EINVAL for the others. */
int mt_proto_jobref_of(const mt_proto_msg *m, mt_proto_jobref *out);

/* Element i of a validated array of strings / jobrefs (the views' arrays):
 * NULL / -EINVAL past the end. */
const char *mt_proto_str_at(const cJSON *array, size_t i);
int mt_proto_jobref_at(const cJSON *array, size_t i, mt_proto_jobref *out);
size_t mt_proto_count(const cJSON *array); /* 0 for NULL */

/* Body builders.  Arrays are given as C arrays (copied). */
cJSON *mt_proto_ready_body(const mt_proto_ready *r, const char *const *launchers,
                           size_t n_launchers, const char *const *programs, size_t n_programs,
                           const mt_proto_jobref *running, size_t n_running,
                           const mt_proto_jobref *finished, size_t n_finished);
cJSON *mt_proto_job_body(const mt_proto_job *j);
cJSON *mt_proto_job_ack_body(const mt_proto_job_ack *a);
cJSON *mt_proto_progress_body(const mt_proto_progress *p, const char *const *lines, size_t n_lines);
/* memo_json: the memo as JSON text (job_memo's output); r: the stored run
 * with its samples and GPU rows, or NULL when there is no run. */
cJSON *mt_proto_result_body(const char *job_id, int retry, const char *memo_json,
                            const mt_store_result *r);
cJSON *mt_proto_result_ack_body(const mt_proto_result_ack *a);
/* running may be NULL (not sent) */
cJSON *mt_proto_heartbeat_body(const mt_proto_heartbeat *h, const mt_proto_jobref *running,
                               size_t n_running);
cJSON *mt_proto_cancel_body(const mt_proto_cancel *c);
cJSON *mt_proto_disconnect_body(const char *reason);
cJSON *mt_proto_jobref_json(const mt_proto_jobref *j);

/* ---- a finished run as JSON (workers/result_json.c) --------------------------- */
/* Numbers that JSON cannot hold travel as strings: NAN "nan", +inf "inf",
 * -inf "-inf" (as the store writes losses); finite doubles are printed so
 * they read back to the same bits; int64 byte counts must stay within
 * +-2^53.  Absent strings are null.  A run's id is not sent (the
 * coordinator's store gives its own). */
cJSON *mt_proto_run_json(const mt_store_run *run);
cJSON *mt_proto_samples_json(const mt_store_sample *v, size_t n);
cJSON *mt_proto_gpus_json(const mt_store_gpu_mem *v, size_t n);

/* The JSON of run, samples and gpus back into *out, ready for
 * mt_store_put_result: strings are borrowed from the JSON (keep it alive
 * while out is used), the arrays are allocated: release them with
 * mt_proto_result_release.  run may not be NULL.  0, or -EINVAL with the
 * field named in err ("samples[3].losses.lm loss: ..."), -ENOMEM; out is
 * left released on failure. */
int mt_proto_result_to_store(const cJSON *run, const cJSON *samples, const cJSON *gpus,
                             mt_store_result *out, char *err, size_t errlen);
void mt_proto_result_release(mt_store_result *r);

#endif
