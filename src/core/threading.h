// Threading context, passed explicitly to every parallel kernel (no global pool).
//
// Parallel loops only ever split disjoint outputs (rows, output columns, channel blocks),
// never a reduction, so the result is bit-identical for any thread count.
#pragma once

namespace mb {

struct ThreadContext {
  int n_threads = 1;
};

// The number of hardware threads OpenMP would use by default.
int default_thread_count();

}  // namespace mb
