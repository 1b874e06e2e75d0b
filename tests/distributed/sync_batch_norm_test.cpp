// Synchronized batch norm's statistics in reduced precision: two real ranks
// (Gloo over a file rendezvous, one thread each) normalizing float16 and
// bfloat16 activations whose per-rank count exceeds float16's range.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <chrono>
#include <functional>
#include <thread>

#include "distributed/communicator.h"
#include "support/support.h"
#include "trainyard/sync_batch_norm.h"

namespace trainyard::host {
namespace {

// Runs `body(rank, collectives)` on two ranks joined in one process group.
void on_two_ranks(const std::string& name, const std::function<void(int, const Collectives&)>& body) {
  const std::string file = test::temp_dir("sbn-" + name) + "/rendezvous";
  std::exception_ptr failures[2];
  auto rank_main = [&](int rank) {
    try {
      World world;
      world.rank = rank;
      world.world_size = 2;
      world.rendezvous = "file";
      world.rendezvous_file = file;
      Communicator comm(world, std::chrono::seconds(60), c10::Device(c10::DeviceType::CPU));
      body(rank, comm.collectives());
    } catch (...) {
      failures[rank] = std::current_exception();
    }
  };
  std::thread one(rank_main, 1);
  rank_main(0);
  one.join();
  for (auto& f : failures)
    if (f) std::rethrow_exception(f);
}

// Activations of rank `rank`: [8, 3, 100, 100] (80,000 values per channel,
// more than float16's largest 65,504), centred far from zero (x*x in float16
// overflows above 256) with a small spread, so E[x^2] - E[x]^2 would cancel.
at::Tensor activations(int rank, at::ScalarType dtype) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(100 + rank);
  at::Tensor x = at::randn({8, 3, 100, 100}, gen, at::kDouble) * 2.0;
  x.select(1, 0).add_(300.0 + rank);  // channel 0: mean ~300
  x.select(1, 1).add_(-1000.0);       // channel 1: mean ~-1000
  return x.to(dtype);                 // channel 2: mean ~0
}

TEST(SyncBatchNorm, StatisticsInFloat16AndBfloat16AreFiniteAndEqualTheGlobalBatchsInDouble) {
  for (at::ScalarType dtype : {at::kHalf, at::kBFloat16}) {
    // The reference: both ranks' values (as rounded to dtype) concatenated, in double.
    const at::Tensor global = at::cat({activations(0, dtype), activations(1, dtype)}).to(at::kDouble);
    const at::Tensor mean = global.mean({0, 2, 3}), var = global.var({0, 2, 3}, /*unbiased=*/false);
    SyncBatchNormStatistics got[2];
    on_two_ranks(std::string("stats-") + c10::toString(dtype), [&](int rank, const Collectives& c) {
      got[rank] = sync_batch_norm_statistics(activations(rank, dtype), c);
    });
    for (int r = 0; r < 2; ++r) {
      SCOPED_TRACE(std::string(c10::toString(dtype)) + " rank " + std::to_string(r));
      EXPECT_EQ(got[r].count.item<double>(), 160000.0);
      ASSERT_TRUE(at::isfinite(got[r].mean).all().item<bool>()) << got[r].mean;
      ASSERT_TRUE(at::isfinite(got[r].m2).all().item<bool>()) << got[r].m2;
      // Per-rank float32 sums of 80,000 values: relative error ~1e-6 of the mean's size.
      EXPECT_LT((got[r].mean - mean).abs().max().item<double>(), 1e-6 * 1000) << got[r].mean << mean;
      const at::Tensor rel = ((got[r].m2 / got[r].count - var) / var).abs();
      EXPECT_LT(rel.max().item<double>(), 1e-4) << got[r].m2 / got[r].count << var;
    }
    EXPECT_TRUE(at::equal(got[0].mean, got[1].mean));  // every rank normalizes alike
    EXPECT_TRUE(at::equal(got[0].m2, got[1].m2));
  }
}

TEST(SyncBatchNorm, ALayerInFloat16TrainsLikeFloat32OnTheGlobalBatch) {
  // Forward and backward of SyncBatchNorm2d on float16 inputs against
  // BatchNorm2d's functional form on the whole float32 batch in one process.
  const at::Tensor global = at::cat({activations(0, at::kHalf), activations(1, at::kHalf)}).to(at::kFloat);
  at::Tensor reference_in = global.clone().requires_grad_();
  at::Tensor w = at::ones({3}).requires_grad_(), b = at::zeros({3}).requires_grad_();
  at::Tensor reference = at::batch_norm(reference_in, w, b, {}, {}, /*training=*/true, 0.1, 1e-5, false);
  const at::Tensor upstream = at::linspace(-1, 1, reference.numel()).view(reference.sizes());
  (reference * upstream).sum().backward();

  at::Tensor out[2], grad_in[2], running_var[2];
  on_two_ranks("layer", [&](int rank, const Collectives& c) {
    SyncBatchNorm2d layer(3, &c);
    layer->train();
    at::Tensor x = activations(rank, at::kHalf).requires_grad_();
    at::Tensor y = layer->forward(x);
    (y * upstream.narrow(0, 8 * rank, 8)).sum().backward();
    out[rank] = y.detach().to(at::kFloat);
    grad_in[rank] = x.grad().to(at::kFloat);
    running_var[rank] = layer->named_buffers()["running_var"].clone();
  });
  const at::Tensor y = at::cat({out[0], out[1]}), dx = at::cat({grad_in[0], grad_in[1]});
  ASSERT_TRUE(at::isfinite(y).all().item<bool>());
  ASSERT_TRUE(at::isfinite(dx).all().item<bool>());
  EXPECT_LT((y - reference.detach()).abs().max().item<double>(), 2e-3);
  // Input gradients are rounded to float16 on the way back: relative to their size.
  EXPECT_LT(((dx - reference_in.grad()).abs().max() / reference_in.grad().abs().max()).item<double>(), 2e-3);
  // The running variance updated from the unbiased global variance, the same on both ranks.
  const at::Tensor expected = 0.9 + 0.1 * global.to(at::kDouble).var({0, 2, 3}, /*unbiased=*/true);
  EXPECT_TRUE(at::equal(running_var[0], running_var[1]));
  EXPECT_LT(((running_var[0].to(at::kDouble) - expected) / expected).abs().max().item<double>(), 1e-4);
}

}  // namespace
}  // namespace trainyard::host
