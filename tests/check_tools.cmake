# Checks that tools/ stands on the floors docs/design.md draws ("Tools"):
# every C file in a floor's folder, bench/ under cli/; every include of
# the tool's own named by its folder, and none climbing from bench/ to
# cli/; a module's .c including its header first; a header with a .c of
# its name declaring only functions that .c defines (so that a file that
# includes it never reaches up into the files that call it, as the old
# bench.h did, which declared every section); and no circle between
# modules. support/'s headers and clbt/clbt.h are below every floor.
#
#   cmake -DSOURCE_DIR=<the project's root> -P check_tools.cmake
#
# Every problem is reported, then the check fails.

cmake_minimum_required(VERSION 3.16)

if(NOT SOURCE_DIR)
  message(FATAL_ERROR "check_tools.cmake needs -DSOURCE_DIR")
endif()

# The floors, lowest first.
set(floors bench cli)

set(problems "")
macro(problem text)
  string(APPEND problems "  ${text}\n")
endmacro()

include("${CMAKE_CURRENT_LIST_DIR}/include_graph.cmake")


# The functions a file declares (a header) or defines (a .c): a line at
# the left margin that opens no comment, type, macro or static function
# and names a function, as the tree's format writes them.
function(functions_of path out)
  file(STRINGS "${path}" lines REGEX "^[A-Za-z_][^(]*\\(")
  set(names "")
  foreach(line IN LISTS lines)
    if(line MATCHES "^(static|typedef|extern|struct|enum|union)[ \t]")
      continue()
    endif()
    if(line MATCHES "^[^(]*[^A-Za-z0-9_]([A-Za-z_][A-Za-z0-9_]*)\\(")
      list(APPEND names "${CMAKE_MATCH_1}")
    endif()
  endforeach()
  set(${out} "${names}" PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE files RELATIVE "${SOURCE_DIR}/tools"
     "${SOURCE_DIR}/tools/*.c" "${SOURCE_DIR}/tools/*.h")
list(SORT files)
set(modules "")
foreach(file IN LISTS files)
  if(NOT file MATCHES "^([a-z]+)/([a-z0-9_]+)\\.(c|h)$")
    problem("tools/${file} is in no floor's folder (tools/<floor>/<name>.c or .h)")
    continue()
  endif()
  set(floor "${CMAKE_MATCH_1}")
  set(module "${CMAKE_MATCH_1}/${CMAKE_MATCH_2}")
  set(kind "${CMAKE_MATCH_3}")
  list(FIND floors "${floor}" rank)
  if(rank LESS 0)
    problem("tools/${file}: ${floor} is not a floor (${floors})")
    continue()
  endif()
  list(APPEND modules "${module}")
  variable_of("${module}" edges)

  file(STRINGS "${SOURCE_DIR}/tools/${file}" includes
       REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  check_own_header_first(tools "${file}" "${kind}" "${module}" includes)
  if(kind STREQUAL "h" AND EXISTS "${SOURCE_DIR}/tools/${module}.c")
    functions_of("${SOURCE_DIR}/tools/${file}" declared)
    functions_of("${SOURCE_DIR}/tools/${module}.c" defined)
    foreach(name IN LISTS declared)
      if(NOT name IN_LIST defined)
        problem("tools/${file} declares ${name}, which tools/${module}.c does not define")
      endif()
    endforeach()
  endif()

  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^[^\"]*\"([^\"]*)\".*$" "\\1" included "${line}")
    if(included STREQUAL "clbt/clbt.h" OR
       (included MATCHES "^[a-z0-9_]+\\.h$" AND
        EXISTS "${SOURCE_DIR}/support/${included}"))
      continue() # the public API and support/, below every floor
    endif()
    if(NOT included MATCHES "^([a-z]+)/([a-z0-9_]+)\\.h$" OR
       NOT EXISTS "${SOURCE_DIR}/tools/${included}")
      problem("tools/${file} includes \"${included}\", which is no header of a floor or of support/")
      continue()
    endif()
    set(target_floor "${CMAKE_MATCH_1}")
    set(target "${CMAKE_MATCH_1}/${CMAKE_MATCH_2}")
    list(FIND floors "${target_floor}" target_rank)
    if(target_rank GREATER rank)
      problem("tools/${file} (${floor}) includes ${included}, which climbs up to ${target_floor}")
    endif()
    if(NOT target STREQUAL module)
      list(APPEND ${edges} "${target}")
    endif()
  endforeach()
endforeach()
list(REMOVE_DUPLICATES modules)

# Circles (include_graph.cmake).
find_circles("${modules}" circles)
foreach(circle IN LISTS circles)
  problem("tools/${circle}")
endforeach()

list(LENGTH modules count)
if(problems)
  message(FATAL_ERROR "tools/ is not the house docs/design.md draws:\n${problems}")
endif()
message(STATUS "check_tools: ${count} modules on ${floors}, no include climbs up, no header declares another file's functions, no circle")
