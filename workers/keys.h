/*
 * keys.h - CURVE keys for the coordinator <-> worker link (PROTOCOL.md,
 * "Security"): generation (`moetune keygen`), loading with permission
 * checks, socket set-up, and the coordinator's ZAP handler that admits only
 * the worker keys it knows.
 *
 * Files (Z85 text, one key per file, '#' comment lines allowed):
 *   DIR/NAME.key  the secret key, mode 0600, owned by the user; loading
 *                 refuses a file that group or others may read or write;
 *   DIR/NAME.pub  the public key, safe to copy: the coordinator's goes to
 *                 every worker (--server-key), each worker's goes into the
 *                 coordinator's known-keys directory (KNOWN/NAME.pub, the
 *                 file name being the key's name).
 *
 * No function here prints or logs key material: errors and log lines name
 * files and key names only, and secret keys are wiped from memory after
 * use (mt_keypair_wipe).
 */
#ifndef MT_KEYS_H
#define MT_KEYS_H

#include <stddef.h>

#define MT_KEY_Z85_LEN 40  /* a 32-byte key in Z85 */
#define MT_KEY_NAME_MAX 64 /* [A-Za-z0-9._-], not starting with '.' */
#define MT_ZAP_DOMAIN "moetune"

typedef struct mt_keypair {
    char public_key[MT_KEY_Z85_LEN + 1]; /* Z85, NUL-terminated */
    char secret_key[MT_KEY_Z85_LEN + 1];
} mt_keypair;

/* 1 when name can name a key file. */
int mt_keys_valid_name(const char *name);

/* Generates a keypair into DIR/NAME.key (0600) and DIR/NAME.pub (0644),
 * creating DIR (0700) when absent; each file is written to a temporary and
 * renamed, so a reader never sees half a key.  Refuses (-EEXIST) to replace
 * an existing key unless force.  public_out (41 bytes, may be NULL) gets the
 * new public key.  0 or -errno with a one-line reason in err. */
int mt_keys_generate(const char *dir, const char *name, int force, char *public_out, char *err,
                     size_t errlen);

/* Loads DIR/NAME.key (and checks DIR/NAME.pub, when present, is its public
 * half).  0 or -errno: -EACCES for a secret key file group/others can
 * access, not owned by the user, or not a regular file (symlinks are not
 * followed); -EINVAL for a file that holds no valid key. */
int mt_keys_load(const char *dir, const char *name, mt_keypair *out, char *err, size_t errlen);
/* The same from a .key path; the public half is derived from the secret. */
int mt_keys_load_secret(const char *path, mt_keypair *out, char *err, size_t errlen);
/* A public key file (any readable mode) into out (41 bytes, Z85). */
int mt_keys_load_public(const char *path, char *out, char *err, size_t errlen);
/* Zeroes the secret half (and the rest) in a way the compiler keeps. */
void mt_keypair_wipe(mt_keypair *k);

struct mt_zap;

/* Coordinator: the ROUTER becomes a CURVE server with its own keypair, in
 * ZAP domain MT_ZAP_DOMAIN with the domain enforced where libzmq allows
 * (ZMQ_ZAP_ENFORCE_DOMAIN), so no client is admitted without the handler's
 * yes.  zap must be a running handler (mt_zap_start) in the socket's
 * context: without one, libzmq would admit any client that knows the
 * server key, so NULL is refused (-EINVAL).  Call before bind. */
int mt_curve_server(void *socket, const mt_keypair *own, const struct mt_zap *zap, char *err,
                    size_t errlen);
/* Worker: the DEALER becomes a CURVE client with its own keypair that
 * accepts only the server whose public key is server_public (Z85).  Call
 * before connect. */
int mt_curve_client(void *socket, const mt_keypair *own, const char *server_public, char *err,
                    size_t errlen);

/* ---- the ZAP handler (RFC 27) ------------------------------------------------------ */

/* level: 0 a client admitted, 1 a client refused or a bad request. */
typedef void (*mt_zap_log_fn)(void *ctx, int level, const char *line);

typedef struct mt_zap mt_zap;

/* Binds inproc://zeromq.zap.01 in zmq_ctx (one handler per context) and
 * answers ZAP requests on a thread of its own: a CURVE client is admitted
 * when its public key is in one of the KNOWN/\*.pub files, with the file's
 * name (without .pub) as its User-Id (mt_proto_msg.user_id); everything
 * else is refused.  The directory is read on every request, so adding or
 * removing a worker key needs no restart.  A known-keys directory or key
 * file that group or others can write is ignored (refused, logged), as
 * sshd does for authorized_keys.  log may be NULL (stderr).  Lines never
 * hold key material.  NULL on failure with err. */
mt_zap *mt_zap_start(void *zmq_ctx, const char *known_dir, mt_zap_log_fn log, void *log_ctx,
                     char *err, size_t errlen);
/* Stops the thread and closes the handler; *z = NULL.  Close the CURVE
 * server sockets first.  NULL-safe. */
void mt_zap_stop(mt_zap **z);
/* Requests answered so far. */
void mt_zap_counts(const mt_zap *z, unsigned long *admitted, unsigned long *refused);

/* The handler's decision for one 32-byte client key: 1 known (name gets
 * the key's name), 0 unknown, negative when the directory cannot be used
 * (why says so). */
int mt_zap_lookup(const char *known_dir, const unsigned char key[32], char *name, size_t namelen,
                  char *why, size_t whylen);

#endif
