// The record format: round trip, and damaged bytes give BadRecord with a reason.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "support/support.h"
#include "trainyard/error.h"
#include "trainyard/record.h"

namespace trainyard {
namespace {

Record sample() {
  Record r;
  r.images.push_back({ImageEncoding::raw, 2, 3, 1, std::string("\x01\x02\x03\x04\x05\x06", 6)});
  r.images.push_back({ImageEncoding::png, 28, 28, 3, std::string(100, 'x')});
  r.labels.push_back(Label::class_index(7));
  r.labels.push_back(Label::vector({0.5f, -1.0f}));
  r.id = "shirt/0001.png";
  return r;
}

TEST(RecordFormat, RoundTripKeepsEveryField) {
  std::string bytes = encode_record(sample());
  Record back = decode_record(bytes.data(), bytes.size());
  ASSERT_EQ(back.images.size(), 2u);
  EXPECT_EQ(back.images[0].bytes, sample().images[0].bytes);
  EXPECT_EQ(back.images[1].encoding, ImageEncoding::png);
  EXPECT_EQ(back.images[1].rows, 28u);
  EXPECT_EQ(back.images[1].channels, 3);
  ASSERT_EQ(back.labels.size(), 2u);
  EXPECT_EQ(back.labels[0].index, 7);
  EXPECT_EQ(back.labels[1].values, (std::vector<float>{0.5f, -1.0f}));
  EXPECT_EQ(back.id, "shirt/0001.png");
}

TEST(RecordFormat, KeysSortInInsertionOrderAndMetadataLast) {
  EXPECT_EQ(record_key(12), "0000000012");
  EXPECT_LT(record_key(9), record_key(10));
  EXPECT_LT(record_key(9999999999), std::string(kMetadataKey));
}

TEST(RecordFormat, DamagedBytesGiveBadRecordWithTheReason) {
  std::string bytes = encode_record(sample());
  for (size_t cut : {size_t(0), size_t(3), size_t(10), bytes.size() - 1}) {
    try {
      decode_record(bytes.data(), cut);
      FAIL() << "no error at " << cut;
    } catch (const BadRecord& e) {
      EXPECT_NE(std::string(e.what()).find(cut < 4 ? "truncated record" : "truncated"), std::string::npos) << e.what();
    }
  }
  std::string bad = bytes;
  bad[0] = 'X';
  EXPECT_THROW(decode_record(bad.data(), bad.size()), BadRecord);
  bad = bytes + "junk";
  try {
    decode_record(bad.data(), bad.size());
    FAIL();
  } catch (const BadRecord& e) {
    EXPECT_STREQ(e.what(), "4 unexpected bytes after the record");
  }
}

TEST(RecordFormat, MetadataRoundTripAndVersionCheck) {
  DatasetMetadata m;
  m.count = 5;
  m.class_names = {"cat", "dog"};
  m.image_shapes = {"28x28x1"};
  m.source = "idx x";
  DatasetMetadata back = decode_metadata(encode_metadata(m));
  EXPECT_EQ(back.count, 5);
  EXPECT_EQ(back.class_names, m.class_names);
  EXPECT_EQ(back.image_shapes, m.image_shapes);
  EXPECT_THROW(decode_metadata("format_version=9\ncount=1\n"), Error);
  EXPECT_EQ(decode_metadata("format_version=2\ncount=1\n").format_version, kBoxesRecordFormatVersion);
}

// Boxes make a version-2 record (so that older readers refuse it); a version-1
// record stays byte for byte what it was.
TEST(RecordFormat, BoxesRoundTripAsVersion2AndDamagedBoxesAreBadRecords) {
  const std::string plain = encode_record(sample());
  EXPECT_EQ(plain[4], char(kRecordFormatVersion));
  Record r = sample();
  const std::vector<float> boxes = {1, 2, 30, 40, 3, 0, 1000, 5.5f, 6, 7, 8, 0, 1, 2.25f};
  r.labels = {Label::boxes(boxes)};
  const std::string bytes = encode_record(r);
  EXPECT_EQ(bytes[4], char(kBoxesRecordFormatVersion));
  const Record back = decode_record(bytes.data(), bytes.size());
  ASSERT_EQ(back.labels.size(), 1u);
  EXPECT_EQ(back.labels[0].kind, Label::Kind::boxes);
  EXPECT_EQ(back.labels[0].values, boxes);
  const auto reason = [](std::string b) {
    try {
      decode_record(b.data(), b.size());
    } catch (const BadRecord& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string v1 = bytes;
  v1[4] = char(kRecordFormatVersion);
  EXPECT_EQ(reason(v1), "a boxes label (kind 2) in a version-1 record, expected version 2");
  // One float short of two boxes: the length field (after the kind byte) says 13, and 4 bytes go.
  Record short_by_one = r;
  short_by_one.labels[0].values.pop_back();
  EXPECT_EQ(reason(encode_record(short_by_one)),
            "a boxes label of 13 values, expected 7 per box (x1, y1, x2, y2, class, crowd, area)");
  std::string v3 = bytes;
  v3[4] = 3;
  EXPECT_EQ(reason(v3), "record format version 3, this reader knows 1 and 2");
}

}  // namespace
}  // namespace trainyard

namespace trainyard {
namespace {

TEST(RecordFormat, AHugeDeclaredLabelLengthIsABadRecordNotAnAllocation) {
  // Found by fuzz_record (kept in its corpus): a damaged label length used to
  // allocate gigabytes before the bytes were checked.
  std::ifstream in(test::source_dir() + "/tests/fuzz/corpus/record/regression-huge-label-length.bin", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(bytes.empty());
  try {
    decode_record(bytes.data(), bytes.size());
    FAIL() << "decoded";
  } catch (const BadRecord& e) {
    // Its image header is damaged too: since 1.0 that is refused first, also before any allocation.
    const std::string what = e.what();
    EXPECT_TRUE(what.find("bytes are left in the record") != std::string::npos ||
                what.find("expected at least 1x1x1") != std::string::npos)
        << what;
  }
}

}  // namespace
}  // namespace trainyard
