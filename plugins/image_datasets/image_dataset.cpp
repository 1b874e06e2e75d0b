#include "image_dataset.h"

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <utility>

#include <ATen/ATen.h>
#include <trainyard/error.h>
#include <trainyard/image_codec.h>

#include "jpeg_decode.h"

namespace image_datasets {

namespace {

bool is_png(const void* data, size_t size) {
  static const unsigned char signature[8] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  return size >= 8 && std::equal(std::begin(signature), std::end(signature), static_cast<const unsigned char*>(data));
}

// Damage OpenCV would decode silently (libjpeg fills a cut JPEG with grey and
// only warns) or report without a reason.
void check_encoded(const void* data, size_t size, const std::string& what) {
  if (size == 0) throw trainyard::BadRecord(what + ": empty file (0 bytes), expected an image");
  const auto* p = static_cast<const unsigned char*>(data);
  if (size >= 2 && p[0] == 0xFF && p[1] == 0xD8 && !jpeg_is_complete(data, size))
    throw trainyard::BadRecord(what + ": truncated JPEG (" + std::to_string(size) +
                               " bytes, no end-of-image marker after its last scan)");
  // A PNG ends with its IEND chunk. Cut short, libpng would print its own line
  // on stderr beside ours: said here instead, before decoding.
  static const unsigned char iend[4] = {'I', 'E', 'N', 'D'};
  if (is_png(data, size) && std::find_end(p, p + size, std::begin(iend), std::end(iend)) == p + size)
    throw trainyard::BadRecord(what + ": truncated PNG (" + std::to_string(size) + " bytes, no IEND chunk)");
  // The frame a header claims, checked before a decoder allocates it: a
  // 763-byte JPEG may claim 65500x65500 (12.9 GB of pixels).
  const auto header = trainyard::image_codec::read_header(data, size);
  const uint64_t width = header ? header->width : 0, height = header ? header->height : 0;
  if (width * height > kMaxImagePixels)  // each below 2^32: no overflow
    throw trainyard::BadRecord(what + ": its header claims " + std::to_string(height) + "x" + std::to_string(width) +
                               " pixels (" + std::to_string(width * height) + "), expected at most " +
                               std::to_string(kMaxImagePixels) +
                               " (Pillow's decompression-bomb limit); the file is damaged or not a photograph");
}

void check_size(cv::Size size, const SourceImage& image) {
  if (image.expected_size.empty() || size == image.expected_size) return;
  throw trainyard::BadRecord(image.what + ": decodes to " + std::to_string(size.height) + "x" +
                             std::to_string(size.width) + ", the record says " +
                             std::to_string(image.expected_size.height) + "x" +
                             std::to_string(image.expected_size.width));
}

// Decodes and transforms one image. A colour or grey JPEG is decoded by
// libjpeg-turbo, at the smallest scale its scaled IDCT offers (1/2, 1/4,
// 1/8) that still gives the crop its output resolution: most random-resized
// crops of a photograph need far fewer pixels than the file holds.
at::Tensor transformed(const SourceImage& image, const TransformOptions& t, uint64_t seed) {
  if (!image.pixels.empty()) {
    check_size(image.pixels.size(), image);
    return apply_transforms(image.pixels, t, seed);
  }
  check_encoded(image.bytes.data(), image.bytes.size(), image.what);
  const auto header = read_jpeg_header(image.bytes.data(), image.bytes.size());
  if (header && (header->components == 1 || header->components == 3)) {
    check_size(header->size, image);
    const int reduction = decode_reduction(header->size, t, seed);
    const cv::Rect region = decode_region(header->size, t, seed);
    if (auto m = decode_jpeg(image.bytes.data(), image.bytes.size(), reduction, image.what, region))
      return apply_transforms(*m, t, seed, header->size, reduction);
  }
  const cv::Mat m = decode_image(image.bytes.data(), image.bytes.size(), image.what);  // PNG, CMYK JPEG, ...
  check_size(m.size(), image);
  return apply_transforms(m, t, seed);
}

at::Tensor stack_channels(const std::vector<SourceImage>& images, const TransformOptions& t, uint64_t seed) {
  std::vector<at::Tensor> parts;
  for (const auto& image : images) parts.push_back(transformed(image, t, seed));
  return parts.size() == 1 ? parts[0] : at::cat(parts, 0);
}

// The size an image is stored at: its pixels', its JPEG or PNG header's, else decoded.
cv::Size stored_size(const SourceImage& image) {
  if (!image.pixels.empty()) return image.pixels.size();
  // The input was decoded before its mask, so its header's sizes passed check_encoded's bound.
  if (const auto h = trainyard::image_codec::read_header(image.bytes.data(), image.bytes.size()))
    return {static_cast<int>(h->width), static_cast<int>(h->height)};
  return decode_image(image.bytes.data(), image.bytes.size(), image.what).size();
}

// Every pixel of a mask a class id below mask_classes or the ignore value:
// the loss would index past its classes with any other, the meters count it.
void check_mask_ids(const cv::Mat& mask, const std::string& what, const TransformOptions& t) {
  if (mask.channels() != 1 || (mask.depth() != CV_8U && mask.depth() != CV_16U)) return;  // refused by the transforms
  cv::Mat ids;
  mask.convertTo(ids, CV_32S);
  for (int r = 0; r < ids.rows; ++r) {
    const int32_t* row = ids.ptr<int32_t>(r);
    for (int c = 0; c < ids.cols; ++c)
      if (row[c] >= t.mask_classes && row[c] != t.ignore_index)
        throw trainyard::BadRecord(what + ": class id " + std::to_string(row[c]) + " at row " + std::to_string(r) +
                                   ", column " + std::to_string(c) + "; expected ids 0 to " +
                                   std::to_string(t.mask_classes - 1) +
                                   " (mask_classes: " + std::to_string(t.mask_classes) + ") or ignore_index " +
                                   std::to_string(t.ignore_index));
  }
}

}  // namespace

at::Tensor ImageDataset::target_of(const LoadedSample& s, uint64_t seed) const {
  if (transforms_.target != "mask")
    return s.targets.empty() ? s.label : stack_channels(s.targets, target_transforms_, seed);
  if (s.targets.empty())
    throw trainyard::BadRecord((s.inputs.empty() ? std::string("a sample") : s.inputs[0].what) +
                               ": target: mask, and the sample has no target image to read as its mask (convert "
                               "image and mask folders with trainyard convert --from parallel --input IMAGES "
                               "--target MASKS)");
  if (s.targets.size() != 1)
    throw trainyard::BadRecord(s.targets[1].what + ": a second target image; target: mask takes one mask a sample");
  const SourceImage& source = s.targets[0];
  // Class ids as stored: a 16-bit mask's ids are not scaled to 8 bits.
  const cv::Mat mask = source.pixels.empty()
                           ? decode_image(source.bytes.data(), source.bytes.size(), source.what, /*keep_depth=*/true)
                           : source.pixels;
  check_size(mask.size(), source);
  check_mask_ids(mask, source.what, transforms_);
  // The mask follows the input's geometry: it must cover the same pixels.
  const cv::Size input = stored_size(s.inputs.at(0));
  if (mask.size() != input)
    throw trainyard::BadRecord(source.what + ": a mask of " + std::to_string(mask.rows) + "x" +
                               std::to_string(mask.cols) + " for an image of " + std::to_string(input.height) + "x" +
                               std::to_string(input.width) + "; a mask has its image's size");
  try {
    return apply_mask_transforms(mask, transforms_, seed, transforms_.ignore_index);
  } catch (const trainyard::BadRecord& e) {
    throw trainyard::BadRecord(source.what + ": " + e.what());
  }
}

trainyard::Example ImageDataset::get_seeded(int64_t index, uint64_t seed) const {
  return example_of(load(index), seed);
}

trainyard::Example ImageDataset::example_of(const LoadedSample& sample, uint64_t seed) const {
  at::Tensor input = stack_channels(sample.inputs, transforms_, seed);
  return {input, target_of(sample, seed)};
}

trainyard::DatasetInfo ImageDataset::info() const { return info_; }

trainyard::Batch ImageDataset::get_batch(const std::vector<int64_t>& indices,
                                         const std::vector<uint64_t>& seeds) const {
  if (decoder_) return decode_batch_on_gpu(indices, seeds);
  return Dataset::get_batch(indices, seeds);
}

namespace {

std::string shape_text(at::IntArrayRef sizes) {
  std::string text;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (d) text += 'x';  // not ("x" + to_string): GCC 12 warns of a bogus memcpy bound there
    text += std::to_string(sizes[d]);
  }
  return text;
}

// The CPUs this process may run on, shared by the processes of this node
// (torchrun and trainyard's launcher say how many: LOCAL_WORLD_SIZE).
int cpus_per_process() {
  cpu_set_t set;
  int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  if (const char* local = std::getenv("LOCAL_WORLD_SIZE"))
    if (const int processes = std::atoi(local); processes > 1) cpus = std::max(1, cpus / processes);
  return cpus;
}

}  // namespace

