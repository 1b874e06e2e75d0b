#pragma once
/// Errors a component may throw.
///
/// The host prints `error: WHERE: WHAT` and exits 2 for a ConfigError (bad
/// input the user can fix: a missing file, an option combination that makes no
/// sense), and reports any other exception as a crash of the component, with
/// the component's and the library's name, exit 1.
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
  ConfigError(const std::string& what, const std::string& expected_and_got,
              const std::string& hint);
  ~ConfigError() override;
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
