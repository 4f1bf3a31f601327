# Checks that a call's enqueue pass decides nothing (docs/design.md, "A
# step's path"): it walks the commands the plan made, so it calls nothing
# of the engine's plan or commits (engine/plan.h, engine/commit.h), and
# every internal function it calls is one of the enqueue's own: the
# sequence (device/queue.h), a launch's enqueue (engine/launch.h), a
# kernel's bound buffers (device/bound_buffer.h) and the staging slots
# (engine/staging.h). The pass is the runner's section from "---- enqueueing
# the commands" to "---- settling" (src/calls/run.c) and the launch's from
# "---- enqueueing a launch" to its end (src/engine/launch.c); a missing
# marker fails the check.
#
#   cmake -DSOURCE_DIR=<the project's root> -P check_enqueue_pass.cmake
#
# Every problem is reported, then the check fails.

cmake_minimum_required(VERSION 3.16)

if(NOT SOURCE_DIR)
  message(FATAL_ERROR "check_enqueue_pass.cmake needs -DSOURCE_DIR")
endif()

set(enqueue_headers device/queue engine/launch engine/staging
    device/bound_buffer)
set(deciding_headers engine/plan engine/commit)

list(JOIN enqueue_headers ", " enqueue_names)
set(problems "")
macro(problem text)
  string(APPEND problems "  ${text}\n")
endmacro()

# The text of `file` from the line holding `begin` to the one holding `end`
# (its end when `end` is empty), comments left out.
function(section file begin end out)
  file(READ "${SOURCE_DIR}/${file}" text)
  string(FIND "${text}" "${begin}" first)
  if(first LESS 0)
    set(${out} "" PARENT_SCOPE)
    set(missing "${file} has no \"${begin}\"" PARENT_SCOPE)
    return()
  endif()
  string(SUBSTRING "${text}" ${first} -1 text)
  if(end)
    string(FIND "${text}" "${end}" last)
    if(last LESS 0)
      set(${out} "" PARENT_SCOPE)
      set(missing "${file} has no \"${end}\" after \"${begin}\"" PARENT_SCOPE)
      return()
    endif()
    string(SUBSTRING "${text}" 0 ${last} text)
  endif()
  string(REGEX REPLACE "/\\*([^*]|\\*+[^*/])*\\*+/" "" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
  set(missing "" PARENT_SCOPE)
endfunction()

# The internal functions a header declares or names with a call.
function(declared header out)
  file(READ "${SOURCE_DIR}/src/${header}.h" text)
  string(REGEX MATCHALL "clbt__[a-z0-9_]+\\(" names "${text}")
  list(REMOVE_DUPLICATES names)
  set(${out} "${names}" PARENT_SCOPE)
endfunction()

foreach(header IN LISTS enqueue_headers deciding_headers)
  string(MAKE_C_IDENTIFIER "${header}" id)
  declared(${header} names_${id})
endforeach()

set(passes "src/calls/run.c|---- enqueueing the commands|---- settling"
           "src/engine/launch.c|---- enqueueing a launch|")
set(calls 0)
foreach(pass IN LISTS passes)
  string(REPLACE "|" ";" parts "${pass}")
  list(GET parts 0 file)
  list(GET parts 1 begin)
  list(LENGTH parts count)
  set(end "")
  if(count GREATER 2)
    list(GET parts 2 end)
  endif()
  section("${file}" "${begin}" "${end}" text)
  if(missing)
    problem("${missing}: the enqueue pass is not where the check looks")
    continue()
  endif()
  string(REGEX MATCHALL "clbt__[a-z0-9_]+\\(" called "${text}")
  list(REMOVE_DUPLICATES called)
  foreach(name IN LISTS called)
    math(EXPR calls "${calls} + 1")
    string(REPLACE "(" "" function "${name}")
    set(home "")
    foreach(header IN LISTS enqueue_headers deciding_headers)
      string(MAKE_C_IDENTIFIER "${header}" id)
      if(name IN_LIST names_${id} AND NOT home)
        set(home "${header}")
      endif()
    endforeach()
    if(home IN_LIST deciding_headers)
      problem("${file}'s enqueue pass calls ${function} of ${home}.h, which decides: the plan's to call")
    elseif(NOT home)
      problem("${file}'s enqueue pass calls ${function}, which none of ${enqueue_names} declares")
    endif()
  endforeach()
endforeach()

if(problems)
  message(FATAL_ERROR "the enqueue pass decides:\n${problems}")
endif()
message(STATUS "check_enqueue_pass: ${calls} internal functions called, each the sequence's, a launch's, a bound buffer's or the staging slots'; none of the plan's or the commits'")
