# kafka/ tests: a real Apache Kafka broker (scripts/kafka: KRaft nodes from
# Maven Central's jars on free loopback ports), driven by Kafka's own tools.
# kafka_script checks the script (1 node; 3 nodes with one stopped and
# restarted); kafka_stage_e2e runs `bloomstage run` against a 1-node broker
# and checks out, rej and the committed offsets record by record.  Both need
# Java and Maven (scripts/install-deps); the jars are fetched once into
# ~/.cache/bloomstage.  Each is a bs_real_broker_test (tests/CMakeLists.txt:
# label kafka, in one of two lanes, started first).  kafka_script exercises no C
# code, so a sanitizer build does not run it again.
# Owned by the real-broker work.
# Registered whether or not Java is installed: without it they fail saying
# so, rather than vanish.
if(NOT BLOOMSTAGE_SANITIZE)
  add_test(NAME kafka_script
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/kafka/test_kafka_script.sh
            ${PROJECT_SOURCE_DIR}/scripts/kafka)
  set_tests_properties(kafka_script PROPERTIES TIMEOUT 600)
  bs_real_broker_test(kafka_script a)
endif()
if(TARGET bloomstage)
  add_test(NAME kafka_stage_e2e
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/kafka/test_stage_kafka.sh
            $<TARGET_FILE:bloomstage> ${PROJECT_SOURCE_DIR}/scripts/kafka)
  set_tests_properties(kafka_stage_e2e PROPERTIES TIMEOUT 600)
  bs_real_broker_test(kafka_stage_e2e a)
  # kafka_compose_e2e: docker-compose.yml's own topics, environment and
  # demo producer, without Docker, against a 1-node broker.
  add_test(NAME kafka_compose_e2e
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/kafka/test_compose_kafka.sh
            $<TARGET_FILE:bloomstage> ${PROJECT_SOURCE_DIR}/scripts/kafka)
  set_tests_properties(kafka_compose_e2e PROPERTIES TIMEOUT 600)
  bs_real_broker_test(kafka_compose_e2e b)
else()
  message(WARNING "tests/kafka.cmake: no bloomstage target; the stage is "
                  "not tested against a real Kafka broker")
endif()

# C tests against the real broker, on the support layer (harness/,
# realkafka.h: a cluster started through scripts/kafka with the test as
# its --owner, topics by the Admin API, output read at read_committed).
# test_kafka_guarantees: one 1-node cluster for its tests (graceful stop
# and restart, kill -9 at seven moments, the output topic missing, the
# broker stopped and started mid-stream with /ready, static membership,
# and the harness's feeder recovering from its producer's fatal error).
if(TARGET bloomstage)
  bs_add_cmocka_test(test_kafka_guarantees SOURCES kafka/test_kafka_guarantees.c
                     LIBS bstestsupport TIMEOUT 600)
  bs_real_broker_test(test_kafka_guarantees b)
  set_tests_properties(test_kafka_guarantees PROPERTIES
    ENVIRONMENT "BLOOMSTAGE_BIN=$<TARGET_FILE:bloomstage>")
  # test_kafka_cluster: one 3-node cluster (replication 3, min ISR 2) for
  # two instances with the Kafka store (one killed -9), scale-out 1 -> 3 ->
  # 1, and one broker killed -9 and restarted mid-stream.
  bs_add_cmocka_test(test_kafka_cluster SOURCES kafka/test_kafka_cluster.c
                     LIBS bstestsupport TIMEOUT 900)
  bs_real_broker_test(test_kafka_cluster a)
  set_tests_properties(test_kafka_cluster PROPERTIES
    ENVIRONMENT "BLOOMSTAGE_BIN=$<TARGET_FILE:bloomstage>")
  # test_kafka_txn: exactly_once by transactions on a 1-node cluster: a
  # crash at every named crash point (BLOOMSTAGE_CRASH_AT) and kill -9,
  # the zombie twice (SIGSTOP past the session, SIGCONT: fenced), a
  # transaction that times out, the broker restarted mid-transaction, the
  # link cut (a proxy) while the Kafka store's records are in the
  # transaction, and in the first transaction (the partitions' first
  # checkpoints in it).  test_kafka_txn_rebalance runs the same program's
  # rebalance cases (test_rebalance_*: a restore deferred beside partitions
  # with output in the open transaction, partitions given to an instance
  # while it drains) and test_request_lost_in_cut (an AddPartitionsToTxn
  # lost in a cut) in the other lane -- "test_re*" names those three --
  # each entry on its own broker: the whole program takes 11-14 minutes
  # under load, near one entry's bound.
  bs_add_cmocka_test(test_kafka_txn SOURCES kafka/test_kafka_txn.c
                     LIBS bstestsupport TIMEOUT 900)
  bs_real_broker_test(test_kafka_txn a)
  set_tests_properties(test_kafka_txn PROPERTIES
    ENVIRONMENT "BLOOMSTAGE_BIN=$<TARGET_FILE:bloomstage>;BS_TEST_SKIP=test_re*")
  add_test(NAME test_kafka_txn_rebalance COMMAND test_kafka_txn)
  set_tests_properties(test_kafka_txn_rebalance PROPERTIES TIMEOUT 900
    ENVIRONMENT "BLOOMSTAGE_BIN=$<TARGET_FILE:bloomstage>;BS_KT_ONLY=test_re*")
  bs_real_broker_test(test_kafka_txn_rebalance b)
  # test_kafka_window: dedup.window.ms on a 1-node cluster: kill -9 at four
  # moments under exactly_once, a rebalance and a kill on the Kafka store,
  # late records rejected; the read_committed output against the window's
  # model record by record.
  bs_add_cmocka_test(test_kafka_window SOURCES kafka/test_kafka_window.c
                     LIBS bstestsupport TIMEOUT 900)
  bs_real_broker_test(test_kafka_window b)
  set_tests_properties(test_kafka_window PROPERTIES
    ENVIRONMENT "BLOOMSTAGE_BIN=$<TARGET_FILE:bloomstage>")
  # test_kafka_poison: 20,000 records with a 999,970-byte record and three
  # 1.5 MB poison records mixed in, exactly_once by transactions on a
  # 1-node cluster: the producer sized to the topics' max.message.bytes
  # (the first forwarded), the poison ones rejected once without their
  # value, or forwarded to an output topic raised to 4 MB; no stall, every
  # other record once at read_committed.  About a minute.
  bs_add_cmocka_test(test_kafka_poison SOURCES kafka/test_kafka_poison.c
                     LIBS bstestsupport TIMEOUT 300)
  bs_real_broker_test(test_kafka_poison a)
  set_tests_properties(test_kafka_poison PROPERTIES
    ENVIRONMENT "BLOOMSTAGE_BIN=$<TARGET_FILE:bloomstage>")
endif()
