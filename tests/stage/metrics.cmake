# test_metrics: the stage's /metrics, /healthz and /ready endpoints and its
# logfmt logs during a real `bloomstage run` against `bloomstage
# mock-broker`: readiness before and after the group join and while
# checkpoints fail, counters against what the topics hold, the Prometheus
# text format on every scrape, the port closed after SIGTERM, msg=stats;
# HTTPS and basic auth (through the curl command), and the bad TLS and
# users files refused at start-up.
# docs/operations.md's table of metrics is read at run time: every family it names
# must be served, with its type.
bs_add_cmocka_test(test_metrics SOURCES stage/test_metrics.c
                   LIBS bstestsupport TIMEOUT 300 LABELS integration)
set_tests_properties(test_metrics PROPERTIES
  ENVIRONMENT "BLOOMSTAGE_BIN=$<TARGET_FILE:bloomstage>")
target_compile_definitions(test_metrics PRIVATE
  BS_OPERATIONS_MD="${PROJECT_SOURCE_DIR}/docs/operations.md")