void ImageDataset::choose_decoder(const trainyard::Context& context) {
  const std::string& decode = transforms_.decode;
  if (decode == "cpu") return;
  const std::string who = (context.component.empty() ? std::string("dataset") : context.component) + ": decode: ";
  const auto log = [context](const std::string& line) { context.log(line); };
  const bool gpu_asked = decode == "gpu";
  // Each reason the GPU path cannot apply here, the first that holds.
  std::optional<std::string> why_not;
  if (!context.device.is_cuda())
    why_not = "the run is on " + context.device.str() + ", not a GPU";
  else if (const auto missing = nvjpeg_unavailable())
    why_not = *missing;
  else if (const auto refused = gpu_decode_refuses(transforms_))
    why_not = "the GPU path does not apply " + *refused;
  else if (const auto& shape = info_.sample_shape; !shape.empty() && (shape.size() != 3 || shape[0] != 3))
    why_not = "the first sample is " + shape_text(shape) +
              " and the GPU path makes 3-channel images (color: rgb makes greyscale photographs 3-channel)";
  if (why_not && gpu_asked && context.device.is_cuda())
    throw trainyard::ConfigError(who + "gpu is unavailable: " + *why_not,
                                 "expected nvJPEG for the run's GPU (PyPI's nvidia-nvjpeg, scripts/install-deps.sh)",
                                 "use decode: cpu, or decode: auto to fall back by itself");
  if (why_not) {
    context.log(who + decode + ": decoding on the CPU: " + *why_not);
    return;
  }
  const int cpus = cpus_per_process();
  if (!gpu_asked && cpus >= kAutoGpuDecodeBelowCpusPerGpu) {
    context.log(who + "auto: decoding on the CPU: " + std::to_string(cpus) +
                " CPUs for this GPU (the GPU from fewer than " + std::to_string(kAutoGpuDecodeBelowCpusPerGpu) + ")");
    return;
  }
  std::shared_ptr<const JpegBatchDecoder> decoder;
  try {
    decoder = make_nvjpeg_decoder(context.device);
  } catch (const trainyard::ConfigError& e) {
    if (gpu_asked) throw;
    context.log(who + "auto: decoding on the CPU: " + e.what());
    return;
  }
  context.log(who + (gpu_asked ? "gpu: " : "auto: " + std::to_string(cpus) + " CPUs for this GPU: ") + "JPEGs by " +
              decoder->description());
  use_decoder(std::move(decoder), log);
}

