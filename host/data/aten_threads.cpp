#include "data/aten_threads.h"

#include <dlfcn.h>

#include <ATen/Config.h>
#include <ATen/Parallel.h>

namespace trainyard::host {

// LibTorch has no per-thread setting: at::set_num_threads also sets the
// global count that every new thread copies, and the shared pthreadpool's
// size. OpenMP's own thread count (the nthreads ICV) is per thread, and it is
// what at::get_num_threads() and ATen's parallel_for read (ParallelOpenMP.cpp,
// Parallel-inl.h). Order matters: at::get_num_threads() first runs ATen's
// one-time initialisation of this thread (at::internal::lazy_init_num_threads,
// which sets the thread's OpenMP count to the global one), so that it cannot
// run later and undo the 1 set after it.
//
// omp_set_num_threads is looked up in the OpenMP runtime LibTorch already
// loaded (the wheel's bundled libgomp), not linked: a second OpenMP runtime
// (a system libgomp) beside it would keep its own thread counts and pools.
void use_one_aten_thread_on_this_thread() {
#if AT_PARALLEL_OPENMP
  if (at::get_num_threads() == 1) return;  // also initialises this thread (above)
  using SetNumThreads = void (*)(int);
  static const auto omp_set_num_threads = reinterpret_cast<SetNumThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  if (omp_set_num_threads) omp_set_num_threads(1);
#endif
}

}  // namespace trainyard::host
