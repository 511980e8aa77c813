/*
 * sha256.h - SHA-256 (FIPS 180-4), used for contract fingerprints and config
 * ids.  Written from the standard; no external crypto dependency.
 */
#ifndef MT_SHA256_H
#define MT_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct mt_sha256 {
    uint32_t h[8];
    uint64_t len;
    uint8_t buf[64];
    size_t fill;
} mt_sha256;

void mt_sha256_init(mt_sha256 *s);
void mt_sha256_update(mt_sha256 *s, const void *data, size_t n);
void mt_sha256_final(mt_sha256 *s, uint8_t out[32]);
/* Hex digest of data into hex (65 bytes with NUL). */
void mt_sha256_hex(const void *data, size_t n, char hex[65]);

#endif