void ImageDataset::use_decoder(std::shared_ptr<const JpegBatchDecoder> decoder,
                               std::function<void(const std::string&)> log) {
  const auto& shape = info_.sample_shape;
  if (shape.size() != 3 || shape[0] != 3)
    throw trainyard::Error("use_decoder: the GPU path makes 3-channel samples, this dataset's are " +
                           shape_text(shape));
  decoder_ = std::move(decoder);
  log_ = std::move(log);
}

std::optional<std::string> ImageDataset::plan_gpu_job(const LoadedSample& sample, uint64_t seed, cv::Size out,
                                                      GpuJob& job) const {
  if (sample.inputs.size() != 1) return std::to_string(sample.inputs.size()) + " images in one sample";
  const SourceImage& image = sample.inputs[0];
  if (!image.pixels.empty()) return std::string("raw pixels, not a JPEG");
  check_encoded(image.bytes.data(), image.bytes.size(), image.what);  // damage: a BadRecord, as on the CPU path
  const auto header = read_jpeg_header(image.bytes.data(), image.bytes.size());
  if (!header) return std::string("not a JPEG");
  if (header->components == 4) return std::string("a CMYK JPEG");
  if (header->components == 1 && transforms_.color != "rgb")
    return std::string("a greyscale JPEG, kept as 1 channel (color: keep)");
  if (header->components != 1 && header->components != 3)
    return "a JPEG of " + std::to_string(header->components) + " components";
  check_size(header->size, image);
  Draws draws(seed);
  const Geometry geometry = draw_geometry(header->size, transforms_, draws);
  if (geometry.out != out)
    return "its crop is " + std::to_string(geometry.out.height) + "x" + std::to_string(geometry.out.width) +
           ", the batch's " + std::to_string(out.height) + "x" + std::to_string(out.width);
  job = gpu_job(geometry, header->size);
  job.data = reinterpret_cast<const unsigned char*>(image.bytes.data());
  job.size = image.bytes.size();
  return std::nullopt;
}

