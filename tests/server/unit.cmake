# Unit tests of server/'s pure parts (no sockets, no PostgreSQL): request parsing/validation, configuration,
# metrics rendering, the wait-for-room queue (an io_context, no sockets). Included from tests/server/CMakeLists.txt.
foreach(unit request config metrics router room_wait verdict)
  add_executable(server_${unit}_test ${CMAKE_CURRENT_LIST_DIR}/${unit}_test.cc)
  target_link_libraries(server_${unit}_test PRIVATE scangate_server_lib GTest::gtest_main)
  scangate_warnings(server_${unit}_test)
  gtest_discover_tests(server_${unit}_test DISCOVERY_MODE PRE_TEST PROPERTIES LABELS unit)
endforeach()
