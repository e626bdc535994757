# Unit tests of the stage's own modules (no broker needed).
bs_add_cmocka_test(test_checkpoint
  SOURCES test_checkpoint.c
  LIBS bsengine TIMEOUT 120 LABELS stage)

# The engine's Kafka-facing modules; the ones that need a broker run
# librdkafka's mock cluster in process (inproc_mock.c), with the
# integration harness's client helpers.
bs_add_cmocka_test(test_record_key
  SOURCES test_record_key.c inproc_mock.c harness.c
  LIBS bsengine TIMEOUT 120 LABELS stage)
bs_add_cmocka_test(test_replay
  SOURCES test_replay.c inproc_mock.c harness.c
  LIBS bsengine TIMEOUT 180 LABELS stage)
bs_add_cmocka_test(test_store
  SOURCES test_store.c inproc_mock.c harness.c
  LIBS bsengine TIMEOUT 300 LABELS stage)
