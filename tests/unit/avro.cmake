# bsformats' record decoders beside the key encoding: Confluent framing,
# Avro keys (payloads written by avro-c itself), normalization and domain
# lookups (each well under a second).
bs_add_cmocka_test(test_frame SOURCES unit/test_frame.c LIBS bsformats TIMEOUT 60 LABELS formats)
bs_add_cmocka_test(test_avro SOURCES unit/test_avro.c LIBS bsformats TIMEOUT 120 LABELS formats)
bs_add_cmocka_test(test_normalize SOURCES unit/test_normalize.c LIBS bsformats TIMEOUT 60 LABELS formats)
bs_add_cmocka_test(test_domain SOURCES unit/test_domain.c LIBS bsformats TIMEOUT 60 LABELS formats)
