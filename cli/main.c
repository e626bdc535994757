/*
 * main.c -- the bloomstage binary: dispatches to one command per cmd_*.c.
 */
#include "commands.h"
#include "base/util.h"

#include <librdkafka/rdkafka.h>

#include <stdio.h>
#include <string.h>

typedef struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *synopsis;
} command;

static const command COMMANDS[] = {
    {"run", cmd_run,
     "run -c FILE [-X key=value]...   the stage: dedup + blocklists on Kafka"},
    {"demo", cmd_demo,
     "demo [--events N]               the stage on an embedded mock cluster"},
    {"filter", cmd_filter,
     "filter build|info|query|merge   blocklist filters from lists"},
    {"blocklist", cmd_blocklist,
     "blocklist add|remove|load NAME  change a live blocklist (its topic)"},
    {"dedup", cmd_dedup,
     "dedup [options] < in > out      drop repeated lines (awk '!seen[$0]++' "
     "in bounded memory)"},
    {"checkpoint", cmd_checkpoint,
     "checkpoint info DIR|-c FILE     what is stored, per partition"},
    {"mock-broker", cmd_mock_broker,
     "mock-broker [-b N] [-t T:P]...  librdkafka's mock cluster on loopback"},
    {"config", cmd_config,
     "config --list|--sample|--check  the configuration keys"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: bloomstage COMMAND [ARGS]...\n\n"
                 "A deduplicating and blocklisting stage for Kafka streams.\n\n"
                 "Commands:\n");
    for (size_t i = 0; i < sizeof(COMMANDS) / sizeof(COMMANDS[0]); i++)
        fprintf(out, "  %s\n", COMMANDS[i].synopsis);
    fprintf(out, "\n'bloomstage COMMAND --help' tells more.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return BS_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
        !strcmp(argv[1], "help")) {
        usage(stdout);
        return BS_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("bloomstage %s (librdkafka %s, malloc %s)\n",
               BLOOMSTAGE_VERSION, rd_kafka_version_str(), bs_allocator());
        return BS_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof(COMMANDS) / sizeof(COMMANDS[0]); i++)
        if (!strcmp(argv[1], COMMANDS[i].name))
            return COMMANDS[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "bloomstage: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return BS_EXIT_USAGE;
}
