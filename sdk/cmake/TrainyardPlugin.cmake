# trainyard_add_plugin(<name> SOURCES <src>... [LINK <target>...] [OUTPUT_DIRECTORY <dir>]
#                      [NO_INSTALL])
#
# Builds a Trainyard plugin: a MODULE library lib<name>.so compiled against Trainyard::sdk with
# hidden visibility, so that only the entry point and the class aliases that TRAINYARD_PLUGIN
# defines are exported, linked with --no-undefined so a missing symbol fails the build rather
# than the load, exporting only those symbols (trainyard_plugin.map), and installed into the
# plugin directory the host searches.
set(_TRAINYARD_PLUGIN_MAP ${CMAKE_CURRENT_LIST_DIR}/trainyard_plugin.map)

function(trainyard_add_plugin name)
  cmake_parse_arguments(ARG "NO_INSTALL" "OUTPUT_DIRECTORY" "SOURCES;LINK;DEFINITIONS" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "trainyard_add_plugin(${name}): SOURCES is required")
  endif()
  add_library(${name} MODULE ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE Trainyard::sdk ${ARG_LINK})
  if(ARG_DEFINITIONS)
    target_compile_definitions(${name} PRIVATE ${ARG_DEFINITIONS})
  endif()
  if(DEFINED TRAINYARD_WARNINGS)
    target_compile_options(${name} PRIVATE ${TRAINYARD_WARNINGS})
  endif()
  set_target_properties(${name} PROPERTIES
    PREFIX "lib"
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  target_link_options(${name} PRIVATE "LINKER:--no-undefined" "LINKER:--exclude-libs,ALL"
                      "LINKER:--version-script=${_TRAINYARD_PLUGIN_MAP}")
  set_property(TARGET ${name} APPEND PROPERTY LINK_DEPENDS ${_TRAINYARD_PLUGIN_MAP})
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${ARG_OUTPUT_DIRECTORY})
  elseif(DEFINED TRAINYARD_PLUGIN_OUTPUT_DIR)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${TRAINYARD_PLUGIN_OUTPUT_DIR})
  endif()
  if(NOT ARG_NO_INSTALL AND DEFINED TRAINYARD_PLUGIN_INSTALL_DIR)
    install(TARGETS ${name} LIBRARY DESTINATION ${TRAINYARD_PLUGIN_INSTALL_DIR}
            COMPONENT ${name})
  endif()
endfunction()
