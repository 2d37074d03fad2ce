# Unit tests of server/'s parts that need no sockets and no PostgreSQL, mirroring server/'s folders: request
# parsing/validation and routing (http/), configuration, metrics rendering (metrics/), the per-key decision and
# the wait-for-room queue (verdict/, an io_context, no sockets). Included from tests/server/CMakeLists.txt.
foreach(unit http/address_key http/request_parser http/body_budget http/response_wire http/client_certificate http/unicode_nfc http/proxy_protocol http/request http/content_type http/ascii http/route http/problem http/json_members http/connection_limit http/answer_body http/rate_limit http/token_store config/config config/config_file metrics/metrics metrics/table_metrics http/router verdict/room_wait verdict/io_inbox verdict/scan_key verdict/verdict verdict/peers)
  get_filename_component(name ${unit} NAME)
  add_executable(server_${name}_test ${CMAKE_CURRENT_LIST_DIR}/${unit}_test.cc)
  target_link_libraries(server_${name}_test PRIVATE scangate_server_lib GTest::gtest_main)
  scangate_warnings(server_${name}_test)
  gtest_discover_tests(server_${name}_test DISCOVERY_MODE PRE_TEST PROPERTIES LABELS unit)
endforeach()
# The example config file (deploy/scangate.conf) is parsed by its test, so it cannot drift from the flags.
target_compile_definitions(server_config_file_test PRIVATE SCANGATE_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
