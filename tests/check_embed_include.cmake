# Checks that cmake/embed_source.cmake finds an include in an include
# directory, as a C compiler given -I does, and marks its text with its own
# path: embeds tests/device/embedded/uses_include.cl with
# tests/device/embedded_include as the include directory, and looks for
# the header's marker and text in the generated array.
#   cmake -DSOURCE_DIR=<the project's root> -DOUTPUT=<scratch .c>
#         -P check_embed_include.cmake
cmake_minimum_required(VERSION 3.16)
set(tests "${SOURCE_DIR}/tests/device")
execute_process(
  COMMAND "${CMAKE_COMMAND}" "-DROOT=${tests}/embedded/uses_include.cl"
          "-DTOP=${SOURCE_DIR}" "-DOUTPUT=${OUTPUT}" -DSYMBOL=embedded
          "-DINCLUDE_DIRS=${tests}/embedded_include"
          -P "${SOURCE_DIR}/cmake/embed_source.cmake"
  RESULT_VARIABLE status ERROR_VARIABLE error)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "embedding failed: ${error}")
endif()
file(READ "${OUTPUT}" generated)
string(REGEX REPLACE "[ \n]" "" generated "${generated}")
foreach(expected
    "#line 1 \"tests/device/embedded_include/kernel/shared.h\"\n"
    "#define SHARED_VALUE 3\n"
    "#line 5 \"tests/device/embedded/uses_include.cl\"\n")
  string(HEX "${expected}" hex)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(FIND "${generated}" "${bytes}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the embedded program lacks: ${expected}")
  endif()
endforeach()
message(STATUS "an include directory's header is embedded with its path")
