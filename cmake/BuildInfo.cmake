# Writes OUT (a header defining TRAINYARD_GIT_COMMIT) from the source tree's
# git state, only when it changed, so that nothing rebuilds without need.
# Run at every build: cmake -DSOURCE_DIR=... -DOUT=... -P BuildInfo.cmake
set(commit "unknown")
find_program(GIT git)
if(GIT AND EXISTS "${SOURCE_DIR}/.git")
  execute_process(COMMAND ${GIT} -C ${SOURCE_DIR} rev-parse HEAD OUTPUT_VARIABLE head
                  OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc ERROR_QUIET)
  if(rc EQUAL 0)
    set(commit "${head}")
    execute_process(COMMAND ${GIT} -C ${SOURCE_DIR} status --porcelain --untracked-files=no
                    OUTPUT_VARIABLE changes OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(NOT changes STREQUAL "")
      set(commit "${commit}+dirty")
    endif()
  endif()
endif()
set(content "#pragma once\n#define TRAINYARD_GIT_COMMIT \"${commit}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL content)
  file(WRITE "${OUT}" "${content}")
endif()
