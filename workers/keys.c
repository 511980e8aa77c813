/*
 * keys.c - CURVE key files, socket set-up and the coordinator's ZAP handler
 * (see keys.h and PROTOCOL.md "Security").
 */
#include "keys.h"
#include "proto.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#define KEYFILE_MAX 4096

#define fail mt_proto_fail /* proto.h */

void mt_keypair_wipe(mt_keypair *k)
{
    if (k)
        explicit_bzero(k, sizeof *k);
}

int mt_keys_valid_name(const char *name)
{
    size_t i, n;
    if (!name || !(n = strlen(name)) || n > MT_KEY_NAME_MAX || name[0] == '.')
        return 0;
    for (i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

static int curve_available(char *err, size_t errlen)
{
    if (!zmq_has("curve"))
        return fail(err, errlen, -ENOTSUP,
                    "this libzmq was built without CURVE (libsodium); encrypted workers need it");
    return 0;
}

/* ---- key files --------------------------------------------------------------------- */

/* The one key line of a key file's text: 0 and the 40 Z85 characters in
 * z85 (41 bytes, checked to decode), or -EINVAL. */
static int parse_key(const char *text, size_t n, char *z85, char *why, size_t whylen)
{
    size_t i = 0, found = 0;
    uint8_t bin[32];
    while (i < n) {
        size_t s = i, e;
        while (i < n && text[i] != '\n')
            i++;
        e = i;
        if (i < n)
            i++;
        while (s < e && (text[s] == ' ' || text[s] == '\t'))
            s++;
        while (e > s && (text[e - 1] == ' ' || text[e - 1] == '\t' || text[e - 1] == '\r'))
            e--;
        if (s == e || text[s] == '#')
            continue;
        if (found++)
            return fail(why, whylen, -EINVAL, "more than one key line");
        if (e - s != MT_KEY_Z85_LEN)
            return fail(why, whylen, -EINVAL, "the key line has %zu characters, expected %d", e - s,
                        MT_KEY_Z85_LEN);
        memcpy(z85, text + s, MT_KEY_Z85_LEN);
        z85[MT_KEY_Z85_LEN] = '\0';
        if (!zmq_z85_decode(bin, z85)) {
            explicit_bzero(z85, MT_KEY_Z85_LEN + 1);
            return fail(why, whylen, -EINVAL, "the key line is not Z85");
        }
        explicit_bzero(bin, sizeof bin);
    }
    if (!found)
        return fail(why, whylen, -EINVAL, "no key line");
    return 0;
}

/* Reads a key file.  secret: refuse unless a regular file owned by the
 * user (or root) that group and others cannot access.  Symlinks are not
 * followed either way. */
static int read_key_file(const char *path, int secret, char *z85, char *err, size_t errlen)
{
    char buf[KEYFILE_MAX + 1], why[120];
    struct stat sb;
    ssize_t got;
    size_t n = 0;
    int fd, e, rc;
    fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        e = errno;
        if (e == ELOOP)
            return fail(err, errlen, -EACCES, "key file %s is a symbolic link; refused", path);
        return fail(err, errlen, -e, "key file %s: %s", path, strerror(e));
    }
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return fail(err, errlen, -EACCES, "key file %s is not a regular file", path);
    }
    if (secret && (sb.st_mode & 077)) {
        close(fd);
        return fail(err, errlen, -EACCES,
                    "secret key %s is accessible by group or others (mode %04o); refused: "
                    "chmod 600 %s",
                    path, (unsigned)(sb.st_mode & 07777), path);
    }
    if (secret && sb.st_uid != geteuid() && sb.st_uid != 0) {
        close(fd);
        return fail(err, errlen, -EACCES,
                    "secret key %s is owned by uid %u, not by uid %u; refused", path,
                    (unsigned)sb.st_uid, (unsigned)geteuid());
    }
    while (n < KEYFILE_MAX && (got = read(fd, buf + n, KEYFILE_MAX - n)) != 0) {
        if (got < 0) {
            if (errno == EINTR)
                continue;
            e = errno;
            close(fd);
            explicit_bzero(buf, sizeof buf);
            return fail(err, errlen, -e, "key file %s: %s", path, strerror(e));
        }
        n += (size_t)got;
    }
    close(fd);
    rc = parse_key(buf, n, z85, why, sizeof why);
    explicit_bzero(buf, sizeof buf);
    if (rc)
        return fail(err, errlen, rc, "key file %s: %s", path, why);
    return 0;
}

