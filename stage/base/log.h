/*
 * log.h -- one line per event, logfmt, on stderr:
 *
 *   ts=2026-11-20T10:00:00.123Z level=info msg="checkpoint" partitions=3
 *
 * msg is quoted; the caller's key=value text follows as given (values with
 * spaces must be quoted by the caller: bs_log_quote helps).  Any byte of
 * the line that is not UTF-8, and any control character, is written as
 * \xNN (bs_config_escape): a topic named in the configuration with such
 * bytes is echoed escaped, never raw.  librdkafka's
 * own logs are routed here too (stage.c), so the stream has one format.
 * Thread-safe: each line is one write.
 */
#ifndef BLOOMSTAGE_LOG_H
#define BLOOMSTAGE_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum bs_log_level {
    BS_LOG_ERROR = 0,
    BS_LOG_WARN = 1,
    BS_LOG_INFO = 2,
    BS_LOG_DEBUG = 3,
} bs_log_level;

void bs_log_set_level(bs_log_level level);

/* fmt (printf) yields the key=value part; may be NULL. */
void bs_log(bs_log_level level, const char *msg, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A live status line on stderr when it is a terminal (no-op otherwise):
 * redrawn in place; log lines clear it first, the next call redraws it.
 * NULL clears it for good. */
void bs_log_status(const char *line);
bool bs_log_is_tty(void);

/* A librdkafka log callback (rd_kafka_conf_set_log_cb) that writes
 * through bs_log: syslog levels mapped to ours, the client named. */
struct rd_kafka_s;
void bs_log_rdkafka(const struct rd_kafka_s *rk, int level, const char *fac,
                    const char *buf);

/* s as a logfmt value: quoted and escaped when it needs to be.  Returns buf. */
const char *bs_log_quote(const char *s, char *buf, size_t size);

/* A failed checkpoint step, one line shape everywhere: of partition
 * `partition` of `topic`, or of the round as a whole (topic NULL). */
void bs_log_ckpt_failed(const char *topic, int32_t partition,
                        const char *err);

#endif
