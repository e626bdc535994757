# The engine's Kafka-facing modules that need a broker: each runs
# librdkafka's mock cluster in process (tests/stage/inproc_mock.c), with
# the harness's client helpers (harness/).
bs_add_cmocka_test(test_record_key
  SOURCES stage/test_record_key.c stage/inproc_mock.c
  LIBS bsengine bstestsupport TIMEOUT 120 LABELS stage)
bs_add_cmocka_test(test_replay
  SOURCES stage/test_replay.c stage/inproc_mock.c
  LIBS bsengine bstestsupport TIMEOUT 180 LABELS stage)
bs_add_cmocka_test(test_store
  SOURCES stage/test_store.c stage/inproc_mock.c
  LIBS bsengine bstestsupport TIMEOUT 300 LABELS stage)
# stage/kafka/fetch_wake.c: a small read-ahead kept fetching (librdkafka 2.0.2
# parks a full consumer's fetcher for a second).
bs_add_cmocka_test(test_fetch_wake
  SOURCES stage/test_fetch_wake.c stage/inproc_mock.c
  LIBS bsengine bstestsupport TIMEOUT 300 LABELS stage)
