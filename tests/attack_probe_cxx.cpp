// The C++ modes of the detection table (see attack_probe.c; same output,
// tests/attack_probe.h): a block released by the wrong function.
//
//   attack_probe_cxx MODE
//
//   mismatch-new-free          operator new (a 64-byte object), then free()
//   mismatch-new-array-delete  new[] (4 such objects), then delete (scalar)
//
// The objects are trivially destructible, so new[] stores no count before
// the array and delete passes the pointer new[] returned: the only mistake
// is the function. Built with -fno-sized-deallocation, so that delete calls
// operator delete(void *) and no size enters into it. The allocator under
// test sees the mistake only if the preloaded library replaces operator
// new and delete; otherwise libstdc++'s forward to malloc and free. The
// probe says which library it got them from:
//   attack_probe: MODE: operator new from FILE, operator delete from FILE
#include <dlfcn.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <new>

#include "attack_probe.h"

namespace {

struct Obj {
  char bytes[64];
};

enum { KIND_NEW = 1, KIND_NEW_ARRAY = 2 };
void release(void *p, int kind) {
  if (kind == KIND_NEW) delete static_cast<Obj *>(p);
  else delete[] static_cast<Obj *>(p);
}

void mismatch_new_free() {
  Obj *o = new Obj;
  std::memset(o, 0x5a, sizeof *o);
  free(ap_opaque(o));
  ap_say("attack done");
  for (int i = 0; i < 64; i++) ap_adopt_kind(ap_opaque(new Obj), sizeof(Obj), KIND_NEW);
  ap_after(64, 2048);
}

void mismatch_new_array_delete() {
  Obj *o = new Obj[4];
  std::memset(o, 0x5a, 4 * sizeof *o);
  delete static_cast<Obj *>(ap_opaque(o));
  ap_say("attack done");
  for (int i = 0; i < 64; i++) ap_adopt_kind(ap_opaque(new Obj[4]), 4 * sizeof(Obj), KIND_NEW_ARRAY);
  ap_after(4 * sizeof(Obj), 512);
}

const struct {
  const char *name;
  void (*run)();
} k_modes[] = {
    {"mismatch-new-free", mismatch_new_free},
    {"mismatch-new-array-delete", mismatch_new_array_delete},
};

}  // namespace

int main(int argc, char **argv) {
  if (argc == 2 && std::strcmp(argv[1], "--list") == 0) {
    for (const auto &m : k_modes) std::printf("%s\n", m.name);
    return 0;
  }
  for (const auto &m : k_modes)
    if (argc == 2 && std::strcmp(argv[1], m.name) == 0) {
      ap_mode = m.name;
      ap_release = release;
      Dl_info in_new, in_delete;
      void *n = dlsym(RTLD_DEFAULT, "_Znwm"), *d = dlsym(RTLD_DEFAULT, "_ZdlPv");
      if (n && d && dladdr(n, &in_new) && dladdr(d, &in_delete) && in_new.dli_fname && in_delete.dli_fname)
        ap_say("operator new from %s, operator delete from %s", in_new.dli_fname, in_delete.dli_fname);
      m.run();
      return 0;
    }
  std::fprintf(stderr, "usage: attack_probe_cxx MODE (attack_probe_cxx --list prints the modes)\n");
  return 2;
}
