// The translation unit that owns the tests' shared precompiled header (tests/CMakeLists.txt, cmake/pch.cmake):
// CMake builds the header's .gch/.pch with this target's flags and every test target reuses it.