int mt_keys_load_public(const char *path, char *out, char *err, size_t errlen)
{
    if (!path || !out)
        return fail(err, errlen, -EINVAL, "no key file");
    return read_key_file(path, 0, out, err, errlen);
}

int mt_keys_load_secret(const char *path, mt_keypair *out, char *err, size_t errlen)
{
    int rc;
    memset(out, 0, sizeof *out);
    if (!path)
        return fail(err, errlen, -EINVAL, "no key file");
    if ((rc = curve_available(err, errlen)))
        return rc;
    if ((rc = read_key_file(path, 1, out->secret_key, err, errlen)))
        return rc;
    if (zmq_curve_public(out->public_key, out->secret_key) != 0) {
        mt_keypair_wipe(out);
        return fail(err, errlen, -EINVAL, "key file %s: cannot derive the public key", path);
    }
    return 0;
}

static char *path_of(const char *dir, const char *name, const char *ext)
{
    size_t n = strlen(dir) + strlen(name) + strlen(ext) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s%s", dir, name, ext);
    return p;
}

int mt_keys_load(const char *dir, const char *name, mt_keypair *out, char *err, size_t errlen)
{
    char *kp, *pp, pub[MT_KEY_Z85_LEN + 1];
    int rc;
    memset(out, 0, sizeof *out);
    if (!dir || !mt_keys_valid_name(name))
        return fail(err, errlen, -EINVAL, "key name \"%s\": expected 1-%d of A-Z a-z 0-9 . _ -",
                    name ? name : "", MT_KEY_NAME_MAX);
    kp = path_of(dir, name, ".key");
    pp = path_of(dir, name, ".pub");
    if (!kp || !pp) {
        free(kp);
        free(pp);
        return fail(err, errlen, -ENOMEM, "out of memory");
    }
    rc = mt_keys_load_secret(kp, out, err, errlen);
    if (rc == 0 && access(pp, F_OK) == 0) {
        rc = mt_keys_load_public(pp, pub, err, errlen);
        if (rc == 0 && strcmp(pub, out->public_key) != 0)
            rc = fail(err, errlen, -EINVAL, "%s is not the public half of %s", pp, kp);
        if (rc)
            mt_keypair_wipe(out);
    }
    free(kp);
    free(pp);
    return rc;
}

/* Writes text to path through a temporary in the same directory, with
 * mode, fsync'ed, then renamed over (force) or linked (never replaces). */
static int write_atomic(const char *dir, const char *path, const char *text, mode_t mode, int force,
                        char *err, size_t errlen)
{
    size_t n = strlen(dir) + 32, len = strlen(text), off = 0;
    char *tmp = malloc(n);
    int fd, e;
    if (!tmp)
        return fail(err, errlen, -ENOMEM, "out of memory");
    snprintf(tmp, n, "%s/.keygen.XXXXXX", dir);
    if ((fd = mkstemp(tmp)) < 0) {
        e = errno;
        free(tmp);
        return fail(err, errlen, -e, "cannot create a file in %s: %s", dir, strerror(e));
    }
    if (fchmod(fd, mode) != 0)
        goto io;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            goto io;
        off += (size_t)w;
    }
    if (fsync(fd) != 0)
        goto io;
    if (close(fd) != 0) {
        fd = -1;
        goto io;
    }
    fd = -1;
    if (force ? rename(tmp, path) != 0 : link(tmp, path) != 0)
        goto io;
    if (!force)
        unlink(tmp);
    free(tmp);
    return 0;
