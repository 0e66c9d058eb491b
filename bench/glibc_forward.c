/* A preload library that sends the malloc family to glibc's own malloc.
 *
 * Debian's redis-server links libjemalloc, so "no LD_PRELOAD" is not a
 * glibc baseline for it. Preloading this library puts glibc's allocator
 * (reached through its __libc_* entry points) in front of jemalloc. The
 * harness uses it for the glibc column of every workload whose program
 * links another malloc (redis; the session burst, which links brisk).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

#define EXPORT __attribute__((visibility("default")))

EXPORT void *malloc(size_t n) { return __libc_malloc(n); }
EXPORT void free(void *p) { __libc_free(p); }
EXPORT void *calloc(size_t n, size_t s) { return __libc_calloc(n, s); }
EXPORT void *realloc(void *p, size_t n) { return __libc_realloc(p, n); }
EXPORT void *memalign(size_t a, size_t n) { return __libc_memalign(a, n); }
EXPORT void *aligned_alloc(size_t a, size_t n) { return __libc_memalign(a, n); }
EXPORT void *valloc(size_t n) { return __libc_valloc(n); }
EXPORT void *pvalloc(size_t n) { return __libc_pvalloc(n); }
EXPORT void cfree(void *p) { __libc_free(p); }

EXPORT int posix_memalign(void **out, size_t a, size_t n) {
  if (a < sizeof(void *) || (a & (a - 1))) return EINVAL;
  void *p = __libc_memalign(a, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

EXPORT void *reallocarray(void *p, size_t n, size_t s) {
  size_t total;
  if (__builtin_mul_overflow(n, s, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  return __libc_realloc(p, total);
}

/* glibc has no __libc_ name for this one, and a library loaded after us
 * (jemalloc in redis) may define it too, so ask libc.so.6 itself. */
typedef size_t (*usable_fn)(void *);
static usable_fn libc_usable;

EXPORT size_t malloc_usable_size(void *p) {
  usable_fn f = __atomic_load_n(&libc_usable, __ATOMIC_ACQUIRE);
  if (!f) {
    void *h = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    f = h ? (usable_fn)dlsym(h, "malloc_usable_size") : NULL;
    if (!f) return 0;
    __atomic_store_n(&libc_usable, f, __ATOMIC_RELEASE);
  }
  return f(p);
}
