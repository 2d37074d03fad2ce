# Tests the scangate binary's command line and its build identity (server/version.h, server/version.cmake):
#   --version exits 0 and prints "scangate <project VERSION> (commit <HEAD>[-dirty], <build type>)";
#   --help exits 0 and lists every option group; an unknown flag exits 2;
#   the version stamp of sources outside a git work tree (a tarball; one unpacked inside another repository)
#   says "unknown".
#   cmake -DBIN=<scangate> -DVERSION=<x.y.z> -DGIT=<git or empty> -DSOURCE_DIR=<repo> -DWORK=<scratch dir>
#         -P tests/server/cli_test.cmake
cmake_minimum_required(VERSION 3.25)  # script mode: today's policies
function(scangate_run expect_rc)
  execute_process(COMMAND "${BIN}" ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc STREQUAL "${expect_rc}")
    message(FATAL_ERROR "scangate ${ARGN}: exit ${rc}, expected ${expect_rc}\n${out}${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

scangate_run(0 --version)
string(REPLACE "." "\\." version_re "${VERSION}")
if(NOT out MATCHES "^scangate ${version_re} \\(commit ([0-9a-f]+(-dirty)?|unknown)(, [A-Za-z]+)?\\)\n$")
  message(FATAL_ERROR "--version printed '${out}', expected 'scangate ${VERSION} (commit ...)'")
endif()
set(commit "${CMAKE_MATCH_1}")
if(GIT)
  execute_process(COMMAND "${GIT}" -C "${SOURCE_DIR}" rev-parse --short=12 HEAD
                  OUTPUT_VARIABLE head RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(rc EQUAL 0 AND NOT commit MATCHES "^${head}(-dirty)?$")
    message(FATAL_ERROR "--version names commit '${commit}', the checkout is at ${head} (rebuild?)")
  endif()
endif()

scangate_run(0 --help)
foreach(group Listening PostgreSQL Filter Acknowledgement Security Operations)
  if(NOT out MATCHES "\n${group}:\n")
    message(FATAL_ERROR "--help lacks the group '${group}':\n${out}")
  endif()
endforeach()

scangate_run(2 --no-such-flag)

# Outside a git work tree: an empty folder, and a folder inside this repository that is not its top.
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}/tarball")
foreach(dir "${WORK}/tarball" "${SOURCE_DIR}/sql")
  execute_process(COMMAND "${CMAKE_COMMAND}" -DSOURCE_DIR=${dir} -DGIT=${GIT} -DVERSION=${VERSION}
                          -DBUILD_TYPE=Release -DTEMPLATE=${SOURCE_DIR}/server/version.cc.in
                          -DOUT=${WORK}/version.cc -P ${SOURCE_DIR}/server/version.cmake
                  RESULT_VARIABLE rc)
  file(READ "${WORK}/version.cc" generated)
  if(NOT rc EQUAL 0 OR NOT generated MATCHES "GitCommit\\(\\) { return \"unknown\"; }")
    message(FATAL_ERROR "version stamp of ${dir}: exit ${rc}, expected commit unknown:\n${generated}")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK}")
