// The hand-written LibTorch loop that scripts/bench-overhead.sh compares
// trainyard against: the same Fashion-MNIST data, MLP, batch, optimizer and
// per-iteration bookkeeping (running loss and top-1 accuracy), no framework.
//
// usage: reference_mlp_loop DATA_DIR EPOCHS THREADS [SAMPLES_PER_EPOCH [BATCH [HIDDEN]]]
//   BATCH defaults to 64, HIDDEN (comma-separated widths) to 256,128: the
//   benchmark's MLP; "32 16,16" is its narrow, overhead-bound model.
// prints one line per epoch: "epoch N seconds S loss L accuracy A"
// The epoch is its own function, train_epoch, so that an instruction count
// (valgrind --tool=callgrind --toggle-collect) can be limited to it.
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace {

std::vector<uint8_t> read_gz(const std::string& path, size_t header, size_t& count) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot open " + path);
  std::vector<uint8_t> bytes;
  uint8_t buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) bytes.insert(bytes.end(), buf, buf + n);
  gzclose(f);
  count = (size_t(bytes[4]) << 24) | (size_t(bytes[5]) << 16) | (size_t(bytes[6]) << 8) | bytes[7];
  return std::vector<uint8_t>(bytes.begin() + static_cast<long>(header), bytes.end());
}

struct EpochResult {
  double loss_sum = 0, correct = 0;
};

// One epoch over the first `samples` positions of a fresh permutation.
__attribute__((noinline)) EpochResult train_epoch(torch::nn::Sequential& net, torch::optim::SGD& opt,
                                                  const at::Tensor& images, const at::Tensor& targets, int64_t n,
                                                  int64_t samples, int64_t batch) {
  EpochResult r;
  auto order = torch::randperm(n, torch::kLong);
  net->train();
  for (int64_t start = 0; start < samples; start += batch) {
    auto idx = order.narrow(0, start, std::min<int64_t>(batch, samples - start));
    auto x = images.index_select(0, idx), y = targets.index_select(0, idx);
    opt.zero_grad();
    auto out = net->forward(x.flatten(1));
    auto loss = torch::nn::functional::cross_entropy(out, y);
    loss.backward();
    opt.step();
    r.loss_sum += loss.item<double>() * double(idx.size(0));
    r.correct += out.argmax(1).eq(y).sum().item<double>();
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || argc > 7) {
    std::fprintf(stderr, "usage: %s DATA_DIR EPOCHS THREADS [SAMPLES_PER_EPOCH [BATCH [HIDDEN]]]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const int epochs = std::stoi(argv[2]);
  at::set_num_threads(std::stoi(argv[3]));
  torch::manual_seed(1);

  size_t n = 0, m = 0;
  auto pixels = read_gz(dir + "/train-images-idx3-ubyte.gz", 16, n);
  auto labels = read_gz(dir + "/train-labels-idx1-ubyte.gz", 8, m);
  auto images = torch::from_blob(pixels.data(), {long(n), 1, 28, 28}, torch::kByte)
                    .to(torch::kFloat)
                    .div_(255.0)
                    .sub_(0.2860)
                    .div_(0.3530);
  auto targets = torch::from_blob(labels.data(), {long(m)}, torch::kByte).to(torch::kLong);

  std::vector<int64_t> widths;
  for (std::string rest = argc >= 7 ? argv[6] : "256,128"; !rest.empty();) {
    const size_t comma = rest.find(',');
    widths.push_back(std::stoll(rest.substr(0, comma)));
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
  }
  torch::nn::Sequential net;
  int64_t in = 784;
  for (int64_t w : widths) {
    net->push_back(torch::nn::Linear(in, w));
    net->push_back(torch::nn::ReLU());
    in = w;
  }
  net->push_back(torch::nn::Linear(in, 10));
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9).nesterov(true));
  const int64_t batch = argc >= 6 ? std::stoll(argv[5]) : 64;
  const int64_t samples =
      argc >= 5 && std::stoll(argv[4]) > 0 ? std::min<int64_t>(std::stoll(argv[4]), long(n)) : long(n);
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    auto t0 = std::chrono::steady_clock::now();
    EpochResult r = train_epoch(net, opt, images, targets, long(n), samples, batch);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("epoch %d seconds %.4f loss %.4f accuracy %.4f\n", epoch, seconds, r.loss_sum / double(samples),
                r.correct / double(samples));
    std::fflush(stdout);
  }
  return 0;
}
