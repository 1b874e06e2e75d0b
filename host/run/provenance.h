#pragma once
// What a run was made with, recorded in its run directory at every start:
// provenance.json (the latest invocation) and provenance.jsonl (all of them).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainyard::host {

class Registry;
struct LibraryInfo;

struct BuildInfo {
  std::string version;     ///< TRAINYARD_VERSION
  std::string git_commit;  ///< of the source tree at build time, "+dirty" with local changes; "unknown" outside git
};
const BuildInfo& build_info();

/// The provenance record: the command line, working
/// directory, trainyard version and commit, SDK API and fingerprint, host
/// name, LibTorch version, BLAS library, thread counts, world size, start
/// time, and every loaded plugin library's name, version, path and SHA-256.
nlohmann::ordered_json provenance_json(const std::vector<std::string>& argv, const Registry& registry, int world_size);

/// Writes provenance.json (atomically) and appends the same record, on one
/// line, to provenance.jsonl.
void record_provenance(const std::string& run_dir, const nlohmann::ordered_json& record);

/// The plugin libraries among `libraries` (those providing the experiment's
/// components, every stage's) whose content differs from what the run directory's provenance.json
/// recorded for a library of the same name: "libmlp.so (mlp 1.0.0): SHA-256
/// 3f2a9c41d0e7 when the run started, 9b01c2d3e4f5 now". Empty when nothing
/// changed, or when the record predates the hashes. Throws ConfigError when
/// provenance.json is missing or damaged (the check cannot be made). The
/// build fingerprint says the ABI matches; the hash says whether the code is
/// the same.
std::vector<std::string> changed_plugin_libraries(const std::string& run_dir,
                                                  const std::vector<const LibraryInfo*>& libraries);

/// The shared library providing BLAS to this process (the real file behind
/// libblas.so.3), or "unknown".
std::string loaded_blas();

/// What `trainyard --version` says of the machine, two lines: "LibTorch 2.15.0
/// (BLAS: ...); CUDA ..." and "cpu: AMD EPYC; AVX2 yes, ...".
std::string runtime_summary();

}  // namespace trainyard::host
