# Writes the generated version.cc (server/version.h) at every build; configure_file() rewrites it only when
# its text changes, so a build at the same commit recompiles nothing.
#   cmake -DSOURCE_DIR=<repo> -DGIT=<git or empty> -DVERSION=<x.y.z> -DBUILD_TYPE=<type>
#         -DTEMPLATE=server/version.cc.in -DOUT=<build>/version.cc -P server/version.cmake
# The commit is "unknown" unless SOURCE_DIR is itself the top of a git work tree (a source tarball unpacked
# inside some other repository must not report that repository's commit), or REVISION names it: a build without
# .git, such as the container image's (Dockerfile: --build-arg REVISION), passes the commit it was made from.
#   -DREVISION=<commit or empty>
cmake_minimum_required(VERSION 3.25)  # script mode: today's policies
set(SCANGATE_VERSION "${VERSION}")
set(SCANGATE_BUILD_TYPE "${BUILD_TYPE}")
set(SCANGATE_COMMIT unknown)
if(GIT)
  execute_process(COMMAND "${GIT}" -C "${SOURCE_DIR}" rev-parse --show-toplevel
                  OUTPUT_VARIABLE top RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(rc EQUAL 0)
    get_filename_component(top "${top}" REALPATH)
    get_filename_component(src "${SOURCE_DIR}" REALPATH)
    if(top STREQUAL src)
      execute_process(COMMAND "${GIT}" -C "${SOURCE_DIR}" rev-parse --short=12 HEAD
                      OUTPUT_VARIABLE commit RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
      if(rc EQUAL 0 AND commit MATCHES "^[0-9a-f]+$")
        set(SCANGATE_COMMIT "${commit}")
        # Tracked files changed since the commit: say so (untracked files, e.g. build/, do not count).
        execute_process(COMMAND "${GIT}" --no-optional-locks -C "${SOURCE_DIR}" status --porcelain
                                --untracked-files=no
                        OUTPUT_VARIABLE changes RESULT_VARIABLE rc ERROR_QUIET)
        if(rc EQUAL 0 AND NOT changes STREQUAL "")
          string(APPEND SCANGATE_COMMIT "-dirty")
        endif()
      endif()
    endif()
  endif()
endif()
if(SCANGATE_COMMIT STREQUAL "unknown" AND REVISION MATCHES "^[0-9a-f]+(-dirty)?$")
  set(SCANGATE_COMMIT "${REVISION}")
endif()
configure_file("${TEMPLATE}" "${OUT}" @ONLY)
