#include "alloc/hardened.h"

#include <string.h>

#include "alloc/free_fast.h"
#include "base/atomics.h"
#include "heaps/block.h"
#include "heaps/page.h"
#include "os/platform.h"
#include "runtime/report.h"
#include "segments/registry.h"
#include "segments/size_class.h"

static const char *const kind_names[] = {"malloc", "operator new", "operator new[]"};

void hardened_mark(void *p, enum alloc_kind kind) {
  page_t *pg;
  uint8_t *slot = p ? hardened_kind_entry(registry_lookup((uintptr_t)p), p, &pg) : NULL;
  if (slot == NULL) return;
  if (!(pg->flags & PAGE_HUGE) && field_load_relaxed(&pg->alloc_kind) == 0) {
    /* The page's first block of new in this life of its span: the table
     * entries of its blocks may still hold kinds of the span's life before
     * (blocks never released, as a destroyed heap's), which no release
     * read while the page had only malloc's blocks. A class page's are
     * cleared; a large span holds the one block. Only the owner hands out
     * the page's blocks, so only it writes the flag. */
    segment_t *seg = segment_of_page(pg);
    if (pg->size_class != 0)
      memset(&seg->kinds[((uintptr_t)pg->start - (uintptr_t)seg) >> 4], KIND_MALLOC, pg->span_bytes >> 4);
    field_store_relaxed(&pg->alloc_kind, 1);
  }
  *slot = (uint8_t)kind;
}

static enum alloc_kind expected_kind(brisk_fn_t fn) {
  switch (fn) {
    case FN_DELETE:
    case FN_DELETE_SIZED: return KIND_NEW;
    case FN_DELETE_ARRAY:
    case FN_DELETE_ARRAY_SIZED: return KIND_NEW_ARRAY;
    default: return KIND_MALLOC;
  }
}

/* Could a request of `size` bytes (aligned to `alignment` if over 16) have
 * been served from class c? Without the alignment (a sized delete that does
 * not name it), any over-alignment that leads to c will do. */
static bool class_explains(size_t size, size_t alignment, unsigned c) {
  size_t n = size == 0 ? 1 : size;
  if (alignment > 16) return size_to_class((n + alignment - 1) & ~(alignment - 1)) == c;
  if (size_to_class(size) == c) return true;
  for (size_t al = 32; al <= SLICE_SIZE; al <<= 1) {
    size_t r = (n + al - 1) & ~(al - 1);
    if (r <= MEDIUM_MAX && size_to_class(r) == c) return true;
  }
  return false;
}

bool hardened_release_ok(void *p, brisk_fn_t fn, bool sized, size_t size, size_t alignment) {
  page_t *pg = NULL;
  const uint8_t *slot = hardened_kind_slot(p, &pg);
  if (slot == NULL) return true; /* not a block: the ordinary checks report it */
  enum alloc_kind want = expected_kind(fn);
  /* A block whose first word decodes as a free-list link and whose kind is
   * malloc's may have been freed already (every release resets the kind):
   * the ordinary checks tell a double free from a live block whose data
   * looks so. Only a release that expects another kind needs to know which
   * (a double delete, or delete of a live malloc block), and only the owner
   * may walk the page's lists to find out. Any other kind means a live
   * block, whatever its data: checked, and reset, below. */
  if (pg->size_class != 0 && *slot == KIND_MALLOC && block_looks_free((const block_t *)p)) {
    if (want == KIND_MALLOC ||
        atomic_load_relaxed(&segment_of_page(pg)->owner_tid) != os_thread_id() ||
        page_lists_contain(pg, (const block_t *)p))
      return true;
  }
  if (*slot != want && *slot <= KIND_NEW_ARRAY) {
    report_error("%s(%p): mismatched release: the block was allocated by %s", fn_name(fn), p,
                 kind_names[*slot]);
    return false;
  }
  if (sized) {
    size_t usable = page_usable_size(pg);
    /* As alloc_aligned rounded it: sizes of over-aligned blocks go up to a
     * multiple of the alignment. */
    size_t rounded = size;
    if (alignment > 16) {
      rounded = size == 0 ? 1 : size;
      rounded = (rounded + alignment - 1) & ~(alignment - 1);
    }
    bool exact = fn == FN_DELETE_SIZED || fn == FN_DELETE_ARRAY_SIZED;
    bool wrong = rounded > usable;
    /* C++ sized delete must pass the size given to new: it maps to the
     * block's class. free_sized may pass any size up to the usable one. */
    if (exact && !wrong) {
      if (pg->size_class != 0) wrong = !class_explains(size, alignment, pg->size_class);
      else if (pg->prof_slot != 0) wrong = false; /* sampled by the profiler: any size */
      else wrong = rounded <= MEDIUM_MAX || usable - rounded >= SLICE_SIZE + HARDENED_GUARD;
    }
    if (wrong) {
      report_error("%s(%p): size %zu given to a sized release does not match the block (size class %zu)",
                   fn_name(fn), p, size, usable);
      return false;
    }
  }
  /* Written only when it changes: most blocks are malloc's, and a store to
   * a page of the table never written faults it in (and, with other
   * threads running, shoots down their TLB entries for the zero page). */
  if (*slot != KIND_MALLOC) *(uint8_t *)slot = KIND_MALLOC; /* a table entry or a huge page's:
                                                            hardened_malloc_kind is malloc's */
  return true;
}

/* free_inline's hardened release of anything but its common case: the
 * kind check first (a pointer the bounded registry lookup did not place,
 * NULL included, takes the default build's way). */
void free_hardened_checked(void *p, segment_t *seg, brisk_fn_t fn) {
  if (seg == NULL) {
    free_raw(p, fn);
    return;
  }
  if (hardened_release_checked(p, seg, fn)) free_at(p, seg, fn);
}
