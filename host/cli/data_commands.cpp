// trainyard convert and iterate: the data pipeline on its own.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <regex>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "data/convert.h"
#include "run/experiment_file.h"
#include "run/runner.h"
#include "trainyard/error.h"
#include "util/files.h"
#include "util/json.h"
#include "util/text.h"

namespace fs = std::filesystem;

namespace trainyard::host {

int convert_command(int argc, char** argv) {
  const std::string usage =
      "trainyard convert --from folder|csv|idx|parallel|coco [--input PATH]... [--target DIR]... [--images F "
      "--labels F] [--coco-target mask|boxes]"
      " --output DIR [--to lmdb|webdataset] [--shard-size N] [--encoding png|jpeg|raw|keep] [--quality Q] [--resize "
      "HxW] [--shuffle] [--seed S]"
      " [--test-fraction F] [--limit N] [--overwrite]";
  po::options_description visible("convert options");
  ConvertOptions o;
  std::string resize;
  int64_t seed = 0;
  visible.add_options()("from", po::value<std::string>(&o.from)->required(),
                        "folder (ROOT/<class>/images), csv (path,label lines), idx (MNIST files), "
                        "parallel (folders of matching file names), coco (an instances JSON: each image with its "
                        "annotations painted into a mask, or its boxes: --coco-target)")(
      "input", po::value<std::vector<std::string>>(&o.inputs)->composing(),
      "source folder, CSV or COCO JSON (parallel: repeatable)")(
      "target", po::value<std::vector<std::string>>(&o.targets)->composing(),
      "parallel: target image folder (repeatable)")("images", po::value<std::string>(&o.images),
                                                    "idx: images file; coco: the folder of the JSON's file_names "
                                                    "(default: the JSON's folder)")(
      "labels", po::value<std::string>(&o.labels), "idx: labels file")(
      "coco-target", po::value<std::string>(&o.coco_target)->default_value("mask"),
      "coco: mask (the annotations painted into one mask per image) or boxes (each image's boxes, classes, crowd "
      "flags and areas; LMDB format version 2, shards' KEY.boxes.json)")(
      "output", po::value<std::string>(&o.output)->required(), "folder to create: the LMDB, or the shards")(
      "to", po::value<std::string>(&o.to)->default_value("lmdb"),
      "lmdb (trainyard's records) or webdataset (tar shards: KEY.jpg|png + KEY.cls)")(
      "shard-size", ranged<int64_t>("shard-size", 1, INT64_MAX, &o.shard_size)->default_value(1000),
      "webdataset: samples per shard")("encoding", po::value<std::string>(&o.encoding)->default_value("png"),
                                       "png, jpeg, raw, or keep (each file's own JPEG or PNG bytes, not re-encoded)")(
      "quality", ranged("quality", 1, 100, &o.quality)->default_value(95), "JPEG quality 1..100")(
      "resize", po::value<std::string>(&resize), "resize every image to HxW on the way in")(
      "shuffle", po::bool_switch(&o.shuffle), "shuffle the samples (with --seed)")(
      "seed", ranged<int64_t>("seed", 0, INT64_MAX, &seed)->default_value(0), "seed of --shuffle")(
      "test-fraction", ranged("test-fraction", 0.0, 0.99, &o.test_fraction)->default_value(0),
      "split off this fraction as OUTPUT/test (the rest is OUTPUT/train)")(
      "limit", ranged<int64_t>("limit", 0, INT64_MAX, &o.limit)->default_value(0),
      "convert only the first N samples (after shuffling)")(
      "overwrite", po::bool_switch(&o.overwrite), "replace an existing OUTPUT (only once the new one is complete)")(
      "quiet", "no progress line");
  visible.add(help_option());
  po::variables_map vm;
  if (!parse_command_line(argc, argv, usage, visible, "", vm)) return 0;
  o.seed = static_cast<uint64_t>(seed);
  if (!vm["coco-target"].defaulted() && o.from != "coco")
    throw ConfigError("command line: --coco-target with --from " + o.from, "expected --coco-target with --from coco",
                      "drop --coco-target");
  if (!resize.empty()) {
    std::smatch m;
    const bool form = std::regex_match(resize, m, std::regex("([0-9]{1,5})x([0-9]{1,5})"));
    if (form) o.resize_h = std::stoi(m[1]), o.resize_w = std::stoi(m[2]);
    if (!form || o.resize_h < 1 || o.resize_w < 1 || o.resize_h > 16384 || o.resize_w > 16384)
      throw ConfigError("command line: --resize " + resize,
                        "expected HEIGHTxWIDTH with each from 1 to 16384, e.g. 32x32, got " + quoted_value(resize), "");
  }
  check_output_folder(fs::path(o.output).parent_path().empty() ? "." : fs::path(o.output).parent_path().string(),
                      "command line: --output " + o.output);
  o.progress = !vm.count("quiet");
  ConvertResult r = convert(o);
  std::cout << "convert: wrote " << r.written << " records to " << join(r.databases) << " in "
            << json_number(std::round(r.seconds * 100) / 100) << " s\n";
  return 0;
}

int iterate_command(int argc, char** argv) {
  const std::string usage = "trainyard iterate EXP.yaml [--batches N] [--set KEY=VALUE]... [--plugin-dir DIR]...";
  po::options_description own("iterate options");
  own.add_options()("batches", ranged<int64_t>("batches", 0, INT64_MAX)->default_value(0),
                    "stop after N batches (0: one epoch)");
  const po::options_description visible = experiment_command_options(own);
  po::variables_map vm;
  if (!parse_command_line(argc, argv, usage, visible, "experiment", vm)) return 0;
  Registry registry;
  Experiment e = load_experiment(vm, registry);
  const IterateResult r = Runner(e, registry).iterate(vm["batches"].as<int64_t>());
  std::cout << "iterate: " << r.samples << " samples in " << r.batches << " batches, " << json_number(r.seconds)
            << " s, samples_per_sec " << json_number(r.samples / r.seconds);
  if (r.batches > 1) std::cout << ", steady_samples_per_sec " << json_number(r.steady_samples / r.steady_seconds);
  std::cout << ", decode_threads " << r.decode_threads << ", bad_records " << r.bad_records << "\n";
  return 0;
}

}  // namespace trainyard::host
