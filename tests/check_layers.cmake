# Checks that src/ is the house docs/design.md draws ("Layers"): every file
# in a layer's folder, every internal include named by its layer's folder,
# no include of a layer above the file's own, one header per module (a
# header has its .c, which includes it first; <name>_internal.h is the
# second header of <name>.c), no circle between modules but log/status,
# and above the engine no way into the engine's insides but the runner:
# no file reaches its internal header or a call's machinery, directly or
# through any other header, nor reads the engine's fields (->engine->).
# An include is what a call needs (a C11 file cannot call what it has not
# declared), so no call climbs back up either.
#
#   cmake -DSOURCE_DIR=<the project's root> -P check_layers.cmake
#
# Every problem is reported, then the check fails.

cmake_minimum_required(VERSION 3.16)

if(NOT SOURCE_DIR)
  message(FATAL_ERROR "check_layers.cmake needs -DSOURCE_DIR")
endif()

# The layers, lowest first. cl holds the contracts between host and
# kernels (cl/contract.h, cl/kv_cache.h): the engine and what is above it
# include them, the device layer does not. kv, the KV module (the cache,
# its write and the attention that reads it), is ranked with the engine and
# apart from it: neither includes the other's headers.
set(layers base device cl engine calls api)
set(beside_engine kv)
# The one circle allowed: status.c logs each failure, log.c reports its own.
set(allowed_circle "base/log" "base/status")
# A device call is planned and enqueued by the runner alone (docs/design.md,
# "One runner, a builder per call"): above the engine, only it reaches the
# engine's internal headers (engine/*_internal.h: the engine's struct) and
# the engine's commits, launches, plan and staging, and only it reads the
# engine's fields.
set(runner "calls/run")
set(runner_only engine/commit engine/launch engine/plan engine/staging)
set(sealed_header "^engine/[a-z0-9_]+_internal$")
list(FIND layers engine engine_rank)

set(problems "")
macro(problem text)
  string(APPEND problems "  ${text}\n")
endmacro()

include("${CMAKE_CURRENT_LIST_DIR}/include_graph.cmake")

function(layer_rank layer out)
  if(layer IN_LIST beside_engine)
    set(layer engine)
  endif()
  list(FIND layers "${layer}" rank)
  set(${out} ${rank} PARENT_SCOPE)
endfunction()


# The variable that lists the headers a file (its path under src/, or
# cl/<name>.h) includes, each as its include names it.
function(includes_of file out)
  string(MAKE_C_IDENTIFIER "${file}" name)
  set(${out} "includes_${name}" PARENT_SCOPE)
endfunction()

# Every layer's header a file reaches through its includes, and the
# headers they include, and so on.
function(reach file out)
  includes_of("${file}" direct)
  set(todo ${${direct}})
  set(seen "")
  while(todo)
    list(POP_FRONT todo header)
    if(header IN_LIST seen)
      continue()
    endif()
    list(APPEND seen "${header}")
    includes_of("${header}" next)
    list(APPEND todo ${${next}})
  endwhile()
  set(${out} "${seen}" PARENT_SCOPE)
endfunction()

# Whether a header (layer/name, no .h) is the engine's insides: its
# internal header or a call's machinery.
function(is_sealed header out)
  set(sealed FALSE)
  if(header IN_LIST runner_only OR header MATCHES "${sealed_header}")
    set(sealed TRUE)
  endif()
  set(${out} ${sealed} PARENT_SCOPE)
endfunction()

# The layer headers each file includes, every file read first, so that
# what a file reaches is known before its own checks.
function(read_includes path out)
  file(STRINGS "${path}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  set(headers "")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^[^\"]*\"([^\"]*)\".*$" "\\1" included "${line}")
    if(included MATCHES "^[a-z]+/[a-z0-9_]+\\.h$")
      list(APPEND headers "${included}")
    endif()
  endforeach()
  set(${out} "${headers}" PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE files RELATIVE "${SOURCE_DIR}/src" "${SOURCE_DIR}/src/*")
file(GLOB cl_headers RELATIVE "${SOURCE_DIR}" "${SOURCE_DIR}/cl/*.h")
set(modules "")
foreach(header IN LISTS cl_headers)
  string(REGEX REPLACE "\\.h$" "" module "${header}")
  list(APPEND modules "${module}")
  includes_of("${header}" included)
  read_includes("${SOURCE_DIR}/${header}" ${included})
endforeach()
foreach(file IN LISTS files)
  includes_of("${file}" included)
  read_includes("${SOURCE_DIR}/src/${file}" ${included})
endforeach()

