/*
 * settings.h -- a configuration as `bloomstage run` and `config --check`
 * see it: the properties file, then the BLOOMSTAGE_* environment, then -X
 * settings, validated, and every kafka.*, consumer.* and producer.* key
 * tried on librdkafka (so a misspelt librdkafka property is a
 * configuration error naming where it was set, not a start-up failure).
 */
#ifndef BLOOMSTAGE_SETTINGS_H
#define BLOOMSTAGE_SETTINGS_H

#include <config.h>

/* NULL with errstr ("FILE:LINE: key 'x': ...") on any error.  file may be
 * NULL (environment and -X only).  The caller owns the result. */
bs_config *bs_settings_load(const char *file, char *const *xs, int nx,
                            char *errstr, size_t errstr_size);

/* The librdkafka part alone. */
int bs_settings_check_kafka(const bs_config *cfg, char *errstr,
                            size_t errstr_size);

#endif
