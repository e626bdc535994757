# bsformats beside the key encoding: Confluent framing, normalization and
# domain lookups (each well under a second).
bs_add_cmocka_test(test_frame SOURCES unit/test_frame.c LIBS bsformats TIMEOUT 60 LABELS formats)
bs_add_cmocka_test(test_normalize SOURCES unit/test_normalize.c LIBS bsformats TIMEOUT 60 LABELS formats)
bs_add_cmocka_test(test_domain SOURCES unit/test_domain.c LIBS bsformats TIMEOUT 60 LABELS formats)
