# Checks that the API map names every public function: for each function
# the header declares with CLBT_API, docs/reference.md must hold "name()".
#   cmake -DHEADER=clbt.h -DREFERENCE=reference.md -P check_reference.cmake
cmake_minimum_required(VERSION 3.16)
include("${CMAKE_CURRENT_LIST_DIR}/declared_functions.cmake")
clbt_declared_functions("${HEADER}")
file(READ "${REFERENCE}" reference)
set(missing "")
foreach(name IN LISTS declared)
  string(FIND "${reference}" "${name}()" at)
  if(at EQUAL -1)
    list(APPEND missing "${name}")
  endif()
endforeach()
if(missing)
  message(FATAL_ERROR "${REFERENCE} does not name: ${missing}")
endif()
list(LENGTH declared count)
message(STATUS "${REFERENCE} names all ${count} public functions")
