# Kernel programs compiled into the library, so that no file is looked up
# at run time.
#
#   clbt_embed_kernel(SYMBOL ROOT)
#
# embeds the program whose root part is ROOT (a path from the project's
# root, such as cl/step.cl) as the C array SYMBOL: the root with the parts
# it includes, each where it is first included, joined with #line markers
# that keep a compiler's messages on each part's own lines
# (cmake/embed_source.cmake). The generated .c file is appended to
# clbt_embedded_kernels for the library to compile. A program's parts are
# the files of its root's folder and the public headers (include/, as the
# library's sources see them: "clbt/..."), each including what it uses;
# the program is embedded again when any of them changes, or one is
# added.
set(clbt__embed_script "${CMAKE_CURRENT_LIST_DIR}/embed_source.cmake")

function(clbt_embed_kernel symbol root)
  get_filename_component(root_path "${root}" ABSOLUTE
                         BASE_DIR "${PROJECT_SOURCE_DIR}")
  get_filename_component(folder "${root_path}" DIRECTORY)
  set(headers "${PROJECT_SOURCE_DIR}/include")
  file(GLOB parts CONFIGURE_DEPENDS "${folder}/*.cl" "${folder}/*.h"
       "${headers}/clbt/*.h")
  set(output "${CMAKE_CURRENT_BINARY_DIR}/${symbol}.c")
  add_custom_command(
    OUTPUT "${output}"
    COMMAND "${CMAKE_COMMAND}" "-DROOT=${root_path}"
            "-DTOP=${PROJECT_SOURCE_DIR}" "-DOUTPUT=${output}"
            "-DSYMBOL=${symbol}" "-DINCLUDE_DIRS=${headers}"
            -P "${clbt__embed_script}"
    DEPENDS ${parts} "${clbt__embed_script}"
    COMMENT "Embedding ${root} and the parts it includes")
  set(clbt_embedded_kernels ${clbt_embedded_kernels} "${output}"
      PARENT_SCOPE)
endfunction()
