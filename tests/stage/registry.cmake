# Records in Confluent's wire format with their schemas in a real Schema
# Registry (scripts/registry through harness/registry.h).
# test_stage_registry: `bloomstage run` against `bloomstage mock-broker`:
# avro:/id and protobuf:/id dedup with a domain blocklist on the address,
# records that cannot be read rejected with their reasons, key.avro:/id,
# the registry away for 15 s at start-up.  About 60 s (the registry's JVM
# starts once).  Label registry.  test_kafka_registry: the same source on
# one Apache Kafka node, exactly_once, read_committed; label kafka.
if(TARGET bloomstage)
  bs_add_cmocka_test(test_stage_registry SOURCES stage/test_stage_registry.c
                     LIBS bstestsupport TIMEOUT 400 LABELS registry)
  set_tests_properties(test_stage_registry PROPERTIES
    ENVIRONMENT "BLOOMSTAGE_BIN=$<TARGET_FILE:bloomstage>")
  bs_add_cmocka_test(test_kafka_registry SOURCES stage/test_stage_registry.c
                     LIBS bstestsupport TIMEOUT 600)
  target_compile_definitions(test_kafka_registry PRIVATE BS_REAL_KAFKA=1)
  bs_real_broker_test(test_kafka_registry a)
  set_tests_properties(test_kafka_registry PROPERTIES
    ENVIRONMENT "BLOOMSTAGE_BIN=$<TARGET_FILE:bloomstage>")
endif()
