# Checks that a shared library exports exactly the functions the public
# header declares with CLBT_API: nothing internal leaks, nothing is missing.
#   cmake -DLIBRARY=libclbt.so -DHEADER=clbt.h -DNM=nm -P check_exports.cmake
cmake_minimum_required(VERSION 3.16)
include("${CMAKE_CURRENT_LIST_DIR}/declared_functions.cmake")
clbt_declared_functions("${HEADER}")

execute_process(COMMAND "${NM}" -D --defined-only "${LIBRARY}"
                OUTPUT_VARIABLE symbols RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${NM} -D --defined-only ${LIBRARY} failed: ${result}")
endif()
string(REGEX MATCHALL "[^ \n]+\n" lines "${symbols}")
set(exported "")
# The linker's own markers, which every shared library defines, and the
# bounds of the sections that coverage instrumentation adds to a fuzzing
# build's objects (-fsanitize=fuzzer-no-link): __start___sancov_cntrs...
set(linker_symbols _init _fini _edata _end __bss_start)
foreach(line IN LISTS lines)
  string(STRIP "${line}" name)
  if(NOT name IN_LIST linker_symbols AND
     NOT name MATCHES "^__(start|stop)___sancov_")
    list(APPEND exported "${name}")
  endif()
endforeach()

list(SORT exported)
list(LENGTH declared declared_count)
set(missing ${declared})
list(REMOVE_ITEM missing ${exported})
set(extra ${exported})
list(REMOVE_ITEM extra ${declared})
if(missing OR extra)
  list(JOIN missing ", " missing)
  list(JOIN extra ", " extra)
  message(FATAL_ERROR "exports of ${LIBRARY} differ from ${HEADER}:\n"
                      "  declared, not exported: ${missing}\n"
                      "  exported, not declared: ${extra}")
endif()
message(STATUS "${declared_count} functions exported, as declared")
