#pragma once
// A training run's directory over its life: checked before a resume writes
// to it; written once the run is checked (the experiment's snapshots and
// provenance.json, --fresh moving the previous one aside); removed again
// when bad input stops the run before its first checkpoint. Its checkpoints/
// folder is the checkpoint store's (train/checkpoint_store.h).
#include <string>

#include <nlohmann/json.hpp>

#include "config/experiment.h"

namespace trainyard::host {

class RunDirectory {
 public:
  explicit RunDirectory(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }

  /// Throws ConfigError when the directory (or its checkpoints/) exists and
  /// this user cannot write there: said as it is, before a load fails on the
  /// first write and reads as a bad checkpoint.
  void check_writable() const;

  /// Writes config.yaml, config.json and provenance.json (`provenance`, from
  /// run/provenance.h, with the run's own facts added). `fresh`: an existing
  /// directory is first renamed PATH.replaced-TIME and kept.
  void write(const Experiment& experiment, bool fresh, const nlohmann::ordered_json& provenance);

  /// Bad input stopped the run before its first checkpoint (`has_checkpoints`
  /// false): removes the directory if write() made it and puts --fresh's
  /// previous one back. Warns when it cannot.
  void undo_if_new(bool has_checkpoints);

 private:
  std::string path_;
  bool made_ = false;          ///< write() created the directory
  std::string kept_previous_;  ///< where --fresh moved the previous directory
};

}  // namespace trainyard::host
