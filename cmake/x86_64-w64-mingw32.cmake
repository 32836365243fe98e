# Cross toolchain for x86-64 Windows: Debian's mingw-w64 with POSIX threads (the -posix
# compilers: std::thread and std::mutex through winpthreads, linked statically).
#
# The libraries kvgate links are not packaged for mingw in Debian: scripts/windows-deps.sh
# builds them from Debian's source packages into KVGATE_WINDOWS_DEPS (include/, lib/), and
# cmake/windows_deps.cmake turns them into the targets the Linux build finds with
# find_package. Test binaries run under wine, so ctest and gtest discovery work unchanged.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)

set(CMAKE_C_COMPILER x86_64-w64-mingw32-gcc-posix)
set(CMAKE_CXX_COMPILER x86_64-w64-mingw32-g++-posix)
set(CMAKE_RC_COMPILER x86_64-w64-mingw32-windres)

set(CMAKE_FIND_ROOT_PATH /usr/x86_64-w64-mingw32)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# One self-contained .exe: no libstdc++/winpthreads DLLs to ship beside it.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static -static-libgcc -static-libstdc++")

find_program(KVGATE_WINE NAMES wine64 wine PATHS /usr/lib/wine NO_DEFAULT_PATH)
if(NOT KVGATE_WINE)
  find_program(KVGATE_WINE NAMES wine64 wine REQUIRED)
endif()
set(CMAKE_CROSSCOMPILING_EMULATOR ${KVGATE_WINE})
