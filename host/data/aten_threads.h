#pragma once
// ATen's intra-op threads on a thread that is itself one of many workers.
namespace trainyard::host {

/// Makes ATen's operators called from this thread run single-threaded, without
/// touching other threads or ATen's global count (at::set_num_threads). For
/// the loader's decode threads: they are the parallelism. With ATen's OpenMP
/// backend a thread that is not the training thread otherwise takes the global
/// count on its first parallel operator and starts an OpenMP team of its own
/// of that many threads for each one (15 decode threads on 16 CPUs: 15 teams
/// of 16). Afterwards at::get_num_threads() on this thread says 1. Other
/// backends: nothing to do (their pool is shared), and nothing is done.
///
/// Example (a worker thread's first line):
///   std::thread([] { use_one_aten_thread_on_this_thread(); decode(); });
void use_one_aten_thread_on_this_thread();

}  // namespace trainyard::host
