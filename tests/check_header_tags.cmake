# Checks that every public function's comment in the header ends with its
# tag (clbt.h's contents say how it reads): [HANDLE: THREADS] right before
# the comment's end, HANDLE a handle type, with ", created" or ", freed",
# or "no handle", and THREADS "any thread" or "its thread".
#   cmake -DHEADER=clbt.h -P check_header_tags.cmake
cmake_minimum_required(VERSION 3.16)
include("${CMAKE_CURRENT_LIST_DIR}/declared_functions.cmake")
clbt_declared_functions("${HEADER}")
file(READ "${HEADER}" text)
set(handle "(no handle|clbt_[a-z_]+(, (created|freed))?)")
set(threads "(any thread|its thread)")
set(untagged "")
foreach(name IN LISTS declared)
  # The comment's last bracket, what closes the comment, the declaration.
  if(NOT text MATCHES "\\[([^][\n]*)\\][ \t]*\n?[ \t]*\\*/\nCLBT_API[^;(]*[ *]${name}\\(")
    list(APPEND untagged "${name} (no tag)")
    continue()
  endif()
  set(tag "${CMAKE_MATCH_1}")
  string(REGEX MATCH "^clbt_[a-z_]+" type "${tag}")
  if(NOT tag MATCHES "^${handle}: ${threads}$")
    list(APPEND untagged "${name} ([${tag}] is no tag)")
  elseif(type AND NOT text MATCHES "typedef struct ${type} ${type};")
    list(APPEND untagged "${name} (${type} is no handle)")
  endif()
endforeach()
if(untagged)
  list(JOIN untagged ", " untagged)
  message(FATAL_ERROR "${HEADER}: functions without their tag: ${untagged}")
endif()
list(LENGTH declared count)
message(STATUS "${HEADER}: all ${count} public functions tagged")