io:
    e = errno ? errno : EIO;
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    free(tmp);
    if (e == EEXIST)
        return fail(err, errlen, -EEXIST, "%s exists; not replaced (use --force)", path);
    return fail(err, errlen, -e, "cannot write %s: %s", path, strerror(e));
}

int mt_keys_generate(const char *dir, const char *name, int force, char *public_out, char *err,
                     size_t errlen)
{
    mt_keypair k;
    char *kp = NULL, *pp = NULL, text[256];
    struct stat sb;
    int rc, dfd;
    if (!dir || !dir[0])
        return fail(err, errlen, -EINVAL, "no key directory");
    if (!mt_keys_valid_name(name))
        return fail(err, errlen, -EINVAL, "key name \"%s\": expected 1-%d of A-Z a-z 0-9 . _ -",
                    name ? name : "", MT_KEY_NAME_MAX);
    if ((rc = curve_available(err, errlen)))
        return rc;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return fail(err, errlen, -errno, "cannot create %s: %s", dir, strerror(errno));
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return fail(err, errlen, -ENOTDIR, "%s is not a directory", dir);
    kp = path_of(dir, name, ".key");
    pp = path_of(dir, name, ".pub");
    if (!kp || !pp) {
        rc = fail(err, errlen, -ENOMEM, "out of memory");
        goto out;
    }
    if (!force && (access(kp, F_OK) == 0 || access(pp, F_OK) == 0)) {
        rc = fail(err, errlen, -EEXIST,
                  "a key named \"%s\" exists in %s; not replaced (use --force)", name, dir);
        goto out;
    }
    if (zmq_curve_keypair(k.public_key, k.secret_key) != 0) {
        rc = fail(err, errlen, -EIO, "zmq_curve_keypair: %s", zmq_strerror(errno));
        goto out;
    }
    snprintf(text, sizeof text,
             "# moetune CURVE secret key \"%s\": keep it private (mode 0600); its public half "
             "is %s.pub\n%s\n",
             name, name, k.secret_key);
    rc = write_atomic(dir, kp, text, 0600, force, err, errlen);
    explicit_bzero(text, sizeof text);
    if (rc)
        goto out;
    snprintf(text, sizeof text, "# moetune CURVE public key \"%s\"\n%s\n", name, k.public_key);
    if ((rc = write_atomic(dir, pp, text, 0644, force, err, errlen))) {
        unlink(kp);
        goto out;
    }
    if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
        fsync(dfd);
        close(dfd);
    }
    if (public_out)
        memcpy(public_out, k.public_key, MT_KEY_Z85_LEN + 1);
out:
    mt_keypair_wipe(&k);
    free(kp);
    free(pp);
    return rc;
}

/* ---- sockets ----------------------------------------------------------------------- */

static int z85_ok(const char *z)
{
    uint8_t bin[32];
    return z && strlen(z) == MT_KEY_Z85_LEN && zmq_z85_decode(bin, z) != NULL;
}

static int zfail(char *err, size_t errlen, const char *what)
{
    int e = errno ? errno : EIO;
    return fail(err, errlen, -e, "%s: %s", what, zmq_strerror(e));
}

int mt_curve_server(void *socket, const mt_keypair *own, const struct mt_zap *zap, char *err,
                    size_t errlen)
{
    int one = 1, rc;
    if ((rc = curve_available(err, errlen)))
        return rc;
    if (!socket || !own || !z85_ok(own->secret_key))
        return fail(err, errlen, -EINVAL, "CURVE server: no socket or no valid secret key");
    if (!zap)
        return fail(err, errlen, -EINVAL,
                    "CURVE server without a ZAP handler would admit any client that knows the "
                    "server key; start one (mt_zap_start) first");
    if (zmq_setsockopt(socket, ZMQ_CURVE_SERVER, &one, sizeof one))
        return zfail(err, errlen, "ZMQ_CURVE_SERVER");
    if (zmq_setsockopt(socket, ZMQ_CURVE_SECRETKEY, own->secret_key, MT_KEY_Z85_LEN))
        return zfail(err, errlen, "ZMQ_CURVE_SECRETKEY");
    if (zmq_setsockopt(socket, ZMQ_ZAP_DOMAIN, MT_ZAP_DOMAIN, strlen(MT_ZAP_DOMAIN)))
        return zfail(err, errlen, "ZMQ_ZAP_DOMAIN");
    /* ZMQ_ZAP_ENFORCE_DOMAIN (a draft option, 93): with it a server whose
     * handler is gone refuses clients instead of admitting them.  Where the
     * library lacks it, the handler is the only gate (mt_zap_stop after the
     * server socket is closed). */
    (void)zmq_setsockopt(socket, 93, &one, sizeof one);
    return 0;
}

