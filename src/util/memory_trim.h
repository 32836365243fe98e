// Gives freed heap memory back to the system, so the resident size falls after a peak
// (glibc keeps it in its arenas otherwise; Windows' heap compacts on request).
#pragma once

#include <malloc.h>

namespace kvgate::util {

inline void trim_heap() {
#ifdef _WIN32
  _heapmin();
#else
  ::malloc_trim(0);
#endif
}

}  // namespace kvgate::util
