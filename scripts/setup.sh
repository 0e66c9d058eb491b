#!/usr/bin/env bash
# Installs what brisk's build, tests and benchmarks need on Debian.
# Runs apt-get only as root and only for packages that are missing;
# otherwise it says what is missing and how to install it.
set -u
PKGS=(cmake gcc g++ make pkg-config python3 strace valgrind clang libclang-rt-14-dev
      libmimalloc2.0 libjemalloc2 libtcmalloc-minimal4 libtbbmalloc2
      libzmq3-dev redis-server redis-tools python3-matplotlib google-perftools spin)
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
    apt-get install -y --no-install-recommends "${missing[@]}" >>/tmp/brisk-setup.log 2>&1 \
      || { echo "setup: apt-get failed, see /tmp/brisk-setup.log"; exit 0; }
  fi
else
  echo "setup: missing packages: ${missing[*]}"
  echo "setup: install them with: sudo apt-get install ${missing[*]}"
fi
exit 0
