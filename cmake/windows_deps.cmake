# The libraries of the Windows cross build (cmake/x86_64-w64-mingw32.cmake), as the targets
# the Linux build gets from find_package and pkg-config. KVGATE_WINDOWS_DEPS is the folder
# scripts/windows-deps.sh prints.
set(KVGATE_WINDOWS_DEPS "" CACHE PATH "the folder scripts/windows-deps.sh built")
if(NOT EXISTS "${KVGATE_WINDOWS_DEPS}/DEPS_OK")
  message(FATAL_ERROR "KVGATE_WINDOWS_DEPS='${KVGATE_WINDOWS_DEPS}' is not a finished build of scripts/windows-deps.sh")
endif()
set(_deps_include ${KVGATE_WINDOWS_DEPS}/include)
set(_deps_lib ${KVGATE_WINDOWS_DEPS}/lib)

# _kvgate_dep(TARGET [LIB file] [DEFS ...] [LINK ...])
function(_kvgate_dep target)
  cmake_parse_arguments(ARG "" "LIB" "DEFS;LINK" ${ARGN})
  if(ARG_LIB)
    add_library(${target} STATIC IMPORTED GLOBAL)
    set_target_properties(${target} PROPERTIES IMPORTED_LOCATION ${_deps_lib}/${ARG_LIB})
  else()
    add_library(${target} INTERFACE IMPORTED GLOBAL)
  endif()
  # SYSTEM: their own warnings are not kvgate's.
  set_target_properties(${target} PROPERTIES INTERFACE_SYSTEM_INCLUDE_DIRECTORIES ${_deps_include})
  target_include_directories(${target} INTERFACE ${_deps_include})
  target_compile_definitions(${target} INTERFACE ${ARG_DEFS})
  target_link_libraries(${target} INTERFACE ${ARG_LINK})
endfunction()

find_package(Threads REQUIRED)
# For every file (also the precompiled headers): Windows 10's API (cpp-httplib needs Vista's
# socket calls at least), <windows.h> without min/max macros and the rarely used headers.
add_compile_definitions(_WIN32_WINNT=0x0A00 NOMINMAX WIN32_LEAN_AND_MEAN)
_kvgate_dep(fmt::fmt DEFS FMT_HEADER_ONLY)
_kvgate_dep(nlohmann_json::nlohmann_json)
_kvgate_dep(CLI11::CLI11)
_kvgate_dep(SQLite::SQLite3 LIB libsqlite3.a)
_kvgate_dep(ZLIB::ZLIB LINK z)
_kvgate_dep(PkgConfig::HTTPLIB LINK ws2_32 crypt32)
_kvgate_dep(PkgConfig::XXHASH DEFS XXH_INLINE_ALL)
_kvgate_dep(PkgConfig::ZSTD LIB libzstd.a)
if(KVGATE_BUILD_TESTS)
  _kvgate_dep(GTest::gtest LIB libgtest.a LINK Threads::Threads)
  _kvgate_dep(GTest::gtest_main LIB libgtest_main.a LINK GTest::gtest)
  _kvgate_dep(GTest::gmock LIB libgmock.a LINK GTest::gtest)
endif()