int mt_curve_client(void *socket, const mt_keypair *own, const char *server_public, char *err,
                    size_t errlen)
{
    int rc;
    if ((rc = curve_available(err, errlen)))
        return rc;
    if (!socket || !own || !z85_ok(own->secret_key) || !z85_ok(own->public_key))
        return fail(err, errlen, -EINVAL, "CURVE client: no socket or no valid keypair");
    if (!z85_ok(server_public))
        return fail(err, errlen, -EINVAL,
                    "CURVE client: the server's public key is not 40 Z85 characters");
    if (zmq_setsockopt(socket, ZMQ_CURVE_SERVERKEY, server_public, MT_KEY_Z85_LEN))
        return zfail(err, errlen, "ZMQ_CURVE_SERVERKEY");
    if (zmq_setsockopt(socket, ZMQ_CURVE_PUBLICKEY, own->public_key, MT_KEY_Z85_LEN))
        return zfail(err, errlen, "ZMQ_CURVE_PUBLICKEY");
    if (zmq_setsockopt(socket, ZMQ_CURVE_SECRETKEY, own->secret_key, MT_KEY_Z85_LEN))
        return zfail(err, errlen, "ZMQ_CURVE_SECRETKEY");
    return 0;
}

/* ---- ZAP --------------------------------------------------------------------------- */

