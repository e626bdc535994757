/*
 * settings.c -- see settings.h.
 */
#include "settings.h"

#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <string.h>

extern char **environ;

typedef struct try_ctx {
    const bs_config *cfg;
    rd_kafka_conf_t *conf;
    const char *prefix;
    char *errstr;
    size_t errstr_size;
} try_ctx;

static int try_key(const char *key, const char *value, void *opaque)
{
    try_ctx *t = opaque;
    char why[512], full[600];
    if (rd_kafka_conf_set(t->conf, key, value, why, sizeof(why)) ==
        RD_KAFKA_CONF_OK)
        return 0;
    snprintf(full, sizeof(full), "%s%s", t->prefix, key);
    const char *origin = bs_config_origin(t->cfg, full);
    snprintf(t->errstr, t->errstr_size, "%s: key '%s': librdkafka: %s",
             origin ? origin : "?", full, why);
    return -1;
}

int bs_settings_check_kafka(const bs_config *cfg, char *errstr,
                            size_t errstr_size)
{
    static const char *const prefixes[] = {"kafka.", "consumer.",
                                           "producer."};
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
        try_ctx t = {cfg, rd_kafka_conf_new(), prefixes[i], errstr,
                     errstr_size};
        int rc = bs_config_foreach(cfg, prefixes[i], try_key, &t);
        rd_kafka_conf_destroy(t.conf);
        if (rc)
            return -1;
    }
    return 0;
}

bs_config *bs_settings_load(const char *file, char *const *xs, int nx,
                            char *errstr, size_t errstr_size)
{
    bs_config *cfg = bs_config_new();
    if (!cfg) {
        snprintf(errstr, errstr_size, "out of memory");
        return NULL;
    }
    if ((file && bs_config_load_file(cfg, file, errstr, errstr_size)) ||
        bs_config_load_env(cfg, environ, errstr, errstr_size))
        goto fail;
    for (int i = 0; i < nx; i++)
        if (bs_config_set_arg(cfg, xs[i], errstr, errstr_size))
            goto fail;
    if (bs_config_validate(cfg, errstr, errstr_size) ||
        bs_settings_check_kafka(cfg, errstr, errstr_size))
        goto fail;
    return cfg;
fail:
    bs_config_destroy(cfg);
    return NULL;
}
