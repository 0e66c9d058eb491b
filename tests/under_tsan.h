/* UNDER_TSAN: 1 in the ThreadSanitizer build (gcc's __SANITIZE_THREAD__,
 * clang's __has_feature), else 0. The tests scale their volume down there
 * and leave out what it does not support. */
#ifndef BRISK_TEST_UNDER_TSAN_H
#define BRISK_TEST_UNDER_TSAN_H

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif

#endif
