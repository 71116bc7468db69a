# What `cmake --install BUILD [--prefix DIR]` installs, by component
# (`--component NAME` installs one):
#
#   Runtime      lib/libpsdb.so.<version> and its soname link
#   Development  include/psdb/*.h (the public headers and the generated
#                version.h; nothing of the source tree's internal headers),
#                lib/libpsdb.so, lib/libpsdb.a, and lib/cmake/psdb/
#                (psdbConfig.cmake, psdbConfigVersion.cmake, the exported
#                targets psdb::psdb and psdb::psdb_static)
#   Tools        bin/ps-server ps-scheduler ps-train ps-dump ps-bench
#   Python       the psdb package (python/CMakeLists.txt)
#
# lib/ is CMAKE_INSTALL_LIBDIR (GNUInstallDirs: lib under /usr/local,
# lib/x86_64-linux-gnu under /usr). Installed binaries keep the run paths
# of the libraries they link from outside the system's directories (the
# CUDA runtime, NCCL): CMAKE_INSTALL_RPATH_USE_LINK_PATH, set at the top.
#
# The tools and the Python extension link the modules' static libraries
# (as in the build tree), not libpsdb.so: they run without LD_LIBRARY_PATH
# wherever they are installed.
#
# psdbConfig.cmake finds every external dependency the two targets link
# (Abseil for the public headers; for psdb::psdb_static also RocksDB,
# gRPC, protobuf, OpenSSL, prometheus-cpp, xxhash and, when built with
# CUDA, the CUDA runtime). The lines are made from the link graph
# (psdb_add_library's PSDB_LIBRARY_DEPS) through the table below: a new
# dependency with no entry stops the configure, naming it.

# PSDB_FIND_DEPENDENCIES: the config file's find_dependency lines for `deps`.
function(psdb_find_dependency_lines deps out)
  set(packages "")
  set(pkgconfig "")
  foreach(dep ${deps})
    if(dep MATCHES "^PkgConfig::(.+)$")
      list(APPEND pkgconfig ${CMAKE_MATCH_1})
      continue()
    elseif(NOT dep MATCHES "::")
      continue()  # a plain library name or path: nothing to find
    endif()
    string(REGEX REPLACE "::.*$" "" namespace ${dep})
    if(namespace STREQUAL "absl")
      set(package "absl CONFIG")
    elseif(namespace STREQUAL "Threads")
      set(package "Threads")
    elseif(namespace STREQUAL "RocksDB")
      set(package "RocksDB CONFIG")
    elseif(namespace STREQUAL "protobuf")
      set(package "Protobuf")
    elseif(namespace STREQUAL "gRPC")
      set(package "gRPC CONFIG")
    elseif(namespace STREQUAL "OpenSSL")
      set(package "OpenSSL")
    elseif(namespace STREQUAL "prometheus-cpp")
      set(package "prometheus-cpp CONFIG")
    elseif(namespace STREQUAL "CUDA")
      set(package "CUDAToolkit")
    else()
      message(FATAL_ERROR "libpsdb links ${dep}: say how psdbConfig.cmake "
              "finds it (psdb_find_dependency_lines, cmake/psdb_install.cmake)")
    endif()
    list(APPEND packages "${package}")
  endforeach()
  list(REMOVE_DUPLICATES packages)
  set(lines "")
  foreach(package ${packages})
    string(APPEND lines "find_dependency(${package})\n")
  endforeach()
  if(pkgconfig)
    string(APPEND lines "find_dependency(PkgConfig)\n")
  endif()
  list(REMOVE_DUPLICATES pkgconfig)
  foreach(prefix ${pkgconfig})
    # pkg_check_modules records the module it found for a prefix.
    set(module "${${prefix}_MODULE_NAME}")
    if(NOT module)
      message(FATAL_ERROR "libpsdb links PkgConfig::${prefix}, whose module "
              "name pkg_check_modules did not record")
    endif()
    string(APPEND lines
      "if(NOT TARGET PkgConfig::${prefix})\n"
      "  pkg_check_modules(${prefix} QUIET IMPORTED_TARGET ${module})\n"
      "  if(NOT ${prefix}_FOUND)\n"
      "    set(psdb_FOUND FALSE)\n"
      "    set(psdb_NOT_FOUND_MESSAGE \"psdb needs the pkg-config module ${module}\")\n"
      "    return()\n"
      "  endif()\n"
      "endif()\n")
  endforeach()
  set(${out} "${lines}" PARENT_SCOPE)
endfunction()

function(psdb_install)
  set(config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/psdb)
  install(TARGETS psdb psdb_static EXPORT psdbTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Runtime
            NAMELINK_COMPONENT Development
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Development)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/psdb
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT Development
          FILES_MATCHING PATTERN "*.h")
  install(FILES ${PROJECT_BINARY_DIR}/include/psdb/version.h
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/psdb COMPONENT Development)
  install(EXPORT psdbTargets NAMESPACE psdb:: DESTINATION ${config_dir}
          COMPONENT Development)

  psdb_find_dependency_lines("${PSDB_LIBRARY_DEPS}" PSDB_FIND_DEPENDENCIES)
  include(CMakePackageConfigHelpers)
  configure_package_config_file(
    ${PROJECT_SOURCE_DIR}/cmake/psdbConfig.cmake.in
    ${PROJECT_BINARY_DIR}/cmake/psdbConfig.cmake
    INSTALL_DESTINATION ${config_dir})
  # Before 1.0 a minor version may break the API: 0.1.x consumers accept
  # 0.1.y, not 0.2.
  write_basic_package_version_file(
    ${PROJECT_BINARY_DIR}/cmake/psdbConfigVersion.cmake
    VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
  install(FILES ${PROJECT_BINARY_DIR}/cmake/psdbConfig.cmake
                ${PROJECT_BINARY_DIR}/cmake/psdbConfigVersion.cmake
          DESTINATION ${config_dir} COMPONENT Development)

  foreach(tool ps-server ps-scheduler ps-train ps-dump ps-bench)
    if(NOT TARGET ${tool})
      message(FATAL_ERROR "cmake/psdb_install.cmake installs ${tool}, which "
              "tools/CMakeLists.txt no longer defines")
    endif()
    install(TARGETS ${tool} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
            COMPONENT Tools)
  endforeach()
endfunction()
