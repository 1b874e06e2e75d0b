#pragma once
/// Errors a component may throw.
///
/// The host prints `error: WHERE: WHAT` and exits 2 for a ConfigError (bad
/// input the user can fix: a missing file, an option combination that makes no
/// sense) and for a DataError (the data itself is wrong: an empty file, a
/// foreign record, an impossible image header), and reports any other
/// exception as a crash of the component, with the component's and the
/// library's name, exit 1. A BadRecord that escapes a dataset's constructor
/// (its first sample read to learn the shapes) is bad input too, exit 2.
///
/// Example:
///   if (!std::filesystem::exists(dir))
///     throw trainyard::ConfigError("directory '" + dir + "' does not exist",
///                                  "a folder holding the idx files",
///                                  "set dataset.train.directory");

#include <stdexcept>
#include <string>

namespace trainyard {

/// Base of every error trainyard reports on one line.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message);
  ~Error() override;
};

/// Bad input (exit code 2). `what()` is "WHAT; expected X, got Y; HINT"
/// when built with the three-part constructor.
class ConfigError : public Error {
 public:
  explicit ConfigError(const std::string& message);
  ConfigError(const std::string& what, const std::string& expected_and_got, const std::string& hint);
  ~ConfigError() override;
};

/// The data is wrong, not the code and not the options: what a dataset finds
/// while it is built (an idx file whose header counts 0 images, an LMDB whose
/// records are not trainyard records, a header claiming an impossible image).
/// Bad input, exit 2, like a ConfigError (it is one). Since SDK 1.3.
///
/// Example:
///   if (count == 0)
///     throw trainyard::DataError(path + ": the header counts 0 images",
///                                "expected at least one image",
///                                "the file is empty or damaged: download it again");
class DataError : public ConfigError {
 public:
  using ConfigError::ConfigError;
  ~DataError() override;
};

/// A sample that cannot be read or decoded (a damaged record, an undecodable
/// image). The host's loader either stops with it (on_bad_record: error, the
/// default; exit 2) or skips the sample and counts it (on_bad_record: skip).
class BadRecord : public Error {
 public:
  explicit BadRecord(const std::string& reason);
  ~BadRecord() override;
};

}  // namespace trainyard
