// `trainyard embed` and `trainyard search` on real Fashion-MNIST images:
// the catalog is read by NumPy, its embeddings are the ones the retrieval
// meter measured, a query image finds itself and its class, and damaged or
// mismatched input is one clear error line.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>

#include "support/support.h"
#include "trainyard/image_codec.h"
#include "util/csv.h"

namespace fs = std::filesystem;

namespace trainyard::test {
namespace {

const char* kData = "/usr/share/datasets/fashion-mnist";

// A small retrieval run: an embedding trained on classes 0-5, tested on 6-9.
std::string retrieval_experiment(const std::string& name, int64_t embedding_size = 16) {
  const std::string path = temp_dir("exp-" + name) + "/" + name + ".yaml";
  write_file(path, "name: " + name +
                       "\nseed: 1\n"
                       "dataset:\n"
                       "  train: {plugin: fashion_mnist, split: train, limit: 3000, classes: [0, 1, 2, 3, 4, 5]}\n"
                       "  test: {plugin: fashion_mnist, split: test, limit: 600, classes: [6, 7, 8, 9]}\n"
                       "network: {plugin: mlp, hidden_sizes: [64], embedding_size: " +
                       std::to_string(embedding_size) +
                       ", normalize: true}\n"
                       "loss: {plugin: triplet_margin, margin: 0.2, mining: semihard}\n"
                       "optimizer: {plugin: adam, lr: 0.001}\n"
                       "meters:\n  - plugin: loss\n  - {plugin: retrieval, k: [1, 5], phases: [test]}\n"
                       "loop: {epochs: 1, batch_per_device: 32, classes_per_batch: 4, samples_per_class: 8}\n"
                       "distributed: {threads_per_process: 1}\n");
  return path;
}

// Test images 0..n-1 of classes 6-9 as PNG files; returns, per file, its index among those images.
std::vector<std::string> query_images(const std::string& dir, int n) {
  const std::string script = dir + "/queries.py";
  write_file(script,
             "import gzip, sys, numpy as np\nfrom PIL import Image\n"
             "x = np.frombuffer(gzip.open(sys.argv[1] + '/t10k-images-idx3-ubyte.gz').read()[16:], np.uint8)"
             ".reshape(-1, 28, 28)\n"
             "y = np.frombuffer(gzip.open(sys.argv[1] + '/t10k-labels-idx1-ubyte.gz').read()[8:], np.uint8)\n"
             "keep = np.nonzero(y >= 6)[0]\n"
             "for i in range(int(sys.argv[3])):\n"
             "    Image.fromarray(x[keep[i]]).save('%s/q%d.png' % (sys.argv[2], i))\n");
  const auto r =
      run_command(::trainyard::test::python() + " " + script + " " + kData + " " + dir + " " + std::to_string(n));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  std::vector<std::string> files;
  for (int i = 0; i < n; ++i) files.push_back(dir + "/q" + std::to_string(i) + ".png");
  return files;
}

TEST(EmbedAndSearch, ACatalogNumpyReadsAndAQueryImageFindsItselfAndItsClass) {
  const std::string exp = retrieval_experiment("catalog"), out = temp_dir("out-catalog"), cat = out + "/cat";
  ASSERT_EQ(trainyard("run " + exp + " --output-dir " + out).exit_code, 0);
  auto e = trainyard("embed " + exp + " --output-dir " + out + " --output " + cat);
  ASSERT_EQ(e.exit_code, 0) << e.err;
  // NumPy reads the arrays; their recall@1 (NumPy's own leave-one-out search) is the meter's of the run.
  const std::string check = temp_dir("check") + "/check.py";
  write_file(check,
             "import json, sys, numpy as np\n"
             "e = np.load(sys.argv[1] + '/embeddings.npy'); y = np.load(sys.argv[1] + '/labels.npy')\n"
             "c = json.load(open(sys.argv[1] + '/catalog.json'))\n"
             "assert e.dtype == np.float32 and y.dtype == np.int64, (e.dtype, y.dtype)\n"
             "assert e.shape == (c['items'], c['embedding_size']) and y.shape == (c['items'],)\n"
             "assert set(y.tolist()) == {6, 7, 8, 9}, set(y.tolist())\n"
             "d = ((e[:, None, :] - e[None, :, :]) ** 2).sum(-1); np.fill_diagonal(d, np.inf)\n"
             "print(e.shape[0], (y[d.argmin(1)] == y).mean())\n");
  auto py = run_command(::trainyard::test::python() + " " + check + " " + cat);
  ASSERT_EQ(py.exit_code, 0) << py.out << py.err;
  std::stringstream words(py.out);
  int64_t items = 0;
  double recall = 0;
  words >> items >> recall;
  EXPECT_GT(items, 200);
  double meter = -1;
  for (const auto& line : read_lines(out + "/catalog/metrics.jsonl")) {
    const auto j = nlohmann::json::parse(line);
    if (j["phase"] == "test") meter = j["values"]["test_recall_at_1"].get<double>();
  }
  EXPECT_NEAR(recall, meter, 1e-9);
  const auto csv = host::parse_csv(read_file(cat + "/items.csv"));
  ASSERT_EQ(csv.size(), static_cast<size_t>(items) + 1);
  EXPECT_EQ(csv[0], (std::vector<std::string>{"index", "source", "label", "class"}));
  EXPECT_EQ(csv[1][1], "dataset.test:0");

  // Three test images as PNG files: each finds itself first, at distance ~0, then its class.
  const std::string qdir = temp_dir("queries"), results = temp_dir("results");
  const auto queries = query_images(qdir, 3);
  std::string args;
  for (const auto& q : queries) args += " " + q;
  auto s = trainyard("search " + cat + " --query" + args + " --top-k 5 --output " + results);
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const auto found = host::parse_csv(read_file(results + "/search.csv"));
  ASSERT_EQ(found.size(), 1u + 3 * 5);
  EXPECT_EQ(found[0], (std::vector<std::string>{"query", "rank", "index", "source", "label", "class", "distance"}));
  for (int q = 0; q < 3; ++q) {
    const auto& first = found[1 + 5 * q];
    EXPECT_EQ(first[1], "1");
    EXPECT_EQ(first[3], "dataset.test:" + std::to_string(q)) << "query " << q;
    EXPECT_LT(std::stod(first[6]), 1e-3) << "query " << q;
    EXPECT_EQ(first[5], csv[size_t(q) + 1][3]);
  }
  EXPECT_TRUE(contains(s.out, "query " + fs::absolute(queries[0]).string())) << s.out;
  // The page shows each query and its matches as pictures, carried in the page itself.
  const std::string html = read_file(results + "/search.html");
  size_t pictures = 0;
  for (size_t at = html.find("src=\"data:image/"); at != std::string::npos; at = html.find("src=\"data:image/", at + 1))
    ++pictures;
  EXPECT_EQ(pictures, 3u * (1 + 5));

  // A catalog is data: a plugin folder written into its catalog.json is not
  // loaded (this fixture's library throws as it registers, so loading it
  // would end the search with an error).
  const std::string planted = cat + "/catalog.json";
  auto record = nlohmann::json::parse(read_file(planted));
  record["plugin_dirs"] = std::vector<std::string>{fixture_dir("register_throws")};
  write_file(planted, record.dump(2));
  s = trainyard("search " + cat + " --query " + queries[0] + " --output " + temp_dir("results-planted"));
  EXPECT_EQ(s.exit_code, 0) << s.err;
  EXPECT_FALSE(contains(s.err, "register_throws")) << s.err;
}

TEST(EmbedAndSearch, MismatchedOrDamagedInputIsOneErrorLine) {
  // A classifier has no embeddings to catalog.
  const std::string synth = temp_dir("exp-classifier") + "/classifier.yaml", out = temp_dir("out-bad");
  write_file(synth, synthetic_experiment("classifier"));
  ASSERT_EQ(trainyard("run " + synth + " --output-dir " + out).exit_code, 0);
  auto r = trainyard("embed " + synth + " --output-dir " + out + " --output " + out + "/cat");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
  EXPECT_TRUE(contains(r.err, "error: embed: ")) << r.err;
  EXPECT_TRUE(contains(r.err,
                       "(network 'mlp' from libmlp.so 1.0.0) outputs class scores (a classification head); "
                       "expected a network that outputs embeddings"))
      << r.err;
  EXPECT_FALSE(fs::exists(out + "/cat"));

  // A 16-d catalog, then the experiment retrained with 8-d embeddings: its queries cannot search that catalog.
  const std::string exp = retrieval_experiment("dims"), cat = out + "/cat16";
  ASSERT_EQ(trainyard("run " + exp + " --output-dir " + out).exit_code, 0);
  ASSERT_EQ(trainyard("embed " + exp + " --output-dir " + out + " --output " + cat).exit_code, 0);
  auto again = trainyard("embed " + exp + " --output-dir " + out + " --output " + cat);
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_TRUE(contains(again.err, "--output " + cat + ": exists; expected a new folder for the catalog")) << again.err;
  write_file(exp, read_file(retrieval_experiment("dims", 8)));
  const std::string out8 = temp_dir("out-8");
  ASSERT_EQ(trainyard("run " + exp + " --output-dir " + out8).exit_code, 0);
  const std::string qdir = temp_dir("bad-queries");
  const auto queries = query_images(qdir, 1);
  const std::string checkpoint8 = latest_checkpoint(out8 + "/dims");
  r = trainyard("search " + cat + " --query " + queries[0] + " --checkpoint " + checkpoint8 + " --output " + qdir +
                "/r");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
  EXPECT_TRUE(
      contains(r.err, "search: catalog " + cat + " holds 16-d embeddings, and the network of " + exp +
                          " gives 8-d ones; expected a catalog embedded by the network that embeds the queries"))
      << r.err;
  EXPECT_FALSE(fs::exists(qdir + "/r/search.csv"));

  // A file that is not an image, and a PNG that is damaged.
  write_file(qdir + "/notes.txt", "not a picture\n");
  r = trainyard("search " + cat + " --query " + qdir + "/notes.txt --checkpoint " + checkpoint8);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
  EXPECT_TRUE(contains(r.err, "notes.txt is not an image file")) << r.err;
  write_file(qdir + "/broken.png", read_file(queries[0]).substr(0, 40));
  r = trainyard("search " + cat + " --query " + qdir + "/broken.png --checkpoint " + checkpoint8);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
  EXPECT_TRUE(contains(r.err, "broken.png")) << r.err;

  // A catalog whose arrays were cut short.
  write_file(cat + "/embeddings.npy", read_file(cat + "/embeddings.npy").substr(0, 200));
  r = trainyard("search " + cat + " --query " + queries[0]);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
  EXPECT_TRUE(contains(r.err, cat + "/embeddings.npy: ")) << r.err;
  EXPECT_TRUE(contains(r.err, "bytes of values for shape")) << r.err;

  // A 200-byte file whose header declares 64 GB, or more than 64 bits count: refused
  // before anything is allocated (it asked for the 64 GB first).
  for (const auto& [shape, declared] : std::map<std::string, std::string>{
           {"(4000000000, 4)", "the header declares 64000000000 bytes"},
           {"(1099511627776, 1099511627776)", "the header declares more than 2^64 bytes"}}) {
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
    header.append(127 - 10 - header.size(), ' ');
    header += '\n';
    std::string npy = std::string("\x93NUMPY\x01\x00", 8) + char(header.size()) + '\0' + header;
    npy.append(200 - npy.size(), '\0');
    write_file(cat + "/embeddings.npy", npy);
    r = trainyard("search " + cat + " --query " + queries[0]);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
    EXPECT_TRUE(contains(r.err, cat + "/embeddings.npy: 72 bytes of values for shape " + shape + " (" + declared))
        << r.err;
  }
}

TEST(EmbedAndSearch, AQueryOfAnotherSizeThanTheTrainingImagesIsNamedWithBothShapes) {
  // Three classes of 8x8 gray images (dark, middle, bright) in folders, at their own size (no load_size).
  const std::string root = temp_dir("folder-images"), out = temp_dir("out-folder");
  cv::RNG rng(3);
  for (int c = 0; c < 3; ++c) {
    const std::string dir = root + "/" + std::string(1, char('a' + c));
    fs::create_directories(dir);
    for (int i = 0; i < 8; ++i) {
      cv::Mat m(8, 8, CV_8UC1);
      rng.fill(m, cv::RNG::UNIFORM, 40 + 80 * c, 60 + 80 * c);
      write_file(dir + "/" + std::to_string(i) + ".png", image_codec::encode_png(m));
    }
  }
  const std::string exp = temp_dir("exp-folder") + "/folder.yaml";
  write_file(exp,
             "name: folder\nseed: 1\n"
             "dataset:\n  train: {plugin: image_folder, root: " +
                 root +
                 ", color: gray, mean: [0.5], std: [0.25]}\n"
                 "  test: {plugin: image_folder, root: " +
                 root +
                 ", color: gray, mean: [0.5], std: [0.25]}\n"
                 "network: {plugin: mlp, hidden_sizes: [16], embedding_size: 8, normalize: true}\n"
                 "loss: {plugin: triplet_margin, margin: 0.2}\noptimizer: {plugin: adam, lr: 0.01}\n"
                 "meters: [{plugin: loss}, {plugin: retrieval, k: [1], phases: [test]}]\n"
                 "loop: {epochs: 3, batch_per_device: 12, classes_per_batch: 3, samples_per_class: 4}\n"
                 "distributed: {threads_per_process: 1}\n");
  ASSERT_EQ(trainyard("run " + exp + " --output-dir " + out).exit_code, 0);
  ASSERT_EQ(trainyard("embed " + exp + " --output-dir " + out + " --output " + out + "/cat").exit_code, 0);
  // An 8x8 query of the bright class finds bright images first, its own file among them.
  const std::string queries = temp_dir("folder-queries");
  auto ok = trainyard("search " + out + "/cat --query " + root + "/c/3.png --top-k 3 --output " + queries + "/r");
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  const auto found = host::parse_csv(read_file(queries + "/r/search.csv"));
  ASSERT_EQ(found.size(), 4u);
  for (size_t i = 1; i < found.size(); ++i) EXPECT_EQ(found[i][5], "c") << i;
  // A 12x10 query cannot be embedded by a network trained on 8x8 images.
  cv::Mat big(10, 12, CV_8UC1, cv::Scalar(200));
  write_file(queries + "/big.png", image_codec::encode_png(big));
  auto r = trainyard("search " + out + "/cat --query " + queries + "/big.png --output " + queries + "/big");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
  EXPECT_TRUE(contains(r.err,
                       "error: command line: --query: samples of shape [1, 10, 12]; expected the shape the network "
                       "was trained on, [1, 8, 8]; resize the image to that size"))
      << r.err;
  EXPECT_FALSE(fs::exists(queries + "/big/search.csv"));
}

}  // namespace
}  // namespace trainyard::test
