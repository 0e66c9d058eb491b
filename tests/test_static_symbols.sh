#!/usr/bin/env bash
# libbrisk.a defines only brisk's public names: `brisk_*`, the standard
# malloc family and C23's names, glibc's extras, and C++ operator new and
# delete (brisk's internal functions are local to the library's one
# object: CMakeLists.txt links it with `ld -r` and makes its hidden
# symbols local), and a program linked with it statically runs on brisk.
# The Rust crate's static library is checked by rust/brisk-sys/tests/symbols.rs.
set -u
build="${BRISKTEST_BUILD_DIR:?}"
SKIP_NAME="test_static_symbols"
. "$(dirname "${BASH_SOURCE[0]}")/skip.sh"
command -v nm >/dev/null || skip "nm (binutils) is not installed"
lib="$build/libbrisk.a"
[ -f "$lib" ] || { echo "$SKIP_NAME: FAIL: $lib not built"; exit 1; }
fail=0
standard=" malloc free calloc realloc reallocarray posix_memalign aligned_alloc memalign valloc pvalloc"
standard+=" malloc_usable_size free_sized free_aligned_sized malloc_trim mallinfo mallinfo2 malloc_stats malloc_info mallopt "
names=$(nm --defined-only -g "$lib" | awk 'NF == 3 { print $3 }' | sort -u)
count=$(wc -w <<<"$names")
others=()
for n in $names; do
  case "$n" in
    brisk_*) ;;
    _Znwm* | _Znam* | _ZdlPv* | _ZdaPv*) ;; # operator new, new[], delete, delete[]
    *) [[ "$standard" == *" $n "* ]] || others+=("$n") ;;
  esac
done
if [ ${#others[@]} -ne 0 ]; then
  echo "$SKIP_NAME: FAIL: $lib defines ${#others[@]} names that are not public: ${others[*]:0:20}"
  fail=1
else
  echo "$SKIP_NAME: ok: $lib defines $count names, all public"
fi
grep -qx brisk_malloc <<<"$names" || { echo "$SKIP_NAME: FAIL: no brisk_malloc in $lib"; fail=1; }

# A program linked with it statically allocates through brisk.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/prog.c" <<'C'
#include <brisk.h>
#include <stdio.h>
#include <stdlib.h>
int main(void) {
  void *p = malloc(100);
  if (!brisk_owns(p)) { puts("malloc is not brisk's"); return 1; }
  free(p);
  puts("ok");
  return 0;
}
C
src="${BRISKTEST_SOURCE_DIR:?}"
if cc -o "$tmp/prog" "$tmp/prog.c" -I"$src/include" "$lib" -lpthread -ldl 2>"$tmp/cc.err" && [ "$("$tmp/prog")" = ok ]; then
  echo "$SKIP_NAME: ok: a program linked with $lib allocates through brisk"
else
  echo "$SKIP_NAME: FAIL: a program linked with $lib:"; sed 's/^/    /' "$tmp/cc.err"; fail=1
fi
[ $fail -eq 0 ]
