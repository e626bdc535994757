# bsformats' Protobuf reader.  test_proto_schema: the .proto parser on
# realistic schemas and every error (~0.2 s).  test_protobuf: the wire
# reader on bytes the real protoc encodes (protobuf-compiler, a test-only
# tool), which the test runs itself so each case's text format sits beside
# its assertions (~2 s; more under the sanitizers).
find_program(BS_PROTOC protoc REQUIRED)
bs_add_cmocka_test(test_proto_schema SOURCES unit/test_proto_schema.c LIBS bsformats TIMEOUT 60 LABELS formats)
bs_add_cmocka_test(test_protobuf SOURCES unit/test_protobuf.c LIBS bsformats TIMEOUT 300 LABELS formats)
target_compile_definitions(test_protobuf PRIVATE BS_PROTOC="${BS_PROTOC}")
