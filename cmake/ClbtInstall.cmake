# `cmake --install`: the headers (clbt.h and the kernels' page table,
# clbt_kv_pages.h), libclbt.so (with its soname) and libclbt.a,
# a CMake package exporting clbt::clbt (shared) and clbt::clbt_static,
# clbt.pc, the Python package, and the license and changelog (under
# share/doc/clbt). Every installed file locates the others
# relative to itself, so `cmake --install build --prefix DIR` works for any DIR.
include(CMakePackageConfigHelpers)

set(clbt_cmake_dir "${CMAKE_INSTALL_LIBDIR}/cmake/clbt")

install(TARGETS clbt_static clbt_shared EXPORT clbtTargets
  ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
  LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}"
  RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}")
install(FILES include/clbt/clbt.h include/clbt/clbt_kv_pages.h
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/clbt")
# clbt is Apache-2.0 (LICENSE); the CMake package and clbt.pc say so too.
set(clbt_license "Apache-2.0")
install(FILES LICENSE CHANGELOG.md DESTINATION "${CMAKE_INSTALL_DOCDIR}")

install(EXPORT clbtTargets NAMESPACE clbt:: DESTINATION "${clbt_cmake_dir}")
configure_package_config_file(cmake/clbtConfig.cmake.in
  "${CMAKE_CURRENT_BINARY_DIR}/clbtConfig.cmake"
  INSTALL_DESTINATION "${clbt_cmake_dir}")
# A release only adds within its major version (docs/design.md): it
# satisfies a request for itself or any earlier release of that major.
write_basic_package_version_file(
  "${CMAKE_CURRENT_BINARY_DIR}/clbtConfigVersion.cmake"
  COMPATIBILITY SameMajorVersion)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/clbtConfig.cmake"
              "${CMAKE_CURRENT_BINARY_DIR}/clbtConfigVersion.cmake"
        DESTINATION "${clbt_cmake_dir}")

# clbt.pc finds the prefix from its own location (${pcfiledir}), which
# needs the directories relative to the prefix.
foreach(dir CMAKE_INSTALL_LIBDIR CMAKE_INSTALL_INCLUDEDIR)
  if(IS_ABSOLUTE "${${dir}}")
    message(FATAL_ERROR "${dir} is '${${dir}}'; clbt installs with it "
                        "relative to CMAKE_INSTALL_PREFIX")
  endif()
endforeach()
set(clbt_pc_dir "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
file(RELATIVE_PATH clbt_pc_to_prefix "/prefix/${clbt_pc_dir}" "/prefix")
string(REGEX REPLACE "/$" "" clbt_pc_to_prefix "${clbt_pc_to_prefix}")
configure_file(cmake/clbt.pc.in "${CMAKE_CURRENT_BINARY_DIR}/clbt.pc" @ONLY)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/clbt.pc"
        DESTINATION "${clbt_pc_dir}")

# The Python package goes where the interpreter looks for a prefix's
# packages (Debian: lib/python3.X/dist-packages, under /usr/local as under
# /usr), with _installed.py naming the library relative to the package.
if(Python3_FOUND)
  set(clbt_python_dir
      "lib/python${Python3_VERSION_MAJOR}.${Python3_VERSION_MINOR}/dist-packages")
else()
  set(clbt_python_dir "lib/python3/dist-packages")
endif()
set(CLBT_PYTHON_INSTALL_DIR "${clbt_python_dir}" CACHE STRING
    "Where the Python package clbt installs, relative to the prefix")
file(RELATIVE_PATH clbt_python_to_library
     "/prefix/${CLBT_PYTHON_INSTALL_DIR}/clbt"
     "/prefix/${CMAKE_INSTALL_LIBDIR}/libclbt.so.${clbt_soversion}")
file(WRITE "${CMAKE_CURRENT_BINARY_DIR}/python/_installed.py"
     "# Written by cmake --install: libclbt.so relative to this package.\n"
     "LIBRARY = \"${clbt_python_to_library}\"\n")
install(DIRECTORY python/clbt DESTINATION "${CLBT_PYTHON_INSTALL_DIR}"
        FILES_MATCHING PATTERN "*.py" PATTERN "py.typed"
        PATTERN "__pycache__" EXCLUDE)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/python/_installed.py"
        DESTINATION "${CLBT_PYTHON_INSTALL_DIR}/clbt")
