// SDK 1.5 fields: each kind's collation rule and the errors for samples that
// disagree (trainyard/fields.h).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <trainyard/error.h>
#include <trainyard/fields.h>

#include "support/support.h"

namespace trainyard {
namespace {

FieldExample sample(int64_t boxes, int64_t height, int64_t width) {
  FieldExample e{{at::full({2}, float(boxes)), at::scalar_tensor(boxes, at::kLong)}, {}};
  e.fields["boxes"] = ragged(at::arange(boxes * 4, at::kFloat).view({boxes, 4}));
  e.fields["mask"] = dense(at::ones({height, width}, at::kLong), 255);
  e.fields["original_size"] = meta(at::tensor({height, width}, at::kLong));
  return e;
}

TEST(Fields, EachKindCollatesByItsRule) {
  const FieldBatch b = collate({sample(2, 3, 4), sample(0, 5, 2), sample(1, 1, 1)}, {7, 8, 9});
  EXPECT_EQ(b.batch.indices, (std::vector<int64_t>{7, 8, 9}));
  EXPECT_EQ(b.batch.input.sizes(), (at::IntArrayRef{3, 2}));
  // Ragged: rows concatenated, a count per sample (0 too).
  const Field& boxes = b.fields.at("boxes");
  EXPECT_EQ(boxes.values.sizes(), (at::IntArrayRef{3, 4}));
  EXPECT_TRUE(at::equal(boxes.counts, at::tensor({2, 0, 1}, at::kLong)));
  EXPECT_EQ(sample_values(boxes, 1).size(0), 0);
  EXPECT_TRUE(at::equal(sample_values(boxes, 2), at::arange(4, at::kFloat).view({1, 4})));
  // Dense: padded to the largest height and width with the fill value.
  const Field& mask = b.fields.at("mask");
  EXPECT_EQ(mask.values.sizes(), (at::IntArrayRef{3, 5, 4}));
  EXPECT_EQ(mask.values[0][2][3].item<int64_t>(), 1);
  EXPECT_EQ(mask.values[0][3][0].item<int64_t>(), 255);  // below sample 0's 3 rows
  EXPECT_EQ(mask.values[1][4][1].item<int64_t>(), 1);
  EXPECT_EQ(mask.values[1][0][2].item<int64_t>(), 255);  // right of sample 1's 2 columns
  // Meta: stacked.
  EXPECT_TRUE(at::equal(b.fields.at("original_size").values, at::tensor({3, 4, 5, 2, 1, 1}, at::kLong).view({3, 2})));
}

TEST(Fields, SamplesThatDisagreeAreNamed) {
  FieldExample other = sample(1, 2, 2);
  other.fields.erase("mask");
  try {
    collate({sample(1, 2, 2), other}, {4, 11});
    FAIL() << "collated samples with different fields";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(test::contains(e.what(), "samples 4 and 11 differ in fields: 'mask' is missing")) << e.what();
  }
  other = sample(1, 2, 2);
  other.fields["boxes"] = ragged(at::zeros({1, 5}));
  try {
    collate({sample(1, 2, 2), other}, {4, 11});
    FAIL() << "collated boxes of 4 and 5 columns";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(test::contains(e.what(), "samples 4 and 11 differ in the shape of ragged field 'boxes'")) << e.what();
  }
  other = sample(1, 2, 2);
  other.fields["original_size"] = meta(at::tensor({2, 2}, at::kInt));
  EXPECT_THROW(collate({sample(1, 2, 2), other}, {4, 11}), ConfigError);
}

}  // namespace
}  // namespace trainyard
