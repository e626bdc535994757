# test_kafka_nemesis: the nemesis (harness/nemesis.c; bench/nemesis runs the
# same program for a soak) on a 3-node cluster of its own: 2.5 minutes of
# faults drawn from a seed that comes from the clock and is printed first,
# with the command that replays it; the oracle and the stall bound decide.
# The bound, 90 s: a request lost in a cut link is given up after
# librdkafka's socket.timeout.ms (60 s, which the stage keeps), then made
# again, and the stages catch up (bench/README.md: stalls of 51 - 58 s
# after a blackhole).
# Labels kafka (a bs_real_broker_test, tests/CMakeLists.txt) and nemesis.
if(TARGET bloomstage)
  add_executable(test_kafka_nemesis ${PROJECT_SOURCE_DIR}/harness/nemesis.c)
  target_link_libraries(test_kafka_nemesis PRIVATE bstestsupport
                        PkgConfig::RDKAFKA Threads::Threads m)
  add_test(NAME test_kafka_nemesis
    COMMAND test_kafka_nemesis --minutes 2.5 --bound 90
            --bloomstage $<TARGET_FILE:bloomstage>)
  set_tests_properties(test_kafka_nemesis PROPERTIES TIMEOUT 1200
                       LABELS nemesis)
  bs_real_broker_test(test_kafka_nemesis b)
endif()
