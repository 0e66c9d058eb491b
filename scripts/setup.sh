#!/usr/bin/env bash
# Installs what brisk's build, tests and benchmarks need on Debian.
# Runs apt-get only as root and only for packages that are missing; fails,
# naming them, when any is still missing (not root, or apt-get could not).
set -u
PKGS=(cmake gcc g++ make pkg-config python3 strace valgrind clang libclang-rt-14-dev
      libmimalloc2.0 libjemalloc2 libtcmalloc-minimal4 libtbbmalloc2
      libzmq3-dev redis-server redis-tools python3-matplotlib google-perftools spin
      dpkg-dev lintian)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y --no-install-recommends "${missing[@]}" >/tmp/brisk-setup.log 2>&1; then
    apt-get update >>/tmp/brisk-setup.log 2>&1 || true
    apt-get install -y --no-install-recommends "${missing[@]}" >>/tmp/brisk-setup.log 2>&1 || true
  fi
fi
# What is still missing fails the setup, by name: the tests that need it
# could not run.
still=()
for p in "${missing[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || still+=("$p")
done
if [ ${#still[@]} -ne 0 ]; then
  echo "setup: FAILED: packages not installed: ${still[*]}" >&2
  if [ "$(id -u)" = 0 ]; then
    echo "setup: apt-get's output is in /tmp/brisk-setup.log" >&2
  else
    echo "setup: install them with: sudo apt-get install ${still[*]}" >&2
  fi
  exit 1
fi
exit 0
