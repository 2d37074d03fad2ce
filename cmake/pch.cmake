# Precompiled headers (SCANGATE_PCH). Two kinds:
#   scangate_library_pch(<target> <headers>...)   a library's own PCH, built once for its ~30 units
#   scangate_test_pch_apply(<dir>)                every test target under <dir> reuses one PCH (REUSE_FROM), so a
#                                                 one-file test executable does not pay for a PCH of its own
# Why: a unit's front end is mostly the third-party headers every unit includes (libpqxx, Boost.Asio/Beast/JSON,
# GoogleTest, <regex>); parsed once per library or once for all tests instead of once per unit.
# GCC and clang accept a PCH only when every -D matches the unit's (GCC silently parses the headers instead,
# clang refuses), so every test target links scangate_test_common, the one set of definitions they all share;
# a test with a private definition of its own (e.g. SCANGATE_SOURCE_DIR) is left to parse its headers.

# Libraries: clang only. With GCC 12 a library's PCH cost more than it saved: the .gch of Boost.Asio/Beast is
# ~250 MB, each unit maps it in, and every unit of the library waits for it; the run command's product-only build
# took 208 s with it against 166 s without (2 cores). clang's PCH is read lazily: a small ASan unit compiles in half
# the time (service_cors_test 3.1 s vs 6.2 s, storage/store.cc 2.4 s vs 3.7 s; measured).
function(scangate_library_pch target)
  if(SCANGATE_PCH AND CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    target_precompile_headers(${target} PRIVATE ${ARGN})
  endif()
endfunction()

# All targets defined in <dir> and its subdirectories.
function(_scangate_targets_under dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    _scangate_targets_under(${sub} sub_targets)
    list(APPEND targets ${sub_targets})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# Links scangate_test_common into every executable and static library under <dir> and, with SCANGATE_PCH, makes
# them reuse scangate_test_pch's precompiled header. Call after the tests are defined.
function(scangate_test_pch_apply dir)
  _scangate_targets_under(${dir} targets)
  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    if(NOT type MATCHES "^(EXECUTABLE|STATIC_LIBRARY)$" OR t STREQUAL "scangate_test_pch")
      continue()
    endif()
    target_link_libraries(${t} PRIVATE scangate_test_common)
    if(SCANGATE_TEST_OPT)
      target_compile_options(${t} PRIVATE ${SCANGATE_TEST_OPT})
    endif()
    get_target_property(defs ${t} COMPILE_DEFINITIONS)
    if(SCANGATE_PCH AND NOT defs)
      target_precompile_headers(${t} REUSE_FROM scangate_test_pch)
    endif()
  endforeach()
endfunction()