void ImageDataset::note_cpu_decode(const std::string& what, const std::string& why) const {
  const int64_t count = ++cpu_decoded_;
  // The first, the tenth, the hundredth ...: a folder of PNGs says so a few times, not per sample.
  int64_t power = 1;
  while (power * 10 <= count) power *= 10;
  if (count != power || !log_) return;
  log_("decode: gpu: " + std::to_string(count) + (count == 1 ? " sample" : " samples") +
       " decoded on the CPU instead (the latest: " + what + ": " + why + ")");
}

trainyard::Batch ImageDataset::decode_batch_on_gpu(const std::vector<int64_t>& indices,
                                                   const std::vector<uint64_t>& seeds) const {
  std::vector<LoadedSample> samples(indices.size());
  for (size_t k = 0; k < indices.size(); ++k) samples[k] = load(indices[k]);
  return decode_loaded_on_gpu(samples, indices, seeds);
}

trainyard::Batch ImageDataset::decode_loaded_on_gpu(const std::vector<LoadedSample>& samples,
                                                    const std::vector<int64_t>& indices,
                                                    const std::vector<uint64_t>& seeds) const {
  // Every sample has the shape info() declares (sample 0 through the CPU
  // path): 3 x H x W, or choose_decoder() left the decoding to the CPU path.
  const std::vector<int64_t>& shape = info_.sample_shape;
  const cv::Size out(static_cast<int>(shape[2]), static_cast<int>(shape[1]));
  const size_t n = indices.size();

  std::vector<GpuJob> jobs;
  std::vector<std::string> not_taken(n);  // why a row is the CPU path's from the start
  for (size_t k = 0; k < n; ++k) {
    GpuJob job;
    if (auto why = plan_gpu_job(samples[k], seeds[k], out, job)) {
      not_taken[k] = std::move(*why);
      continue;
    }
    job.row = static_cast<int64_t>(k);
    jobs.push_back(job);
  }
  int64_t on_cpu = 0;
  const auto cpu_row = [&](int64_t row, const std::optional<std::string>& refused) {
    const auto k = static_cast<size_t>(row);
    at::Tensor pixels = stack_channels(samples[k].inputs, transforms_, seeds[k]);
    if (pixels.dim() != 3 || pixels.size(0) != 3 || pixels.size(1) != out.height || pixels.size(2) != out.width)
      throw trainyard::ConfigError(
          "sample " + std::to_string(indices[k]) + " has input shape " + shape_text(pixels.sizes()),
          "expected the shape the dataset's info declares, 3x" + std::to_string(out.height) + "x" +
              std::to_string(out.width),
          "give the dataset load_size (and crop_size) so that every image has that size");
    ++on_cpu;
    note_cpu_decode(samples[k].inputs.empty() ? "sample " + std::to_string(indices[k]) : samples[k].inputs[0].what,
                    refused ? *refused : not_taken[k]);
    return pixels;
  };
  at::Tensor input = decoder_->decode(jobs, static_cast<int64_t>(n), out, cpu_row);
  gpu_decoded_ += static_cast<int64_t>(n) - on_cpu;
  std::vector<at::Tensor> targets;
  targets.reserve(n);
  for (size_t k = 0; k < n; ++k) targets.push_back(target_of(samples[k], seeds[k]));
  return {input, at::stack(targets), indices};
}

std::optional<std::map<std::string, trainyard::Value>> ImageDataset::image_preprocessing() const {
  const TransformOptions& t = transforms_;
  return std::map<std::string, trainyard::Value>{
      {"color", t.color},
      {"load_size", t.load_size},
      {"resize_short", t.resize_short},
      {"crop", t.crop == "none" || t.crop_size.empty() ? std::string("none") : std::string("center")},
      {"crop_size", t.crop_size},
      {"mean", t.mean},
      {"std", t.std}};
}