# The engine's insides a file reaches: each sealed header it includes, or
# reaches through the first of its includes that leads there.
function(check_sealed file)
  reach("${file}" reached)
  includes_of("${file}" direct)
  foreach(header IN LISTS reached)
    string(REGEX REPLACE "\\.h$" "" name "${header}")
    is_sealed("${name}" sealed)
    if(NOT sealed)
      continue()
    endif()
    if(header IN_LIST ${direct})
      problem("src/${file} includes ${header}, which only the runner (src/${runner}.c) may")
      continue()
    endif()
    foreach(through IN LISTS ${direct})
      reach("${through}" beyond)
      if(header IN_LIST beyond)
        problem("src/${file} reaches ${header} through ${through}, which only the runner (src/${runner}.c) may")
        break()
      endif()
    endforeach()
  endforeach()
  file(STRINGS "${SOURCE_DIR}/src/${file}" reads REGEX "(->|\\.)engine->")
  foreach(line IN LISTS reads)
    string(STRIP "${line}" line)
    problem("src/${file} reads the engine's fields (${line}), which only the runner (src/${runner}.c) may")
  endforeach()
  set(problems "${problems}" PARENT_SCOPE)
endfunction()

foreach(file IN LISTS files)
  if(NOT file MATCHES "^([a-z]+)/([a-z0-9_]+)\\.(c|h)$")
    problem("src/${file} is in no layer's folder (src/<layer>/<name>.c or .h)")
    continue()
  endif()
  set(layer "${CMAKE_MATCH_1}")
  set(module "${CMAKE_MATCH_1}/${CMAKE_MATCH_2}")
  set(kind "${CMAKE_MATCH_3}")
  layer_rank("${layer}" rank)
  if(rank LESS 0 OR layer STREQUAL "cl")
    problem("src/${file}: ${layer} is not a layer (${layers})")
    continue()
  endif()
  # An internal header is the second header of its module.
  string(REGEX REPLACE "_internal$" "" module "${module}")
  list(APPEND modules "${module}")
  variable_of("${module}" edges)

  # One header per module: a header has its .c, which includes it first.
  if(kind STREQUAL "h" AND NOT EXISTS "${SOURCE_DIR}/src/${module}.c")
    problem("src/${file} is a header without a module: no src/${module}.c")
  endif()
  file(STRINGS "${SOURCE_DIR}/src/${file}" includes
       REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  check_own_header_first(src "${file}" "${kind}" "${module}" includes)

  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^[^\"]*\"([^\"]*)\".*$" "\\1" included "${line}")
    if(included STREQUAL "clbt/clbt.h")
      continue() # the public API, below everything
    endif()
    if(NOT included MATCHES "^([a-z]+)/([a-z0-9_]+)\\.h$")
      problem("src/${file} includes \"${included}\", which names no layer")
      continue()
    endif()
    set(target_layer "${CMAKE_MATCH_1}")
    set(target "${CMAKE_MATCH_1}/${CMAKE_MATCH_2}")
    string(REGEX REPLACE "_internal$" "" target "${target}")
    layer_rank("${target_layer}" target_rank)
    if(target_layer STREQUAL "cl")
      set(where "${SOURCE_DIR}/${included}")
    else()
      set(where "${SOURCE_DIR}/src/${included}")
    endif()
    if(target_rank LESS 0 OR NOT EXISTS "${where}")
      problem("src/${file} includes \"${included}\", which is no layer's header")
      continue()
    endif()
    if(target_rank GREATER rank)
      problem("src/${file} (${layer}) includes ${included}, which climbs up to ${target_layer}")
    endif()
    if(NOT target_layer STREQUAL layer AND target_rank EQUAL rank
       AND NOT target_layer STREQUAL "cl")
      problem("src/${file} (${layer}) includes ${included}: ${layer} and ${target_layer} are apart")
    endif()
    if(NOT target STREQUAL module)
      list(APPEND ${edges} "${target}")
    endif()
  endforeach()
  if(rank GREATER engine_rank AND NOT module STREQUAL runner)
    check_sealed("${file}")
  endif()
endforeach()
list(REMOVE_DUPLICATES modules)

# The allowed circle is one edge short.
variable_of("base/log" log_edges)
list(REMOVE_ITEM ${log_edges} "base/status")

# Circles (include_graph.cmake).
find_circles("${modules}" circles)
foreach(circle IN LISTS circles)
  problem("${circle}")
endforeach()

list(LENGTH modules count)
if(problems)
  message(FATAL_ERROR "src/ is not the house docs/design.md draws:\n${problems}")
endif()
message(STATUS "check_layers: ${count} modules in ${layers} (${beside_engine} beside the engine), no include climbs up, no circle but ${allowed_circle}, no way into the engine's insides but ${runner}")
