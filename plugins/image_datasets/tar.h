#pragma once
// The pieces of the tar format and the WebDataset convention that both
// ways of reading shards use: indexed local files (webdataset.cpp) and
// streams from a pipe (webdataset_stream.cpp).
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace image_datasets::tar {

constexpr size_t kBlock = 512;

/// A header's numeric field: octal text, or base-256 when its high bit is set.
uint64_t number(const char* field, size_t width);

/// The most bytes of one member read into memory: an image or label member
/// of a stream, a local shard's image member (256 MiB).
constexpr uint64_t kMaxMemberBytes = uint64_t{256} << 20;
/// The most bytes of a GNU long name ('L') or pax ('x') record (1 MiB).
constexpr uint64_t kMaxNameRecordBytes = uint64_t{1} << 20;

/// The size field of the header that starts at byte `at` of `where`
/// ("shard FILE"), checked: octal digits (leading spaces allowed, ended by a
/// space or NUL) or a positive base-256 number that fits 64 bits, and at
/// most `left`, the bytes after the header that the file (or a stream's
/// limit) can hold. Throws DataError naming the field's byte offset.
uint64_t member_size(const char* header, uint64_t at, uint64_t left, const std::string& where);
/// A header's text field, up to its first NUL.
std::string text(const char* field, size_t width);
/// True when the header's stored checksum matches its bytes.
bool checksum_ok(const char* header);
/// The member's path from a ustar header (prefix + name).
std::string header_path(const char* header);
/// The next member's path from a GNU long-name body ('L') or pax records
/// ("LEN path=NAME\n", 'x'); empty when a pax header names none.
std::string long_name(char type, const std::string& body);

/// "dir/n01440764_10026.JPEG" -> {"dir/n01440764_10026", "jpeg"}: the key is
/// the path up to the first dot of the file name, the extension lower case.
std::pair<std::string, std::string> key_and_extension(const std::string& path);
/// True for the image members of a sample: JPEG, PNG and WebP by
/// image_codec.h's table of extensions (jpg, jpeg, png, webp).
bool is_image_extension(const std::string& ext);
/// The image members errors expect: "KEY.jpg, KEY.jpeg, KEY.png or KEY.webp".
std::string image_member_names();
/// A label member's class: KEY.cls (a decimal integer) or KEY.json (an
/// object with "label" or "cls"). Throws DataError naming `where`; -1 for
/// a JSON object with neither field (metadata, as img2dataset writes beside
/// KEY.cls, or a __meta__.json): not a label.
int64_t parse_label(const std::string& body, const std::string& ext, const std::string& where);

}  // namespace image_datasets::tar
