# trainyard_add_plugin(NAME SOURCES src... [OUTPUT_DIRECTORY dir] [LINK_LIBRARIES lib...])
#
# Builds a trainyard plugin: a MODULE library named lib<NAME>.so, linked to the
# SDK, with hidden visibility so that only trainyard_plugin_entry is exported,
# and marked nodelete (a plugin's objects may outlive any attempt to unload it).
# Drop the result into a plugin folder; the host needs no rebuild.
#
# Example:
#   find_package(Trainyard REQUIRED)
#   trainyard_add_plugin(my_net SOURCES plugin.cpp my_net.cpp)
function(trainyard_add_plugin name)
  cmake_parse_arguments(ARG "" "OUTPUT_DIRECTORY" "SOURCES;LINK_LIBRARIES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "trainyard_add_plugin(${name}): SOURCES is required")
  endif()
  add_library(${name} MODULE ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE Trainyard::sdk ${ARG_LINK_LIBRARIES})
  set_target_properties(${name} PROPERTIES
    PREFIX "lib"
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  target_link_options(${name} PRIVATE "LINKER:-z,nodelete")
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${ARG_OUTPUT_DIRECTORY})
  elseif(DEFINED TRAINYARD_PLUGIN_OUTPUT_DIR)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${TRAINYARD_PLUGIN_OUTPUT_DIR})
  endif()
endfunction()
