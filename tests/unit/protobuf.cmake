# bsformats' Protobuf reader.  test_proto_schema: the .proto parser on
# realistic schemas and every error (~0.2 s).
bs_add_cmocka_test(test_proto_schema SOURCES unit/test_proto_schema.c LIBS bsformats TIMEOUT 60 LABELS formats)
