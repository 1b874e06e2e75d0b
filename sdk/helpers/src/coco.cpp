#include "trainyard/coco.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "trainyard/error.h"
#include "trainyard/image_codec.h"

namespace fs = std::filesystem;

namespace trainyard::coco {

namespace {

using Json = nlohmann::json;

// "FILE: annotation ID" or "FILE: image ID": how errors name what they found.
std::string at(const std::string& file, const char* what, int64_t id) {
  return file + ": " + what + " " + std::to_string(id);
}

int64_t integer(const Json& object, const char* key, const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number_integer())
    throw DataError(where + ": '" + key + "' is " + (it == object.end() ? "missing" : it->dump()),
                    "expected an integer", "");
  return it->get<int64_t>();
}

// COCO's compressed RLE (pycocotools' mask.encode, the counts as a string):
// each count in 5-bit groups, low first, as characters from '0' (48), 0x20
// set on every group but the last, whose 0x10 is the sign; from the third
// count on, the value is the difference from the count two before.
std::vector<uint32_t> compressed_counts(const std::string& text, const std::string& where) {
  std::vector<uint32_t> counts;
  size_t p = 0;
  while (p < text.size()) {
    int64_t value = 0;
    int shift = 0;
    for (bool more = true; more; shift += 5) {
      if (p == text.size() || shift > 30)
        throw DataError(where + ": a compressed RLE that ends inside a count",
                        "expected the counts pycocotools' mask.encode writes", "");
      const int c = static_cast<unsigned char>(text[p++]) - 48;
      if (c < 0 || c > 63)
        throw DataError(where + ": a compressed RLE holds '" + std::string(1, text[p - 1]) + "'",
                        "expected characters '0' to 'o'", "");
      value |= int64_t(c & 0x1f) << shift;
      more = (c & 0x20) != 0;
      if (!more && (c & 0x10)) value -= int64_t(1) << (shift + 5);  // negative: the group's sign bit
    }
    if (counts.size() > 2) value += counts[counts.size() - 2];
    if (value < 0 || value > UINT32_MAX)
      throw DataError(where + ": a compressed RLE count of " + std::to_string(value), "expected counts of 0 or more",
                      "");
    counts.push_back(static_cast<uint32_t>(value));
  }
  return counts;
}

Region read_region(const Json& a, const std::string& file, int64_t id, int rows, int cols) {
  Region r;
  r.id = id;
  const std::string where = at(file, "annotation", id);
  const auto segmentation = a.find("segmentation");
  if (segmentation == a.end()) throw DataError(where + " has no segmentation", "expected polygons or an RLE", "");
  if (segmentation->is_array()) {
    for (const Json& polygon : *segmentation) {
      if (!polygon.is_array() || polygon.size() < 6 || polygon.size() % 2 != 0)
        throw DataError(where + ": a polygon of " + std::to_string(polygon.is_array() ? polygon.size() : 0) + " values",
                        "expected x, y pairs of 3 points or more (6 values or more, an even count)", "");
      std::vector<double> xy;
      for (const Json& v : polygon) {
        if (!v.is_number() || !std::isfinite(v.get<double>()))
          throw DataError(where + ": a polygon holds " + v.dump(), "expected finite numbers", "");
        xy.push_back(v.get<double>());
      }
      r.polygons.push_back(std::move(xy));
    }
    return r;
  }
  const auto counts = segmentation->find("counts");
  const auto size = segmentation->find("size");
  if (!segmentation->is_object() || counts == segmentation->end() || size == segmentation->end())
    throw DataError(where + ": segmentation " + segmentation->dump().substr(0, 60),
                    "expected polygons ([[x, y, ...]]) or an RLE ({counts, size})", "");
  if (!size->is_array() || size->size() != 2 || (*size)[0] != rows || (*size)[1] != cols)
    throw DataError(
        where + ": an RLE of size " + size->dump(),
        "expected its image's [height, width], [" + std::to_string(rows) + ", " + std::to_string(cols) + "]", "");
  if (counts->is_string()) {
    r.counts = compressed_counts(counts->get<std::string>(), where);
  } else {
    if (!counts->is_array())
      throw DataError(where + ": RLE counts " + counts->dump().substr(0, 60),
                      "expected a list of counts or a compressed RLE string", "");
    for (const Json& c : *counts) {
      if (!c.is_number_unsigned() || c.get<uint64_t>() > UINT32_MAX)
        throw DataError(where + ": an RLE count " + c.dump(), "expected counts of 0 or more", "");
      r.counts.push_back(c.get<uint32_t>());
    }
  }
  uint64_t total = 0;
  for (const uint32_t c : r.counts) total += c;
  if (total != uint64_t(rows) * uint64_t(cols))
    throw DataError(where + ": RLE counts that add up to " + std::to_string(total),
                    "expected height x width = " + std::to_string(uint64_t(rows) * uint64_t(cols)), "");
  return r;
}

// Fills a polygon (x, y pairs) into `mask` with `id`: a pixel is the
// polygon's where its centre lies inside (even-odd rule, a centre on the
// right or lower edge outside), so [2, 2, 10, 2, 10, 10, 2, 10] covers
// 8x8 pixels, the area COCO counts for it.
void fill_polygon(const std::vector<double>& xy, uint16_t id, cv::Mat& mask) {
  const size_t n = xy.size() / 2;
  double top = xy[1], bottom = xy[1];
  for (size_t i = 1; i < n; ++i) top = std::min(top, xy[2 * i + 1]), bottom = std::max(bottom, xy[2 * i + 1]);
  const int first = static_cast<int>(std::clamp(std::floor(top), 0.0, double(mask.rows)));
  const int last = static_cast<int>(std::clamp(std::ceil(bottom), 0.0, double(mask.rows)));
  std::vector<double> crossings;
  for (int y = first; y < last; ++y) {
    const double centre = y + 0.5;
    crossings.clear();
    for (size_t i = 0; i < n; ++i) {
      const double x0 = xy[2 * i], y0 = xy[2 * i + 1];
      const double x1 = xy[2 * ((i + 1) % n)], y1 = xy[2 * ((i + 1) % n) + 1];
      if ((y0 <= centre) != (y1 <= centre)) crossings.push_back(x0 + (centre - y0) * (x1 - x0) / (y1 - y0));
    }
    std::sort(crossings.begin(), crossings.end());
    // Centres x + 0.5 in [enter, leave): columns ceil(enter - 0.5) to ceil(leave - 0.5) - 1.
    const auto column = [&](double x) {
      return static_cast<int>(std::ceil(std::clamp(x - 0.5, -1.0, double(mask.cols))));
    };
    for (size_t k = 0; k + 1 < crossings.size(); k += 2)
      for (int x = std::max(0, column(crossings[k])); x < std::min(mask.cols, column(crossings[k + 1])); ++x)
        mask.at<uint16_t>(y, x) = id;
  }
}

// Paints region `r` into `mask` (16-bit) with value `id`.
void paint_region(const Region& r, int id, cv::Mat& mask) {
  for (const auto& xy : r.polygons) fill_polygon(xy, static_cast<uint16_t>(id), mask);
  // Uncompressed RLE: alternating runs of 0 and 1 down the columns.
  uint64_t position = 0;
  bool on = false;
  for (const uint32_t run : r.counts) {
    if (on)
      for (uint64_t p = position; p < position + run; ++p)
        mask.at<uint16_t>(static_cast<int>(p % uint64_t(mask.rows)), static_cast<int>(p / uint64_t(mask.rows))) =
            static_cast<uint16_t>(id);
    position += run;
    on = !on;
  }
}

// An annotation's bbox [x, y, width, height] as x1, y1, x2, y2; a box that
// is not finite, not positive in size or reaches outside its image gives the
// image's bad-record reason instead.
std::optional<Box> read_box(const Json& a, const std::string& where, const Image& image, std::string& bad) {
  const auto bbox = a.find("bbox");
  if (bbox == a.end()) return std::nullopt;
  const auto text = bbox->dump().substr(0, 80);
  if (!bbox->is_array() || bbox->size() != 4 ||
      !std::all_of(bbox->begin(), bbox->end(), [](const Json& v) { return v.is_number(); })) {
    if (bad.empty()) bad = where + ": bbox " + text + ", expected [x, y, width, height]";
    return std::nullopt;
  }
  const double x = (*bbox)[0].get<double>(), y = (*bbox)[1].get<double>();
  const double w = (*bbox)[2].get<double>(), h = (*bbox)[3].get<double>();
  const bool finite = std::isfinite(x) && std::isfinite(y) && std::isfinite(w) && std::isfinite(h);
  if (!finite || w <= 0 || h <= 0 || !box_inside({x, y, x + w, y + h}, image.rows, image.cols)) {
    if (bad.empty())
      bad = where + ": bbox " + text + ", expected a finite [x, y, width, height] with width and height above 0 " +
            "inside image " + std::to_string(image.id) + "'s " + std::to_string(image.rows) + "x" +
            std::to_string(image.cols);
    return std::nullopt;
  }
  return Box{std::max(0.0, x), std::max(0.0, y), std::min<double>(image.cols, x + w),
             std::min<double>(image.rows, y + h)};
}

Instances read(const std::string& file, const std::string& images_folder, Read what) {
  std::ifstream in(file);
  if (!in)
    throw ConfigError("annotations '" + file + "' cannot be read", "expected a COCO instances JSON", "check the path");
  Json json;
  try {
    json = Json::parse(in);
  } catch (const Json::parse_error& e) {
    throw DataError(file + ": not JSON (" + std::string(e.what()) + ")", "expected a COCO instances JSON", "");
  }
  for (const char* key : {"images", "annotations", "categories"})
    if (!json.is_object() || !json.contains(key) || !json[key].is_array())
      throw DataError(file + ": no '" + key + "' list",
                      "expected a COCO instances JSON (images, annotations, categories)", "");
  // Categories, in id order.
  std::map<int64_t, std::string> categories;
  for (const Json& c : json["categories"]) {
    const int64_t id = integer(c, "id", file + ": a category");
    if (!categories.emplace(id, c.value("name", std::to_string(id))).second)
      throw DataError(at(file, "category", id) + " appears twice", "expected unique category ids", "");
  }
  Instances set;
  std::map<int64_t, int64_t> class_of;  // category id -> its place in id order
  for (const auto& [id, name] : categories) {
    class_of[id] = static_cast<int64_t>(set.category_ids.size());
    set.category_ids.push_back(id);
    set.category_names.push_back(name);
  }
  const fs::path root = images_folder.empty() ? fs::path(file).parent_path() : fs::path(images_folder);
  std::vector<Image>& images = set.images;
  std::map<int64_t, size_t> index_of;
  for (const Json& i : json["images"]) {
    Image image;
    image.id = integer(i, "id", file + ": an image");
    const std::string where = at(file, "image", image.id);
    if (index_of.count(image.id)) throw DataError(where + " appears twice", "expected unique image ids", "");
    if (!i.contains("file_name") || !i["file_name"].is_string())
      throw DataError(where + " has no file_name", "expected the image's path", "");
    image.file_name = i["file_name"].get<std::string>();
    image.path = (root / image.file_name).string();
    if (!fs::is_regular_file(image.path))
      throw DataError(where + ": " + image.path + " does not exist", "expected the image file",
                      "check the images folder (the coco dataset's images:, convert's --images)");
    // Checked as read, before narrowing: a damaged 4294967312 must not become 16.
    const int64_t rows = integer(i, "height", where), cols = integer(i, "width", where);
    constexpr int64_t kLongestSide = 1 << 20;
    if (rows < 1 || cols < 1 || rows > kLongestSide || cols > kLongestSide ||
        uint64_t(rows) * uint64_t(cols) > image_codec::kMaxPixels)
      throw DataError(where + ": " + std::to_string(rows) + "x" + std::to_string(cols),
                      "expected a height and width from 1 to " + std::to_string(kLongestSide) + ", at most " +
                          std::to_string(image_codec::kMaxPixels) + " pixels",
                      "");
    image.rows = static_cast<int>(rows);
    image.cols = static_cast<int>(cols);
    index_of[image.id] = images.size();
    images.push_back(std::move(image));
  }
  if (images.empty()) throw DataError(file + " lists no images", "expected images", "");
  std::set<int64_t> annotation_ids;
  std::vector<std::vector<Region>> crowds(images.size());
  for (const Json& a : json["annotations"]) {
    const int64_t id = integer(a, "id", file + ": an annotation");
    const std::string where = at(file, "annotation", id);
    if (!annotation_ids.insert(id).second)
      throw DataError(where + " appears twice", "expected unique annotation ids", "");
    const auto image = index_of.find(integer(a, "image_id", where));
    if (image == index_of.end())
      throw DataError(where + " names image " + std::to_string(integer(a, "image_id", where)),
                      "expected an id of the images list", "");
    const auto category = class_of.find(integer(a, "category_id", where));
    if (category == class_of.end())
      throw DataError(where + " names category " + std::to_string(integer(a, "category_id", where)),
                      "expected an id of the categories list", "");
    Image& owner = images[image->second];
    // Boxes need no segmentation (and masks no bbox): each target reads its own.
    Region r = what == Read::boxes ? Region{} : read_region(a, file, id, owner.rows, owner.cols);
    r.id = id;
    r.crowd = a.value("iscrowd", 0) != 0;
    r.category = category->second;
    if (what == Read::boxes) {
      r.box = read_box(a, where, owner, owner.bad);
      if (const auto area = a.find("area"); area != a.end() && area->is_number() && area->get<double>() > 0)
        r.area = area->get<double>();
      if (!r.box && owner.bad.empty())
        throw DataError(where + " has no bbox", "expected [x, y, width, height] for target: boxes", "");
    }
    (r.crowd ? crowds[image->second] : owner.regions).push_back(std::move(r));
  }
  for (size_t i = 0; i < images.size(); ++i)  // crowd regions last: ignored even where an instance overlaps
    for (auto& r : crowds[i]) images[i].regions.push_back(std::move(r));
  return set;
}

}  // namespace

Instances read_instances(const std::string& file, const std::string& images, Read what) {
  try {
    return read(file, images, what);
  } catch (const Json::exception& e) {  // a value of another type than COCO's ("iscrowd": "no")
    throw DataError(file + ": " + e.what(), "expected a COCO instances JSON", "");
  }
}

cv::Mat paint_mask(const Image& image, int crowd_value) {
  cv::Mat mask(image.rows, image.cols, CV_16UC1, cv::Scalar(0));
  for (const Region& r : image.regions) paint_region(r, r.crowd ? crowd_value : static_cast<int>(r.category + 1), mask);
  return mask;
}

}  // namespace trainyard::coco
