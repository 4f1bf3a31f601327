# Sets `declared` to the names of the functions a header declares with
# CLBT_API, the public API; with a return type, only those returning it.
# Included by the scripts that check it.
function(clbt_declared_functions header)
  file(READ "${header}" text)
  set(returns "[^;(]*[ *]")
  if(ARGC GREATER 1)
    set(returns " ${ARGV1} ")
  endif()
  string(REGEX MATCHALL "CLBT_API${returns}clbt_[a-z0-9_]+\\(" declarations
         "${text}")
  set(names "")
  foreach(declaration IN LISTS declarations)
    string(REGEX MATCH "clbt_[a-z0-9_]+\\($" name "${declaration}")
    string(REGEX REPLACE "\\($" "" name "${name}")
    list(APPEND names "${name}")
  endforeach()
  list(LENGTH names count)
  if(count EQUAL 0)
    message(FATAL_ERROR "found no CLBT_API declaration in ${header}")
  endif()
  list(SORT names)
  set(declared "${names}" PARENT_SCOPE)
endfunction()
