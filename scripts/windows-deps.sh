#!/usr/bin/env bash
# Builds the libraries kvgate links, for x86-64 Windows (mingw-w64), from Debian's source
# packages, into a cache outside the checkout; prints that folder (include/, lib/) last.
#
# Debian packages these libraries for Linux only. The header-only ones are used as installed
# (nlohmann/json, CLI11, fmt in header-only mode, xxHash inlined); zlib comes from
# libz-mingw-w64-dev; cpp-httplib (its upstream single header: Debian's is split for a
# shared library), SQLite (its amalgamation, made with tclsh) and zstd are built from
# `apt-get source`, and GoogleTest from /usr/src/googletest. The source lists are kvgate's
# own (an apt state folder in the cache): the machine's apt configuration is not changed.
set -euo pipefail
cd "$(dirname "$0")/.."

readonly RECIPE=1
cache="${XDG_CACHE_HOME:-$HOME/.cache}/kvgate"
deps="$cache/windows-deps-$RECIPE"
log() { printf '[windows-deps] %s\n' "$*" >&2; }

if [[ -f "$deps/DEPS_OK" ]]; then
  log "cached: $deps"
  echo "$deps"
  exit 0
fi

packages=(g++-mingw-w64-x86-64-posix gcc-mingw-w64-x86-64-posix libz-mingw-w64-dev wine64 tcl dpkg-dev
          nlohmann-json3-dev libcli11-dev libfmt-dev libxxhash-dev googletest)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
sudo_cmd=()
[[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
if ((${#missing[@]})); then
  log "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -q >/dev/null
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

work="$cache/build/windows-deps"
rm -rf "$work" "$deps"
mkdir -p "$work/apt/lists/partial" "$work/apt/archives/partial" "$work/src" "$deps/include" "$deps/lib"

# Source lists of the release this machine runs, read by apt-get through its own state folder.
codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
cat >"$work/apt/sources.list" <<LIST
deb-src [signed-by=$keyring] http://deb.debian.org/debian $codename main
deb-src [signed-by=$keyring] http://deb.debian.org/debian $codename-updates main
deb-src [signed-by=$keyring] http://deb.debian.org/debian-security $codename-security main
LIST
apt_opts=(-o "Dir::Etc::SourceList=$work/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$work/apt/lists" -o "Dir::Cache=$work/apt" -o APT::Sandbox::User=root)
log "reading Debian's source lists ($codename)"
apt-get "${apt_opts[@]}" update -q >/dev/null

# Downloads and unpacks source package $1 into $work/src/$1, newest version first; a mirror
# may lack the newest security upload's files, so older versions are tried in turn.
fetch_source() {
  local name=$1 version
  mkdir -p "$work/src/dl-$name"
  for version in $(apt-cache "${apt_opts[@]}" showsrc "$name" | sed -n 's/^Version: //p' | sort -rV); do
    if (cd "$work/src/dl-$name" && apt-get "${apt_opts[@]}" source -q --download-only "$name=$version" >/dev/null 2>&1); then
      mkdir -p "$work/src/$name"
      tar -xf "$(ls "$work/src/dl-$name"/*.orig.tar.* | grep -v -e '\.asc$' -e 'orig-' | head -1)" \
        -C "$work/src/$name" --strip-components=1
      log "source: $name $version"
      return 0
    fi
  done
  log "no source of $name could be downloaded"
  return 1
}
fetch_source cpp-httplib
fetch_source sqlite3
fetch_source libzstd

readonly CC=x86_64-w64-mingw32-gcc-posix AR=x86_64-w64-mingw32-ar
jobs=$(nproc)

# Header-only libraries: links into the system's headers, so nothing else of /usr/include
# (glibc's) is seen by the cross compiler.
for h in nlohmann CLI fmt xxhash.h; do ln -s "/usr/include/$h" "$deps/include/$h"; done
cp "$work/src/cpp-httplib/httplib.h" "$deps/include/"

log "SQLite amalgamation"
(cd "$work/src/sqlite3" && ./configure -q >/dev/null && make -s sqlite3.c >/dev/null 2>&1)
"$CC" -O2 -DSQLITE_THREADSAFE=1 -DSQLITE_OMIT_LOAD_EXTENSION -c "$work/src/sqlite3/sqlite3.c" -o "$work/sqlite3.o"
"$AR" rcs "$deps/lib/libsqlite3.a" "$work/sqlite3.o"
cp "$work/src/sqlite3/sqlite3.h" "$deps/include/"

log "zstd"
make -s -C "$work/src/libzstd/lib" -j "$jobs" libzstd.a CC="$CC" AR="$AR" ZSTD_NO_ASM=1 >"$work/zstd.log" 2>&1 ||
  { tail -20 "$work/zstd.log" >&2; exit 1; }
cp "$work/src/libzstd/lib/libzstd.a" "$deps/lib/"
cp "$work/src/libzstd/lib"/{zstd.h,zdict.h,zstd_errors.h} "$deps/include/"

log "GoogleTest"
cmake -S /usr/src/googletest -B "$work/gtest" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/x86_64-w64-mingw32.cmake" -DCMAKE_INSTALL_PREFIX="$deps" \
  -Dgtest_disable_pthreads=OFF >/dev/null
cmake --build "$work/gtest" -j "$jobs" >/dev/null
cmake --install "$work/gtest" >/dev/null

rm -rf "$work"
echo "recipe $RECIPE" >"$deps/DEPS_OK"
log "done: $deps"
echo "$deps"
