#include "train/rank_agreement.h"

#include <ATen/record_function.h>

#include "distributed/communicator.h"
#include "train/profiler.h"

namespace trainyard::host {

Votes RankAgreement::before_epoch(Votes mine) {
  if (!comm_) return mine;
  const auto sums = comm_->sum({mine.stop ? 1.0 : 0.0, mine.signal ? 1.0 : 0.0});
  mine.stop = sums[0] > 0;
  mine.signal = sums[1] > 0;
  return mine;
}

Votes RankAgreement::before_step(Votes mine) {
  if (!comm_) return mine;
  RECORD_USER_SCOPE(trace_scope::ranks);
  const auto sums = comm_->sum(
      {mine.has_batch ? 1.0 : 0.0, mine.stop ? 1.0 : 0.0, mine.signal ? 1.0 : 0.0, mine.checkpoint ? 1.0 : 0.0});
  return {sums[0] > 0, sums[1] > 0, sums[2] > 0, sums[3] > 0};
}

}  // namespace trainyard::host
