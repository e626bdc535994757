# The benchmark's Kafka Streams peer (bench/streams/): bench/streams/selfcheck
# starts a 1-node Apache Kafka (scripts/kafka), produces 20,000 records with
# 10,000 distinct keys to a 4-partition topic, runs the Dedup application
# once through bench/streams/run under exactly_once_v2, and checks with
# Kafka's console consumer (read_committed) that the output is exactly the
# first record of each key, once.  About 50 s on 2 cores once the jar is
# built (the first run builds it with Maven into ~/.cache/bloomstage).
# Needs Java and Maven (scripts/install-deps).  A real-broker test
# (bs_real_broker_test, tests/CMakeLists.txt).
# It exercises no C code, so a sanitizer build does not run it again.
if(NOT BLOOMSTAGE_SANITIZE)
  add_test(NAME streams_selfcheck
    COMMAND bash ${PROJECT_SOURCE_DIR}/bench/streams/selfcheck)
  set_tests_properties(streams_selfcheck PROPERTIES TIMEOUT 600)
  bs_real_broker_test(streams_selfcheck b)
endif()
