#!/usr/bin/env bash
# Build brisk's Debian packages into OUT (default build-deb/):
#   libbrisk0     libbrisk.so.0 and libbrisk-hardened.so.0 (what LD_PRELOAD
#                 names: /usr/lib/<multiarch>/libbrisk.so.0)
#   libbrisk-dev  the headers, the development links, the static library,
#                 the CMake package and the pkg-config file
# from a release build of this tree installed under /usr (CMake's install
# rules), with dpkg-deb; then lintian checks both (an error fails the build).
#   scripts/deb.sh [OUT]     DEB_MAINTAINER="Name <address>" to set the maintainer
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(realpath -m "${1:-$root/build-deb}")
for tool in dpkg-deb dpkg-architecture dpkg-shlibdeps lintian cmake; do
  command -v "$tool" >/dev/null || { echo "deb: FAILED: $tool not found (scripts/setup.sh installs it)" >&2; exit 1; }
done
version=$(sed -n 's/^project(brisk VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
[ -n "$version" ] || { echo "deb: FAILED: no version in CMakeLists.txt's project()" >&2; exit 1; }
debver="$version-1"
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
maintainer=${DEB_MAINTAINER:-$(git -C "$root" log -1 --format='%an <%ae>' 2>/dev/null || true)}
[ -n "$maintainer" ] || { echo "deb: FAILED: no maintainer: set DEB_MAINTAINER=\"Name <address>\"" >&2; exit 1; }

rm -rf "$out"
mkdir -p "$out"
cmake -S "$root" -B "$out/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
  -DCMAKE_INSTALL_LIBDIR="lib/$multiarch" -DBRISK_BUILD_TESTS=OFF -DBRISK_BUILD_BENCH=OFF >"$out/cmake.log"
cmake --build "$out/build" -j"$(nproc)" >>"$out/cmake.log"
stage="$out/stage"
DESTDIR="$stage" cmake --install "$out/build" >>"$out/cmake.log"
lib="usr/lib/$multiarch"

# The two packages' trees.
rt="$out/libbrisk0" dev="$out/libbrisk-dev"
mkdir -p "$rt/$lib" "$dev/$lib" "$rt/DEBIAN" "$dev/DEBIAN"
for so in libbrisk libbrisk-hardened; do
  cp -a "$stage/$lib/$so.so.0" "$stage/$lib/$so.so.$version" "$rt/$lib/"
  cp -a "$stage/$lib/$so.so" "$dev/$lib/"
done
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$rt/$lib"/*.so."$version"
cp -a "$stage/$lib/libbrisk.a" "$stage/$lib/cmake" "$stage/$lib/pkgconfig" "$dev/$lib/"
strip --strip-debug "$dev/$lib/libbrisk.a"
cp -a "$stage/usr/include" "$dev/usr/"
chmod 0644 "$rt/$lib"/*.so."$version" "$dev/$lib/libbrisk.a"

# Each package's copyright (machine-readable) and changelog.
date=$(date -R -d "@$(git -C "$root" log -1 --format=%ct 2>/dev/null || date +%s)")
for pkg in libbrisk0 libbrisk-dev; do
  d="$out/$pkg/usr/share/doc/$pkg"
  mkdir -p "$d"
  {
    echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
    echo "Upstream-Name: brisk"
    echo
    echo "Files: *"
    echo "Copyright: brisk's authors"
    echo "License: MIT"
    sed 's/^$/./; s/^/ /' "$root/LICENSE"
  } >"$d/copyright"
  {
    echo "brisk ($debver) unstable; urgency=medium"
    echo
    echo "  * Packaged from brisk's tree by scripts/deb.sh."
    echo
    echo " -- $maintainer  $date"
  } | gzip -9n >"$d/changelog.Debian.gz"
done

installed_size() { du -sk --exclude=DEBIAN "$1" | cut -f1; }

# The runtime package: its shared libraries, their dependencies (dpkg-shlibdeps),
# the shlibs file others' dependencies come from, the ldconfig trigger.
shlibdeps=$(cd "$out" && mkdir -p debian && touch debian/control &&
  dpkg-shlibdeps -O -e"libbrisk0/$lib/libbrisk.so.$version" -e"libbrisk0/$lib/libbrisk-hardened.so.$version" 2>/dev/null |
  sed -n 's/^shlibs:Depends=//p')
rm -rf "$out/debian"
[ -n "$shlibdeps" ] || { echo "deb: FAILED: dpkg-shlibdeps found no dependencies of the libraries" >&2; exit 1; }
cat >"$rt/DEBIAN/control" <<EOF
Package: libbrisk0
Source: brisk
Version: $debver
Architecture: $arch
Multi-Arch: same
Maintainer: $maintainer
Installed-Size: $(installed_size "$rt")
Depends: $shlibdeps
Section: libs
Priority: optional
Description: fast general-purpose memory allocator (shared libraries)
 brisk replaces malloc, the rest of the C allocation functions, glibc's
 extras and C++ operator new and delete, for a whole process through
 LD_PRELOAD=/usr/lib/$multiarch/libbrisk.so.0 or linked. It has per-thread
 heaps, cheap frees from other threads, first-class heaps and session
 arenas, and returns memory to the system when it is no longer used.
 .
 This package has libbrisk.so.0 and its hardened build, libbrisk-hardened.so.0.
EOF
printf 'libbrisk 0 libbrisk0 (>= %s)\nlibbrisk-hardened 0 libbrisk0 (>= %s)\n' "$version" "$version" >"$rt/DEBIAN/shlibs"
echo "activate-noawait ldconfig" >"$rt/DEBIAN/triggers"

cat >"$dev/DEBIAN/control" <<EOF
Package: libbrisk-dev
Source: brisk
Version: $debver
Architecture: $arch
Multi-Arch: same
Maintainer: $maintainer
Installed-Size: $(installed_size "$dev")
Depends: libbrisk0 (= $debver)
Section: libdevel
Priority: optional
Description: fast general-purpose memory allocator (development files)
 brisk replaces malloc, the rest of the C allocation functions, glibc's
 extras and C++ operator new and delete, for a whole process through
 LD_PRELOAD or linked. It has per-thread heaps, cheap frees from other
 threads, first-class heaps and session arenas.
 .
 This package has the C header (brisk.h), the C++ headers (an allocator
 and std::pmr resources), the static library, the CMake package
 (find_package(brisk)) and the pkg-config file (brisk.pc).
EOF

for pkg in libbrisk0 libbrisk-dev; do
  d="$out/$pkg"
  (cd "$d" && find usr -type f -exec md5sum {} + | sort -k2) >"$d/DEBIAN/md5sums"
  find "$d" -type d -exec chmod 0755 {} +
  chmod 0644 "$d"/DEBIAN/*
  dpkg-deb --root-owner-group -Zxz --build "$d" "$out/${pkg}_${debver}_${arch}.deb" >/dev/null
done

# lintian: errors fail the build; its other tags are printed.
status=0
for deb in "$out/libbrisk0_${debver}_${arch}.deb" "$out/libbrisk-dev_${debver}_${arch}.deb"; do
  report=$(lintian --tag-display-limit 0 "$deb" 2>&1 | grep -v '^running with root privileges' || true)
  [ -n "$report" ] && sed 's/^/deb: lintian: /' <<<"$report"
  if grep -q '^E:' <<<"$report"; then status=1; fi
done
if [ $status -ne 0 ]; then echo "deb: FAILED: lintian reports errors (above)" >&2; exit 1; fi
echo "deb: $out/libbrisk0_${debver}_${arch}.deb and $out/libbrisk-dev_${debver}_${arch}.deb (lintian: no errors)"
