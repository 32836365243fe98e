# Cross toolchain for arm64 (aarch64) Linux, as on NVIDIA Jetson boards.
#
# Debian's cross compiler (g++-<N>-aarch64-linux-gnu) with the libraries from multiarch
# `:arm64` packages (/usr/lib/aarch64-linux-gnu). KVGATE_CROSS_GCC_VERSION picks the
# compiler version (default 11: JetPack 6 / Ubuntu 22.04 ship GCC 11). Test binaries run
# under qemu-user, so ctest and gtest discovery work unchanged.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(KVGATE_CROSS_GCC_VERSION 11 CACHE STRING "version of aarch64-linux-gnu-g++ to use")
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc-${KVGATE_CROSS_GCC_VERSION})
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++-${KVGATE_CROSS_GCC_VERSION})

# Headers and libraries of the target come from the multiarch locations only.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
set(CMAKE_FIND_ROOT_PATH / /usr/aarch64-linux-gnu)
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

# The arm64 dynamic loader and libraries are installed by multiarch under /, so qemu needs
# no -L prefix beyond the default.
find_program(KVGATE_QEMU_AARCH64 qemu-aarch64 REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR ${KVGATE_QEMU_AARCH64})
