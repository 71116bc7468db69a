# psdb_module(NAME
#             SOURCES ...          compiled once, position-independent
#             PUBLIC_HEADERS ...   headers under include/psdb/ it implements
#             HEADERS ...          headers of its folder other modules may include
#             DEPS ...             linked PUBLIC (its headers name their types)
#             PRIVATE_DEPS ...)    linked PRIVATE
#
# One module = one folder = one static library psdb_NAME (DESIGN.md, "The
# house"). Its users see include/ (the public API) and nothing else of it;
# the module itself and its tests see the source tree (internal headers by
# their path, e.g. "store/table.h") and the build tree (generated code).
# Which module may include which is the link graph: tools/check_tree.py
# reads the record psdb_write_module_graph() writes and fails on an
# include that has no link arrow under it, or that reaches into another
# module for a header that module does not list in HEADERS. The modules
# that implement a public header, and what they link, make libpsdb
# (cmake/psdb_library.cmake).
function(psdb_module name)
  cmake_parse_arguments(ARG "" ""
                        "SOURCES;PUBLIC_HEADERS;HEADERS;DEPS;PRIVATE_DEPS"
                        ${ARGN})
  set(target psdb_${name})
  add_library(${target} STATIC ${ARG_SOURCES})
  target_include_directories(${target}
    PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
           $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
           $<INSTALL_INTERFACE:include>
    PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  target_link_libraries(${target} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  file(RELATIVE_PATH folder ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  set_target_properties(${target} PROPERTIES
    PSDB_FOLDER "${folder}"
    PSDB_PUBLIC_HEADERS "${ARG_PUBLIC_HEADERS}"
    PSDB_HEADERS "${ARG_HEADERS}")
  set_property(GLOBAL APPEND PROPERTY PSDB_MODULES ${target})
endfunction()

# Writes <build>/psdb_modules.json: every module's folder, public headers,
# exported headers and the psdb modules it links (directly), read once
# every CMakeLists.txt has run.
function(psdb_write_module_graph)
  get_property(modules GLOBAL PROPERTY PSDB_MODULES)
  set(entries "")
  foreach(target ${modules})
    get_target_property(folder ${target} PSDB_FOLDER)
    get_target_property(public ${target} PSDB_PUBLIC_HEADERS)
    get_target_property(headers ${target} PSDB_HEADERS)
    get_target_property(links ${target} LINK_LIBRARIES)
    set(deps "")
    foreach(link ${links})
      if(link IN_LIST modules)
        list(APPEND deps "\"${link}\"")
      endif()
    endforeach()
    set(pub "")
    foreach(h ${public})
      list(APPEND pub "\"${h}\"")
    endforeach()
    set(hdr "")
    foreach(h ${headers})
      list(APPEND hdr "\"${h}\"")
    endforeach()
    list(JOIN deps ", " deps)
    list(JOIN pub ", " pub)
    list(JOIN hdr ", " hdr)
    list(APPEND entries
         "  \"${target}\": {\"folder\": \"${folder}\", \"deps\": [${deps}], \"public_headers\": [${pub}], \"headers\": [${hdr}]}")
  endforeach()
  list(JOIN entries ",\n" body)
  file(WRITE ${PROJECT_BINARY_DIR}/psdb_modules.json "{\n${body}\n}\n")
endfunction()

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
