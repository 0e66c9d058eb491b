/* Intrusive doubly-linked lists, for the descriptors brisk keeps in lists
 * (pages in class queues, segments in a heap's set, the pool, the huge
 * cache and the list of huge tails).
 *
 *   list ─► first ⇄ ... ⇄ last        an element holds its own NEXT and
 *                                      PREV fields; one element may sit in
 *                                      two lists through two pairs of them
 *
 * A list is any struct with `first` and `last`; the macros name the
 * element's link fields, so that segment_t can be in a set (next, prev)
 * and in the tail list (tail_next, tail_prev) at once. Arguments are
 * evaluated more than once: pass plain variables. */
#ifndef BRISK_LIST_H
#define BRISK_LIST_H

#include <stddef.h>

#define LIST_PUSH_FRONT(list, x, NEXT, PREV)                                   \
  do {                                                                         \
    (x)->PREV = NULL;                                                          \
    (x)->NEXT = (list)->first;                                                 \
    if ((list)->first) (list)->first->PREV = (x);                              \
    else (list)->last = (x);                                                   \
    (list)->first = (x);                                                       \
  } while (0)

#define LIST_PUSH_BACK(list, x, NEXT, PREV)                                    \
  do {                                                                         \
    (x)->NEXT = NULL;                                                          \
    (x)->PREV = (list)->last;                                                  \
    if ((list)->last) (list)->last->NEXT = (x);                                \
    else (list)->first = (x);                                                  \
    (list)->last = (x);                                                        \
  } while (0)

#define LIST_REMOVE(list, x, NEXT, PREV)                                       \
  do {                                                                         \
    if ((x)->PREV) (x)->PREV->NEXT = (x)->NEXT;                                \
    else (list)->first = (x)->NEXT;                                            \
    if ((x)->NEXT) (x)->NEXT->PREV = (x)->PREV;                                \
    else (list)->last = (x)->PREV;                                             \
    (x)->NEXT = (x)->PREV = NULL;                                              \
  } while (0)

#endif
