# Checks that a file names every public function the header declares with
# CLBT_API: docs/reference.md as "name()", or a test's table of cases as
# "\"name\"" (NAMED_AS=string), optionally only the functions that return
# RETURNS.
#   cmake -DHEADER=clbt.h -DREFERENCE=file[,file...] [-DNAMED_AS=call|string]
#         [-DRETURNS=type] -P check_reference.cmake
cmake_minimum_required(VERSION 3.16)
include("${CMAKE_CURRENT_LIST_DIR}/declared_functions.cmake")
if(RETURNS)
  clbt_declared_functions("${HEADER}" "${RETURNS}")
else()
  clbt_declared_functions("${HEADER}")
endif()
# REFERENCE may name several files, comma-separated: a name in any of them
# counts.
string(REPLACE "," ";" references "${REFERENCE}")
set(reference "")
foreach(file IN LISTS references)
  file(READ "${file}" text)
  string(APPEND reference "${text}")
endforeach()
set(missing "")
foreach(name IN LISTS declared)
  if(NAMED_AS STREQUAL "string")
    set(named "\"${name}\"")
  else()
    set(named "${name}()")
  endif()
  string(FIND "${reference}" "${named}" at)
  if(at EQUAL -1)
    list(APPEND missing "${name}")
  endif()
endforeach()
if(missing)
  list(JOIN missing ", " missing)
  message(FATAL_ERROR "${REFERENCE} does not name: ${missing}")
endif()
list(LENGTH declared count)
message(STATUS "${REFERENCE} names all ${count} public functions")
