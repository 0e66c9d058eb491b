#include "size_class.h"

/* size_class.h's class_after_pow2 and past_pow2_class index this table:
 * they change with it (test_api checks every size up to 64 KiB). */
const uint32_t brisk_class_size[CLASS_COUNT] = {
  0, 16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240,
  256, 288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 832, 896,
  960, 1024, 1088, 1152, 1280, 1408, 1536, 1664, 1792, 1920, 2048, 2112, 2304,
  2560, 2816, 3072, 3328, 3584, 3840, 4096, 4160, 4608, 5120, 5632, 6144,
  6656, 7168, 7680, 8192, 8256, 9216, 10240, 11264, 12288, 13312, 14336,
  15360, 16384, 18432, 20480, 22528, 24576, 26624, 28672, 30720, 32768,
  36864, 40960, 45056, 49152, 53248, 57344, 61440, 65536
};

_Static_assert(CLASS_COUNT == 85, "size class table and CLASS_COUNT disagree");
