#include "core/threading.h"

#include <omp.h>

namespace mb {

int default_thread_count() { return omp_get_num_procs() > 0 ? omp_get_num_procs() : 1; }

}  // namespace mb
