# What check_layers.cmake and check_tools.cmake share: the variable that
# holds a module's edges (the modules its files include), and the circles
# those edges make.

# A C identifier for a module's name, to name its variables.
function(variable_of module out)
  string(MAKE_C_IDENTIFIER "${module}" name)
  set(${out} "edges_${name}" PARENT_SCOPE)
endfunction()

# A .c file of a module with a header includes that header first, so that
# the header is seen to stand on its own. TREE is the folder under
# SOURCE_DIR ("src", "tools"), INCLUDES the file's #include lines in
# order; a macro, so that problem() reaches the caller's list.
macro(check_own_header_first tree file kind module includes)
  if("${kind}" STREQUAL "c" AND EXISTS "${SOURCE_DIR}/${tree}/${module}.h")
    list(GET ${includes} 0 own_header_line)
    if(NOT own_header_line MATCHES "\"${module}\\.h\"")
      problem("${tree}/${file} does not include its own header ${module}.h first")
    endif()
  endif()
endmacro()

# OUT: one line "MODULE is on a circle: it includes A, B" for each module
# of MODULES (a list) on a circle of edges, or between two. Prunes every
# module that uses nothing left (nothing above it can be on a circle
# through it), then every module nothing left uses, until none goes; what
# stays is on a circle.
function(find_circles modules out)
  set(left ${modules})
  set(changed TRUE)
  while(changed)
    set(changed FALSE)
    foreach(module IN LISTS left)
      variable_of("${module}" edges)
      set(uses_left FALSE)
      set(used_by_left FALSE)
      foreach(target IN LISTS ${edges})
        if(target IN_LIST left)
          set(uses_left TRUE)
        endif()
      endforeach()
      foreach(other IN LISTS left)
        variable_of("${other}" other_edges)
        if(module IN_LIST ${other_edges})
          set(used_by_left TRUE)
        endif()
      endforeach()
      if(NOT uses_left OR NOT used_by_left)
        list(REMOVE_ITEM left "${module}")
        set(changed TRUE)
      endif()
    endforeach()
  endwhile()
  set(lines "")
  foreach(module IN LISTS left)
    variable_of("${module}" edges)
    set(within "")
    foreach(target IN LISTS ${edges})
      if(target IN_LIST left)
        list(APPEND within "${target}")
      endif()
    endforeach()
    list(REMOVE_DUPLICATES within)
    list(JOIN within ", " within)
    list(APPEND lines "${module} is on a circle: it includes ${within}")
  endforeach()
  set(${out} "${lines}" PARENT_SCOPE)
endfunction()
