# Checks that the header's word on each caller-filled struct's struct_size,
# "0 (the X layout)", names the layout src/base/config.c reads a
# struct_size of 0 as: that struct's first, as config.c lists its layouts.
#   cmake -DHEADER=clbt.h -DCONFIG=config.c -P check_struct_size_docs.cmake
cmake_minimum_required(VERSION 3.16)
file(READ "${HEADER}" header)
file(READ "${CONFIG}" config)
string(REGEX MATCHALL
       "CLBT__KIND\\((clbt_[a-z_]+), [a-z_]+\\),[ \n]*{{CLBT__END_OF\\([a-z_]+, [a-z_]+\\), \"[0-9.]+\""
       kinds "${config}")
set(wrong "")
set(count 0)
foreach(kind IN LISTS kinds)
  string(REGEX REPLACE "^CLBT__KIND\\((clbt_[a-z_]+),.*\"([0-9.]+)\"$" "\\1;\\2"
         parts "${kind}")
  list(GET parts 0 type)
  list(GET parts 1 first)
  string(REGEX MATCH "typedef struct ${type} {\n[^\n]*struct_size;[^\n]*"
         declared "${header}")
  if(NOT declared)
    list(APPEND wrong "${type}: no struct_size in the header")
  elseif(NOT declared MATCHES "0 \\(the ${first} layout\\)")
    string(REGEX REPLACE ".*/\\*\\*< *| *\\*/$" "" said "${declared}")
    list(APPEND wrong "${type}: the header says '${said}', but 0 is the ${first} layout")
  endif()
  math(EXPR count "${count} + 1")
endforeach()
if(count LESS 10)
  message(FATAL_ERROR "found ${count} structs in ${CONFIG}; its layout lists changed shape")
endif()
if(wrong)
  list(JOIN wrong "\n  " wrong)
  message(FATAL_ERROR "struct_size docs disagree with ${CONFIG}:\n  ${wrong}")
endif()
message(STATUS "the header names the first layout of all ${count} structs")