std::optional<trainyard::InputNormalization> ImageDataset::input_normalization() const {
  if (transforms_.output != "uint8") return std::nullopt;
  return trainyard::InputNormalization{transforms_.mean, transforms_.std};
}

void ImageDataset::describe(int64_t num_classes, std::vector<std::string> class_names, const std::string& source) {
  info_.size = size();
  info_.num_classes = num_classes;
  info_.class_names = std::move(class_names);
  if (transforms_.target == "mask") {
    // The masks' classes are the option's: counting them would read every mask.
    info_.num_classes = transforms_.mask_classes;
    if (static_cast<int64_t>(info_.class_names.size()) != transforms_.mask_classes) {  // coco names its classes
      info_.class_names.clear();
      for (int64_t c = 0; c < transforms_.mask_classes; ++c) info_.class_names.push_back(std::to_string(c));
    }
  }
  if (size() > 0) {
    try {
      const trainyard::Example first = get_seeded(0, 0);  // alive while its sizes are read
      info_.sample_shape = first.input.sizes().vec();
    } catch (const trainyard::BadRecord& e) {
      // Read while the dataset is built, before on_bad_record applies: the data is wrong.
      throw trainyard::DataError(
          source + ": the first sample, read to learn the input shape, is unreadable: " + e.what(),
          "expected a readable first sample", "check the data or convert it again");
    }
  }
}

bool jpeg_is_complete(const void* data, size_t size) {
  // The entropy-coded data stuffs every FF with 00 (or an RSTn marker), so an
  // FF D9 after the first scan header (FF DA) is the image's own end marker;
  // an EXIF thumbnail's EOI comes before the main image's first scan.
  const auto* p = static_cast<const unsigned char*>(data);
  const auto* end = p + size;
  const unsigned char scan_marker[2] = {0xFF, 0xDA};
  const auto* scan = std::search(p, end, std::begin(scan_marker), std::end(scan_marker));
  if (scan == end) return false;
  for (const unsigned char* q = end - 1; q > scan + 1; --q)
    if (q[-1] == 0xFF && q[0] == 0xD9) return true;
  return false;
}

namespace {

// Anything but the formats trainyard decodes (JPEG, PNG, BMP, TIFF, WebP,
// PNM by their first bytes: trainyard::image_codec::sniff) is said in these
// words before any decoder sees it: a Radiance HDR or an OpenEXR header named
// .jpg, say.
[[noreturn]] void not_an_image(const void* data, size_t size, const std::string& what) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::string start;
  for (size_t i = 0; i < std::min<size_t>(size, 8); ++i) start += std::isprint(p[i]) ? char(p[i]) : '.';
  throw trainyard::BadRecord(what +
                             ": not an image trainyard decodes (expected JPEG, PNG, BMP, TIFF, WebP or "
                             "PNM; the file starts with '" +
                             start + "')");
}

}  // namespace

cv::Mat decode_image(const void* data, size_t size, const std::string& what, bool keep_depth) {
  check_encoded(data, size, what);
  if (trainyard::image_codec::sniff(data, size) == trainyard::image_codec::Format::unknown)
    not_an_image(data, size, what);
  cv::Mat image;
  try {
    image = trainyard::image_codec::decode(data, size);  // channels as stored, 8 or 16 bits
  } catch (const trainyard::image_codec::Error& e) {
    throw trainyard::BadRecord(what + ": cannot decode image: " + e.what());
  }
  if (image.depth() != CV_8U && !keep_depth) image.convertTo(image, CV_8U, image.depth() == CV_16U ? 1.0 / 257 : 1.0);
  return image;
}

std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw trainyard::BadRecord(path + ": cannot open");
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::optional<JpegHeader> read_jpeg_header(const void* data, size_t size) {
  const auto h = trainyard::image_codec::read_header(data, size);
  if (!h || h->format != trainyard::image_codec::Format::jpeg) return std::nullopt;
  return JpegHeader{cv::Size(static_cast<int>(h->width), static_cast<int>(h->height)), h->components};  // < 2^16
}

}  // namespace image_datasets
