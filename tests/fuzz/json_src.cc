// Boost.JSON compiled into the fuzzer from its header-only source, so the parser itself is instrumented
// (the system libboost_json is built without sanitizers).
#include <boost/json/src.hpp>
