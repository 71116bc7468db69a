# The library a C++ user links (find_package(psdb), cmake/psdb_install.cmake):
#
#   psdb          libpsdb.so, exported as psdb::psdb
#   psdb_static   libpsdb.a, exported as psdb::psdb_static
#
# Both are made of the objects the modules' static libraries already hold
# ($<TARGET_OBJECTS:...>, compiled once, position-independent because
# CMAKE_POSITION_INDEPENDENT_CODE is ON): nothing is compiled a second time.
#
# What goes in: the modules that implement a header of include/psdb/ (their
# PUBLIC_HEADERS: optim, api, store, checkpoint, rpc/wire, rpc/client,
# cache) and every library of this project they link, directly or not
# (util, manifest, shard, rpc/control with its etcd stubs, cache's CUDA
# backend and kernels when nvcc is found). What stays out: rpc/server,
# train and collective. No public header names anything of theirs (a
# ps-server is a process, not an object a user holds), and they would add
# gloo, NCCL, Eigen, zlib and zstd to every consumer's link for nothing;
# the tools link them from the build tree. A module that starts to
# implement a public header, or that a member starts to link, joins by
# itself: the list is computed from the link graph, not written here.
#
# Link interface. Abseil is the public headers' one dependency, so every
# absl:: target a member links is PUBLIC on both. Everything else a member
# links (RocksDB, gRPC, protobuf, OpenSSL, prometheus-cpp, xxhash, the
# CUDA runtime) is PRIVATE: inside libpsdb.so for the shared form, a
# link-only dependency of the consumer for the static one. RocksDB is
# always RocksDB::rocksdb-shared here: Debian's librocksdb.a is not
# position-independent (cmake/psdb_deps.cmake), so with it neither form
# could go into a consumer's shared object.
#
# Sanitizers: the objects of a PSDB_SANITIZE build call the ASan/UBSan
# runtimes, so both targets carry -fsanitize in their link interface and a
# consumer's program links the runtimes (its own code need not be
# instrumented).
function(psdb_add_library)
  get_property(modules GLOBAL PROPERTY PSDB_MODULES)
  set(todo "")
  foreach(module ${modules})
    get_target_property(public ${module} PSDB_PUBLIC_HEADERS)
    if(public)
      list(APPEND todo ${module})
    endif()
  endforeach()

  # The members: the closure of the roots over LINK_LIBRARIES (public and
  # private links alike), keeping this project's libraries; the rest are
  # external dependencies.
  set(members "")
  set(external "")
  while(todo)
    list(POP_FRONT todo target)
    if(target IN_LIST members)
      continue()
    endif()
    list(APPEND members ${target})
    get_target_property(links ${target} LINK_LIBRARIES)
    foreach(link ${links})
      if(link MATCHES "^::@")
        # CMake's marker around links added from another directory.
        continue()
      elseif(link STREQUAL PSDB_ROCKSDB)
        list(APPEND external RocksDB::rocksdb-shared)
      elseif(link MATCHES "^RocksDB::")
        message(FATAL_ERROR "${target} links ${link}: use \${PSDB_ROCKSDB} "
                "(cmake/psdb_deps.cmake) so libpsdb.so can link librocksdb.so")
      elseif(TARGET ${link})
        get_target_property(imported ${link} IMPORTED)
        if(imported)
          list(APPEND external ${link})
        else()
          list(APPEND todo ${link})
        endif()
      else()
        list(APPEND external ${link})
      endif()
    endforeach()
  endwhile()
  list(REMOVE_DUPLICATES external)
  set(public_deps "")
  set(private_deps "")
  foreach(dep ${external})
    if(dep MATCHES "^absl::")
      list(APPEND public_deps ${dep})
    else()
      list(APPEND private_deps ${dep})
    endif()
  endforeach()
  list(SORT members)
  set(objects "")
  foreach(member ${members})
    list(APPEND objects $<TARGET_OBJECTS:${member}>)
  endforeach()

  add_library(psdb SHARED ${objects})
  add_library(psdb_static STATIC ${objects})
  # The shared library: libpsdb.so.<version>, soname libpsdb.so.<major>.<minor>
  # (before 1.0 every minor version may change the ABI), every symbol
  # visible (the objects are the modules' own, built without a visibility
  # map; the public headers are what is supported).
  set_target_properties(psdb PROPERTIES
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" OR NOT PSDB_SANITIZE)
    # Every symbol the members use must come from a library libpsdb.so
    # links: a dependency missing from the list above fails here, not in a
    # consumer's link. (clang leaves the sanitizer runtimes out of shared
    # objects, so a sanitized clang build cannot check this.)
    target_link_options(psdb PRIVATE LINKER:--no-undefined)
  endif()
  set_target_properties(psdb_static PROPERTIES OUTPUT_NAME psdb)
  foreach(target psdb psdb_static)
    # External objects alone give CMake no language to link with.
    set_target_properties(${target} PROPERTIES
      LINKER_LANGUAGE CXX
      EXPORT_NAME ${target})
    target_include_directories(${target} PUBLIC
      $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
      $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
      $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
    target_compile_features(${target} PUBLIC cxx_std_20)
    target_link_libraries(${target} PUBLIC ${public_deps}
                                    PRIVATE ${private_deps})
    if(PSDB_SANITIZE)
      target_link_options(${target} INTERFACE -fsanitize=address,undefined)
    endif()
    add_library(psdb::${target} ALIAS ${target})
  endforeach()
  # The external dependencies, for psdbConfig.cmake's find_dependency lines.
  set(PSDB_LIBRARY_DEPS ${external} PARENT_SCOPE)
  list(JOIN members " " shown)
  message(STATUS "psdb: libpsdb holds ${shown}")
endfunction()
