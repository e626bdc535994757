/*
 * blocklist_feed.h -- live blocklists' topics (blocklist_feed.c): checked and
 * read to their end before the input is subscribed, then followed between
 * records.
 */
#ifndef BLOOMSTAGE_BLOCKLIST_FEED_H
#define BLOOMSTAGE_BLOCKLIST_FEED_H

#include "core/stage_int.h"

typedef struct bs_list_feed bs_list_feed;
/* Live lists' topics checked (exist, compacted) and read to their end,
 * before the input is subscribed; the brokers refusing a topic's Read or
 * DescribeConfigs hold it as start-up holds refusals.  BS_FATAL with
 * errstr; BS_RETRY when a stop was requested while refused. */
bs_rc bs_lists_start(bs_stage *s, char *errstr, size_t errstr_size);
/* Updates that arrived since, applied in order (no record held). */
void bs_lists_follow(bs_stage *s);
void bs_lists_destroy(bs_stage *s);

#endif
