/*
 * registry.h -- a real Schema Registry for tests and benchmarks
 * (scripts/registry: Apicurio Registry on loopback, serving the Confluent
 * API), and records in the wire format its serializers write.
 *
 *   h_registry_spawn/_wait  start one in a directory, owned by this
 *                           process (a killed test leaves no JVM); several
 *                           may start side by side, each waited for
 *   h_registry_stop         stop it; -1 if its JVM outlives the stop
 *   h_registry_post         register a schema under a subject, as a
 *                           producer's serializer does; its id
 *   h_frame, h_avro_*, h_pb_*  the 5-byte Confluent prefix and the few
 *                           Avro and Protobuf encodings test records need
 *                           (each checked against a real encoder by the
 *                           tests that use them)
 *
 * Conventions: core.h (0 / -1 with h_last_error()).
 */
#ifndef BS_SUPPORT_REGISTRY_H
#define BS_SUPPORT_REGISTRY_H

#include "core.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct h_registry {
    char dir[300];  /* its directory (settings, log, pid, url) */
    char url[512];  /* the Confluent API's base URL */
    char ca[320];   /* --tls: the CA that signed its certificate */
    const char *user_info; /* --basic-auth: USER:PASS; NULL: none */
    pid_t starter;  /* scripts/registry start, until waited for */
} h_registry;

/* Starts `scripts/registry start --dir DIR --owner <this pid> EXTRA...`
 * (extra NULL-terminated, may be NULL; user_info is what --basic-auth
 * got, for h_registry_post).  The script's output goes to DIR.out and
 * DIR.err. */
int h_registry_spawn(h_registry *r, const char *dir, char *const extra[],
                     const char *user_info) H_WARN_UNUSED;
/* Waits for the start; -1 with the script's stderr's last line. */
int h_registry_wait(h_registry *r) H_WARN_UNUSED;
/* Both. */
int h_registry_start(h_registry *r, const char *dir, char *const extra[],
                     const char *user_info) H_WARN_UNUSED;
/* Stops it; -1 if its JVM still runs after. */
int h_registry_stop(h_registry *r);

/* POST {url}/subjects/SUBJECT/versions with the schema's text, its type
 * ("AVRO", "PROTOBUF", "JSON") and references (a JSON array's text, NULL:
 * none).  The id, or -1. */
int32_t h_registry_post(const h_registry *r, const char *subject,
                        const char *type, const char *text,
                        const char *refs_json) H_WARN_UNUSED;

/* Encoders: each writes at out (room for the worst case: 5 bytes of
 * prefix, 10 of a varint, the varint and the bytes of a string) and
 * returns the bytes written. */
size_t h_frame(uint8_t *out, int32_t schema_id);
size_t h_avro_long(uint8_t *out, int64_t v);     /* zigzag varint */
size_t h_avro_string(uint8_t *out, const char *s); /* length, bytes */
size_t h_pb_varint(uint8_t *out, uint64_t v);
/* Field `field` as a length-delimited value (string, bytes, message). */
size_t h_pb_bytes(uint8_t *out, uint32_t field, const void *b, size_t n);

#endif