int mt_zap_lookup(const char *known_dir, const unsigned char key[32], char *name, size_t namelen,
                  char *why, size_t whylen)
{
    struct stat sb;
    struct dirent *e;
    DIR *d;
    char skipped[MT_KEY_NAME_MAX + 8] = "";
    int nskipped = 0, found = 0;
    if (name && namelen)
        name[0] = '\0';
    if (why && whylen)
        why[0] = '\0';
    if (!known_dir || stat(known_dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return fail(why, whylen, -ENOENT, "the known-keys directory %s is missing",
                    known_dir ? known_dir : "(none)");
    if (sb.st_mode & 022)
        return fail(why, whylen, -EACCES,
                    "the known-keys directory %s is writable by group or others (mode %04o); "
                    "every key in it is ignored",
                    known_dir, (unsigned)(sb.st_mode & 07777));
    if (!(d = opendir(known_dir)))
        return fail(why, whylen, -errno, "cannot read %s: %s", known_dir, strerror(errno));
    while (!found && (e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        char base[MT_KEY_NAME_MAX + 1], z85[MT_KEY_Z85_LEN + 1], *path, err[300];
        uint8_t bin[32];
        int fd;
        if (n <= 4 || n - 4 > MT_KEY_NAME_MAX || strcmp(e->d_name + n - 4, ".pub") != 0)
            continue;
        memcpy(base, e->d_name, n - 4);
        base[n - 4] = '\0';
        if (!mt_keys_valid_name(base) || !(path = path_of(known_dir, e->d_name, "")))
            continue;
        /* a key file others may write is not trusted */
        fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || (sb.st_mode & 022)) {
            if (fd >= 0)
                close(fd);
            if (!nskipped++)
                snprintf(skipped, sizeof skipped, "%s", e->d_name);
            free(path);
            continue;
        }
        close(fd);
        if (read_key_file(path, 0, z85, err, sizeof err) == 0 && zmq_z85_decode(bin, z85) &&
            memcmp(bin, key, 32) == 0) {
            found = 1;
            if (name && namelen)
                snprintf(name, namelen, "%s", base);
        }
        free(path);
    }
    closedir(d);
    if (!found && nskipped)
        fail(why, whylen, 0,
             "%d key file%s in %s ignored (writable by group or others, or not a regular "
             "file; first: %s)",
             nskipped, nskipped == 1 ? "" : "s", known_dir, skipped);
    return found;
}

struct mt_zap {
    void *sock;
    char *dir;
    mt_zap_log_fn log;
    void *log_ctx;
    pthread_t thread;
    atomic_int stop;
    atomic_ulong admitted, refused;
};

static void zlog(mt_zap *z, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void zlog(mt_zap *z, int level, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (z->log)
        z->log(z->log_ctx, level, line);
    else
        fprintf(stderr, "moetune: %s\n", line);
}

/* Printable copy of a short untrusted frame (routing ids, addresses). */
static const char *printable(const zmq_msg_t *m, char *buf, size_t cap)
{
    const unsigned char *p = zmq_msg_data((zmq_msg_t *)m);
    size_t i, n = zmq_msg_size((zmq_msg_t *)m), o = 0;
    for (i = 0; i < n && i < 64 && o + 5 < cap; i++) {
        unsigned c = p[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
            buf[o++] = (char)c;
        else
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
    }
    buf[o] = '\0';
    return buf;
}

static int frame_is(const zmq_msg_t *m, const char *s)
{
    size_t n = strlen(s);
    return zmq_msg_size((zmq_msg_t *)m) == n && memcmp(zmq_msg_data((zmq_msg_t *)m), s, n) == 0;
}

#define ZAP_FRAMES 8

static void zap_reply(void *sock, const zmq_msg_t *reqid, const char *code, const char *text,
                      const char *user)
{
    zmq_send(sock, "1.0", 3, ZMQ_SNDMORE);
    if (reqid)
        zmq_send(sock, zmq_msg_data((zmq_msg_t *)reqid), zmq_msg_size((zmq_msg_t *)reqid),
                 ZMQ_SNDMORE);
    else
        zmq_send(sock, "", 0, ZMQ_SNDMORE);
    zmq_send(sock, code, strlen(code), ZMQ_SNDMORE);
    zmq_send(sock, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(sock, user, strlen(user), ZMQ_SNDMORE);
    zmq_send(sock, "", 0, 0); /* metadata */
}

/* One request: [version, request id, domain, address, routing id,
 * mechanism, credentials...] -> [version, request id, status code, status
 * text, user id, metadata]. */
static void zap_handle(mt_zap *z)
{
    zmq_msg_t f[ZAP_FRAMES];
    size_t n = 0, i;
    int more = 1;
    char addr[300], who[64], why[600];
    while (more) {
        zmq_msg_t junk, *dst = n < ZAP_FRAMES ? &f[n] : &junk;
        zmq_msg_init(dst);
        if (zmq_msg_recv(dst, z->sock, 0) < 0) {
            zmq_msg_close(dst);
            if (errno == EINTR && n)
                continue;
            for (i = 0; i < n; i++)
                zmq_msg_close(&f[i]);
            return;
        }
        more = zmq_msg_more(dst);
        if (dst == &junk)
            zmq_msg_close(&junk);
        else
            n++;
    }
    if (n < 6 || !frame_is(&f[0], "1.0")) {
        atomic_fetch_add(&z->refused, 1);
        zlog(z, 1, "zap: a malformed request (%zu frames) refused", n);
        zap_reply(z->sock, n > 1 ? &f[1] : NULL, "500", "malformed ZAP request", "");
        goto out;
    }
    printable(&f[3], addr, sizeof addr);
    if (!frame_is(&f[2], MT_ZAP_DOMAIN)) {
        atomic_fetch_add(&z->refused, 1);
        zlog(z, 1, "zap: refused a client from %s: ZAP domain is not \"%s\"", addr, MT_ZAP_DOMAIN);
        zap_reply(z->sock, &f[1], "400", "unknown ZAP domain", "");
        goto out;
    }
    if (!frame_is(&f[5], "CURVE") || n != 7 || zmq_msg_size(&f[6]) != 32) {
        atomic_fetch_add(&z->refused, 1);
        zlog(z, 1, "zap: refused a client from %s: CURVE is required", addr);
        zap_reply(z->sock, &f[1], "400", "CURVE required", "");
        goto out;
    }
    switch (mt_zap_lookup(z->dir, zmq_msg_data(&f[6]), who, sizeof who, why, sizeof why)) {
    case 1:
        atomic_fetch_add(&z->admitted, 1);
        zlog(z, 0, "zap: admitted worker key \"%s\" from %s", who, addr);
        zap_reply(z->sock, &f[1], "200", "OK", who);
        break;
    case 0:
        atomic_fetch_add(&z->refused, 1);
        zlog(z, 1,
             "zap: refused a CURVE client from %s: its public key is not one of the known worker "
             "keys in %s%s%s",
             addr, z->dir, why[0] ? "; " : "", why);
        zap_reply(z->sock, &f[1], "400", "unknown client key", "");
        break;
    default:
        atomic_fetch_add(&z->refused, 1);
        zlog(z, 1, "zap: refused a CURVE client from %s: %s", addr, why);
        zap_reply(z->sock, &f[1], "400", "known keys unavailable", "");
        break;
    }
out:
    for (i = 0; i < n; i++)
        zmq_msg_close(&f[i]);
}

static void *zap_main(void *arg)
{
    mt_zap *z = arg;
    while (!atomic_load(&z->stop)) {
        zmq_pollitem_t it = {z->sock, 0, ZMQ_POLLIN, 0};
        int rc = zmq_poll(&it, 1, 50);
        if (rc < 0) {
            if (errno == ETERM)
                break;
            continue;
        }
        if (rc > 0 && (it.revents & ZMQ_POLLIN))
            zap_handle(z);
    }
    return NULL;
}

mt_zap *mt_zap_start(void *zmq_ctx, const char *known_dir, mt_zap_log_fn log, void *log_ctx,
                     char *err, size_t errlen)
{
    mt_zap *z;
    int zero = 0, e;
    if (!zmq_ctx || !known_dir) {
        fail(err, errlen, -EINVAL, "zap: no context or no known-keys directory");
        return NULL;
    }
    if (curve_available(err, errlen))
        return NULL;
    if (!(z = calloc(1, sizeof *z)) || !(z->dir = strdup(known_dir))) {
        free(z);
        fail(err, errlen, -ENOMEM, "zap: out of memory");
        return NULL;
    }
    z->log = log;
    z->log_ctx = log_ctx;
    atomic_init(&z->stop, 0);
    atomic_init(&z->admitted, 0);
    atomic_init(&z->refused, 0);
    if (!(z->sock = zmq_socket(zmq_ctx, ZMQ_REP)))
        goto zerr;
    zmq_setsockopt(z->sock, ZMQ_LINGER, &zero, sizeof zero);
    if (zmq_bind(z->sock, "inproc://zeromq.zap.01") != 0)
        goto zerr;
    if ((e = pthread_create(&z->thread, NULL, zap_main, z)) != 0) {
        errno = e;
        goto zerr;
    }
    return z;
zerr:
    e = errno;
    fail(err, errlen, -e, "zap: inproc://zeromq.zap.01: %s", zmq_strerror(e));
    if (z->sock)
        zmq_close(z->sock);
    free(z->dir);
    free(z);
    return NULL;
}

void mt_zap_stop(mt_zap **zp)
{
    mt_zap *z;
    if (!zp || !(z = *zp))
        return;
    atomic_store(&z->stop, 1);
    pthread_join(z->thread, NULL);
    zmq_close(z->sock);
    free(z->dir);
    free(z);
    *zp = NULL;
}

void mt_zap_counts(const mt_zap *z, unsigned long *admitted, unsigned long *refused)
{
    if (admitted)
        *admitted = z ? atomic_load(&((mt_zap *)z)->admitted) : 0;
    if (refused)
        *refused = z ? atomic_load(&((mt_zap *)z)->refused) : 0;
}
