# The build environment of the setup and test scripts (sourced). Compiled objects are cached
# outside the checkout by ccache (a test package of setup.sh), with paths taken relative to the
# checkout: a fresh clone of code built before, in any folder, compiles only what changed.
# CMake reads the launcher when it first configures a build dir.
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
  export CMAKE_CXX_COMPILER_LAUNCHER="${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}"
  # What ccache needs to cache files compiled with a precompiled header (KVGATE_PCH).
  export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"
fi
