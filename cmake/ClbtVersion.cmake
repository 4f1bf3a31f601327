# Reads clbt's version from the CLBT_VERSION_* macros of the public header,
# so that the header is the one place a release changes it. Sets
# clbt_header_version ("MAJOR.MINOR.PATCH") for project().
file(STRINGS "${CMAKE_CURRENT_LIST_DIR}/../include/clbt/clbt.h"
     clbt_version_defines
     REGEX "^#define CLBT_VERSION_(MAJOR|MINOR|PATCH) [0-9]+$")
foreach(part MAJOR MINOR PATCH)
  string(REGEX MATCH "CLBT_VERSION_${part} ([0-9]+)" matched
         "${clbt_version_defines}")
  if(NOT matched)
    message(FATAL_ERROR "include/clbt/clbt.h defines no CLBT_VERSION_${part}")
  endif()
  set(clbt_version_${part} "${CMAKE_MATCH_1}")
endforeach()
set(clbt_header_version
    "${clbt_version_MAJOR}.${clbt_version_MINOR}.${clbt_version_PATCH}")
