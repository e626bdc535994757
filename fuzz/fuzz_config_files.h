/*
 * fuzz_config_files.h -- the files fuzz_config reads values from (`@file:`
 * values and BLOOMSTAGE_..._FILE variables): a fixed directory, so that
 * the dictionary (fuzz/make_seeds.c) and the seeds can name them.
 * fuzz_config writes them when it starts.  The secret file holds a token
 * no output of the configuration may ever show.
 */
#ifndef BS_FUZZ_CONFIG_FILES_H
#define BS_FUZZ_CONFIG_FILES_H

#define FUZZ_CONFIG_DIR "/tmp/bloomstage-fuzz-config"
#define FUZZ_CONFIG_SECRET FUZZ_CONFIG_DIR "/secret" /* the token, '\n' */
#define FUZZ_CONFIG_NUMBER FUZZ_CONFIG_DIR "/number" /* "0.001\n" */
#define FUZZ_CONFIG_TOKEN "fuzz-s3cret-7b1d"

#endif
