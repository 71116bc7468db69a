# psdb_test(NAME SOURCES... LIBS ...): one GoogleTest binary, each test case
# registered with CTest at test time (PRE_TEST keeps sanitizer binaries from
# running during the build).
include(GoogleTest)
function(psdb_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} psdb_test_util GTest::gtest
                                        GTest::gmock GTest::gtest_main)
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST
                       PROPERTIES ENVIRONMENT "PSDB_BINARY_DIR=${CMAKE_BINARY_DIR}")
endfunction()
