#pragma once
// How the ranks of a data-parallel run agree on the loop's decisions. One
// protocol, in one place, because a rank that decides alone waits forever at
// the next collective of the others (NCCL and Gloo have no way out of it but
// the timeout):
//
//   when                           every rank sends (summed)               all ranks then
//   before each epoch              stop, signal                            stop when any rank stops
//   before each iteration's step   has a batch, stop, signal, checkpoint   see Votes
//
// Every rank calls the same function at the same point, in the same order
// (the EpochLoop does, and nothing else of the loop decides per rank). A
// stop waits for the end of an accumulation (iter_size) on every rank, so
// that no update is cut short; a rank whose shard ran out takes part in the
// others' updates with zero gradients until no rank has a batch. In one
// process each call returns this rank's own votes without communicating.
namespace trainyard::host {

class Communicator;

struct Votes {
  bool has_batch = true;    ///< a batch to train on (after agreement: any rank has one)
  bool stop = false;        ///< stop at this boundary (after agreement: any rank stops)
  bool signal = false;      ///< ... because of a stop signal: the run ends resumable
  bool checkpoint = false;  ///< checkpoint before this batch (after agreement: any rank asks)
};

class RankAgreement {
 public:
  /// `comm`: null in one process.
  explicit RankAgreement(Communicator* comm) : comm_(comm) {}
  bool spans_ranks() const { return comm_ != nullptr; }
  /// Before each epoch (has_batch and checkpoint are not agreed).
  Votes before_epoch(Votes mine);
  /// Before each iteration's step, once its batch was fetched (or not).
  Votes before_step(Votes mine);

 private:
  Communicator* comm_;
};

}  // namespace trainyard::host
