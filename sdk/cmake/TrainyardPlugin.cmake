# trainyard_add_plugin(<name> SOURCES <src>... [LINK <target>...] [DEFINITIONS <def>...]
#                      [OUTPUT_DIRECTORY <dir>] [COMPONENT <component>] [NO_INSTALL])
#
# Builds a Trainyard plugin: a MODULE library lib<name>.so compiled against Trainyard::sdk with
# hidden visibility, so that only the entry point and the class aliases that TRAINYARD_PLUGIN
# defines are exported, linked with --no-undefined so a missing symbol fails the build rather
# than the load, exporting only those symbols (trainyard_plugin.map), and installed into the
# plugin directory the host searches. The ABI stamps come from the SDK headers the sources
# include.
#
# The same file serves the Trainyard build and, installed beside TrainyardConfig.cmake, plugins
# built out of tree after find_package(Trainyard). Out of tree, the module is written to the
# current binary directory unless OUTPUT_DIRECTORY says otherwise, and installed into
# ${TRAINYARD_PLUGIN_INSTALL_DIR}, by default ${CMAKE_INSTALL_LIBDIR}/trainyard/plugins under the
# project's install prefix, in install component COMPONENT (default: <name>).
#
# The host lists a plugin's classes, without loading it, from its dynamic symbol table (.dynsym),
# which the dynamic loader needs and no strip removes; `cmake --install --strip` (and CPack's
# CPACK_STRIP_FILES) strip plugins fully, as any other module.
set(_TRAINYARD_PLUGIN_MAP ${CMAKE_CURRENT_LIST_DIR}/trainyard_plugin.map)
if(NOT DEFINED CMAKE_INSTALL_LIBDIR)
  include(GNUInstallDirs)
endif()

function(trainyard_add_plugin name)
  cmake_parse_arguments(ARG "NO_INSTALL" "OUTPUT_DIRECTORY;COMPONENT" "SOURCES;LINK;DEFINITIONS"
                        ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "trainyard_add_plugin(${name}): SOURCES is required")
  endif()
  if(NOT TARGET Trainyard::sdk)
    message(FATAL_ERROR "trainyard_add_plugin(${name}): Trainyard::sdk is not defined; call "
                        "find_package(Trainyard CONFIG REQUIRED) first")
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
  if(ARG_NO_INSTALL)
    return()
  endif()

  if(DEFINED TRAINYARD_PLUGIN_INSTALL_DIR)
    set(install_dir ${TRAINYARD_PLUGIN_INSTALL_DIR})
  else()
    set(install_dir ${CMAKE_INSTALL_LIBDIR}/trainyard/plugins)
  endif()
  set(component ${name})
  if(ARG_COMPONENT)
    set(component ${ARG_COMPONENT})
  endif()
  set_property(GLOBAL APPEND PROPERTY TRAINYARD_PLUGIN_COMPONENTS ${component})
  install(TARGETS ${name} LIBRARY DESTINATION ${install_dir} COMPONENT ${component})
endfunction()
