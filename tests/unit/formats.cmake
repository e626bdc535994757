# bsformats tests (formats/): the key encoding and the record decoders.
bs_add_cmocka_test(test_fm_key SOURCES unit/test_fm_key.c LIBS bsformats TIMEOUT 60 LABELS formats)
