#pragma once
/// COCO instances files (the JSON of cocodataset.org that detection and
/// segmentation toolkits read and write): their images, categories and
/// annotations read and checked, and an image's annotations painted into one
/// mask of class ids. The built-in `coco` dataset and `trainyard convert
/// --from coco` read them through here; a dataset plugin of another team may
/// too (link Trainyard::sdk_helpers).
///
/// Classes: the categories in id order; category k (0 to K-1) is class k + 1
/// in a mask (0 the background) and class k among boxes.
///
/// Example:
///   const trainyard::coco::Instances set = trainyard::coco::read_instances("train.json", "", trainyard::coco::Read::masks);
///   cv::Mat ids = trainyard::coco::paint_mask(set.images[0], 255);  // CV_16UC1, crowd regions 255
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

namespace trainyard::coco {

using Box = std::array<double, 4>;  ///< x1, y1, x2, y2 in the original image's pixels

/// One annotation's region, as the JSON gives it.
struct Region {
  int64_t id = 0;
  int64_t category = 0;                       ///< 0..K-1: the category's place in id order
  bool crowd = false;                         ///< iscrowd: 1
  std::optional<Box> box;                     ///< the bbox (Read::boxes), where valid
  double area = 0;                            ///< COCO's area (the segment's, original pixels); 0: not given
  std::vector<std::vector<double>> polygons;  ///< Read::masks: x, y pairs in pixels
  std::vector<uint32_t> counts;               ///< Read::masks: RLE runs, column-major, zeros first
};

struct Image {
  int64_t id = 0;
  std::string file_name;  ///< as the JSON gives it
  std::string path;       ///< the images folder / file_name
  int rows = 0, cols = 0;
  std::vector<Region> regions;  ///< in the file's order, crowd regions last (painted over the others)
  std::string bad;              ///< Read::boxes: why this image is a bad record (a box outside it); empty: fine
};

struct Instances {
  std::vector<Image> images;  ///< in the file's order
  std::vector<int64_t> category_ids;
  std::vector<std::string> category_names;  ///< "name", or the id where there is none
};

/// How far a box may reach past its image's border: half a pixel, as COCO's
/// own boxes, rounded to 2 decimals, sometimes do.
constexpr double kBoxSlack = 0.5;

/// True when x1, y1, x2, y2 lie within a rows x cols image, kBoxSlack allowed past each border.
inline bool box_inside(const Box& b, double rows, double cols) {
  return b[0] >= -kBoxSlack && b[1] >= -kBoxSlack && b[2] <= cols + kBoxSlack && b[3] <= rows + kBoxSlack;
}

/// A region's area as COCOeval's area ranges take it: COCO's `area` where
/// the file gives one, else its box's. The region has a box (Read::boxes).
inline double region_area(const Region& r) {
  const Box& b = r.box.value();
  return r.area > 0 ? r.area : (b[2] - b[0]) * (b[3] - b[1]);
}

/// What read_instances reads of each annotation: its segmentation (polygons,
/// RLE: compressed or not) or its bbox and area.
enum class Read { masks, boxes };

/// Reads and checks `file`; `images` is the folder file_names are relative to
/// ("": the JSON's). Throws trainyard::ConfigError when the file cannot be
/// read, trainyard::DataError naming the file and the image, annotation or
/// category id for anything damaged (a repeated id, an unknown image or
/// category, a missing image file, a polygon of fewer than 3 points, an RLE
/// of another size than its image, no bbox with Read::boxes). A bbox that is
/// not finite, not positive in size or outside its image (half a pixel of
/// slack) is its image's `bad` reason instead (a bad record, not an error).
Instances read_instances(const std::string& file, const std::string& images, Read what);

/// The image's annotations as one CV_16UC1 mask: 0 the background, category
/// k's regions k + 1 in file order, crowd regions `crowd_value` over them.
/// A polygon covers the pixels whose centre lies inside (even-odd rule).
cv::Mat paint_mask(const Image& image, int crowd_value);

}  // namespace trainyard::coco
