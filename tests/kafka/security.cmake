# security tests: the stage against a secured Apache Kafka (scripts/kafka
# start --secure: SASL_SSL with SCRAM-SHA-512 and PLAIN, SSL with client
# certificates, the StandardAuthorizer with no ACL allowing anything the
# test does not grant), on the support layer's secure.h.  Label security;
# real-broker tests (bs_real_broker_test, tests/CMakeLists.txt).  Need
# Java, Maven and openssl (scripts/install-deps).
if(TARGET bloomstage)
  # test_kafka_secure: exactly_once by transactions and the Kafka store as
  # the user stage with exactly the ACLs it needs, over SASL_SSL
  # (SCRAM-SHA-512) and over mTLS; refused credentials and each ACL left
  # out (side by side); a debug-level run searched for the password.
  bs_add_cmocka_test(test_kafka_secure SOURCES kafka/test_kafka_secure.c
                     LIBS bstestsupport TIMEOUT 900 LABELS security)
  bs_real_broker_test(test_kafka_secure b)
  set_tests_properties(test_kafka_secure PROPERTIES
    ENVIRONMENT "BLOOMSTAGE_BIN=$<TARGET_FILE:bloomstage>")
  # test_kafka_secure_features: the output-tail replay, two instances in
  # one group, live blocklists and `bloomstage blocklist` as the user stage
  # with exactly the ACLs docs/security.md lists for each, over SASL_SSL
  # and mTLS.
  bs_add_cmocka_test(test_kafka_secure_features
                     SOURCES kafka/test_kafka_secure_features.c
                     LIBS bstestsupport TIMEOUT 900 LABELS security)
  bs_real_broker_test(test_kafka_secure_features a)
  set_tests_properties(test_kafka_secure_features PROPERTIES
    ENVIRONMENT "BLOOMSTAGE_BIN=$<TARGET_FILE:bloomstage>")
endif()
