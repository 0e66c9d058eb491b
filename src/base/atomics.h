/* Atomics named by their memory order, over C11 <stdatomic.h>. */
#ifndef BRISK_ATOMICS_H
#define BRISK_ATOMICS_H

#include <stdatomic.h>
#include <stdint.h>

#define atomic_load_relaxed(p) atomic_load_explicit((p), memory_order_relaxed)
#define atomic_load_acquire(p) atomic_load_explicit((p), memory_order_acquire)
#define atomic_store_relaxed(p, v) atomic_store_explicit((p), (v), memory_order_relaxed)
#define atomic_store_release(p, v) atomic_store_explicit((p), (v), memory_order_release)
#define atomic_exchange_acq_rel(p, v) atomic_exchange_explicit((p), (v), memory_order_acq_rel)
#define atomic_cas_weak_release(p, e, d) \
  atomic_compare_exchange_weak_explicit((p), (e), (d), memory_order_release, memory_order_relaxed)
#define atomic_cas_strong_acq_rel(p, e, d) \
  atomic_compare_exchange_strong_explicit((p), (e), (d), memory_order_acq_rel, memory_order_acquire)
#define atomic_add_relaxed(p, v) atomic_fetch_add_explicit((p), (v), memory_order_relaxed)
#define atomic_sub_relaxed(p, v) atomic_fetch_sub_explicit((p), (v), memory_order_relaxed)

/* A counter written by one thread and read by others: a plain load and store
 * (no locked instruction), still free of data races in C11 terms. */
#define atomic_bump_single_writer(p, v) \
  atomic_store_relaxed((p), atomic_load_relaxed(p) + (v))

/* A plain field written under a lock and read without it (where any value
 * it held is a right answer): relaxed accesses, free of data races. */
#define field_load_relaxed(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define field_store_relaxed(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

#endif
