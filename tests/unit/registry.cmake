# Schema Registry client tests (label registry): stage/registry/ against a
# real Apicurio Registry that scripts/registry starts twice (plain; HTTPS
# with basic auth; harness/registry.h) on free loopback ports, owned by the
# test's pid.  Needs
# Java and Maven (scripts/install-deps); the distribution is fetched once
# into ~/.cache/bloomstage (about 10 s, 109 MB).  Registered whether or not
# Java is installed: without it the test fails saying so.  20-30 s, most
# of it the two JVMs starting side by side.
bs_add_cmocka_test(test_registry
  SOURCES unit/test_registry.c
  LIBS bstestsupport TIMEOUT 180 LABELS registry)
