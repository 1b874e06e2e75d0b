#pragma once
// Helpers for tests that run the real trainyard binary and read what it wrote.
#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

namespace trainyard::test {

struct CommandResult {
  int exit_code = -1;
  std::string out, err;
};

/// Runs a shell command; captures stdout and stderr.
CommandResult run_command(const std::string& command);
/// `trainyard ARGS` with the test components' folder available via --plugin-dir where asked.
CommandResult trainyard(const std::string& args);
/// `r` answered bad input as trainyard must: exit 2 and one stderr line,
/// "error: ..." holding `part`.
void expect_one_error_line(const CommandResult& r, const std::string& part);
/// The lines of `text` that are not empty (stderr's lines, for "exactly one error line").
std::vector<std::string> nonempty_lines(const std::string& text);
/// The same with environment settings first ("NAME=VALUE NAME2=VALUE2").
CommandResult trainyard_with_env(const std::string& env, const std::string& args);
/// A small photo set (20 training and 10 validation JPEGs in 10 classes, and
/// the damaged files in damaged/) made by scripts/data/make_photo_set.py,
/// once per test process; its folder.
const std::string& small_photo_set();
/// Runs trainyard `args` in the background (`environment`, e.g. "VAR=1 ",
/// before it); once the shell test `ready` holds (e.g. "-s FILE"), waits
/// `delay_ms`, runs the shell command `action` ($pid is trainyard's) and
/// waits for trainyard to end.
CommandResult run_and_act(const std::string& args, const std::string& ready, int delay_ms, const std::string& action,
                          const std::string& environment = "");

/// Starts trainyard with `args` in the background, waits until the file
/// `started` exists (training has begun) and `delay_ms` more, sends `signal`
/// (TERM, KILL, ...), and returns how it ended.
CommandResult interrupted(const std::string& args, const std::string& started, int delay_ms, const std::string& signal,
                          const std::string& environment = "");
/// A new empty folder under the test temp root, unique per test.
std::string temp_dir(const std::string& name);
void write_file(const std::string& path, const std::string& content);
std::string read_file(const std::string& path);
/// The step line of a --profile summary: each phase's share of the step, in
/// percent, as printed ("forward 1.20 (43%)" gives 43), the remainder last.
std::vector<int> profile_step_shares(const std::string& summary);
std::vector<std::string> read_lines(const std::string& path);
bool contains(const std::string& text, const std::string& part);
/// How many times `part` occurs in `text` (not overlapping).
int64_t occurrences(const std::string& text, const std::string& part);

/// A small experiment on synthetic data (learnable in a few epochs, < 1 s).
/// `more` is appended as extra top-level YAML.
std::string synthetic_experiment(const std::string& name, const std::string& more = "");

/// Paths baked in by CMake, moved where a relocated copy of the build says:
/// a package made by scripts/package.sh runs the suite from wherever it is
/// unpacked, against that machine's Python (TRAINYARD_TEST_BUILD_DIR,
/// TRAINYARD_TEST_SOURCE_DIR, TRAINYARD_TEST_PYTHON; see bin/trainyard-tests
/// in the package).
std::string trainyard_binary();
std::string builtin_plugin_dir();
std::string fixture_dir(const std::string& name);
std::string source_dir();
/// The Python with torch (and the readers) that tests run.
std::string python();

/// The largest absolute difference between the floating-point tensors of two
/// checkpoint files' "network" archives (or `key`'s: "part_ema", the averaged weights).
double max_checkpoint_difference(const std::string& a, const std::string& b, const std::string& key = "network");

/// Every tensor of two checkpoint files' "network" archives (or `key`'s:
/// "part_ema", the averaged weights) is bitwise equal. Returns "" or a
/// description of the first difference.
std::string compare_checkpoint_networks(const std::string& a, const std::string& b, const std::string& key = "network");
/// "" when two checkpoints' optimizer states hold equal tensors (matched
/// without LibTorch's keys, which are the parameters' addresses), else what differs.
std::string compare_optimizer_states(const std::string& a, const std::string& b);

}  // namespace trainyard::test

namespace trainyard {
struct Context;
}
namespace trainyard::host {
class Registry;
class EpochLoop;
}  // namespace trainyard::host

namespace trainyard::test {

/// The built-in plugins, loaded once from the build's plugin folder.
const host::Registry& builtin_registry();

/// The experiment `yaml` (empty: synthetic_experiment(name)) with `sets`
/// applied, assembled in this process as `trainyard run` assembles it, over a
/// temporary run directory; `context` gets its seed. The experiment stays
/// alive for the test binary's life (the trainer refers to it).
std::unique_ptr<host::EpochLoop> assembled(const std::string& name, const std::vector<std::string>& sets,
                                           Context& context, const std::string& yaml = "");

/// The newest ckpt-*.pt of RUN_DIR/checkpoints ("" if none); manifests and best.pt are not counted.
std::string latest_checkpoint(const std::string& run_dir);

/// Replaces (or adds) record INDEX of the LMDB environment DB with VALUE, as
/// bytes, to damage a converted dataset. Throws std::runtime_error on failure.
void put_lmdb_record(const std::string& db, int64_t index, const std::string& value);
/// Any key of an LMDB: written, or deleted.
void put_lmdb_value(const std::string& db, const std::string& key, const std::string& value);
void delete_lmdb_key(const std::string& db, const std::string& key);

/// One tensor of a checkpoint file's network, by its dotted parameter or
/// buffer name ("layers.0.weight"; submodules are nested archives).
at::Tensor checkpoint_tensor(const std::string& checkpoint, const std::string& name);

/// A 2-d tensor as text NumPy's loadtxt reads (rows of space-separated
/// values, 17 significant digits), for the cross-checks against Python libraries.
void write_matrix(const std::string& path, const at::Tensor& matrix);

}  // namespace trainyard::test
