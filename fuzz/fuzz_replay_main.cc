// The main() linked into every fuzz target when it is not built with libFuzzer: it replays the
// files and directories named on the command line through LLVMFuzzerTestOneInput, so each target
// builds with any compiler and ctest replays the corpus. A failing input aborts, as under libFuzzer.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

namespace fs = std::filesystem;

// README.md and other notes live beside the inputs in corpus/<target>/; they are not inputs.
bool is_note(const fs::path& p) { return p.extension() == ".md"; }

bool replay_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    return false;
  }
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::fprintf(stderr, "replaying %s (%zu bytes)\n", path.c_str(), bytes.size());
  // A copy of exactly the input's size, so ASan sees reads past its end as libFuzzer would.
  std::unique_ptr<uint8_t[]> copy(new uint8_t[bytes.size()]);
  if (!bytes.empty()) std::memcpy(copy.get(), bytes.data(), bytes.size());
  LLVMFuzzerTestOneInput(copy.get(), bytes.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<fs::path> files;
  bool bad_argument = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    // libFuzzer flags (-runs=N, ...) are accepted and ignored so scripts can call both builds alike.
    if (!arg.empty() && arg[0] == '-') continue;
    std::error_code ec;
    if (fs::is_directory(arg, ec)) {
      std::vector<fs::path> in_dir;
      for (const auto& entry : fs::recursive_directory_iterator(arg)) {
        if (entry.is_regular_file() && !is_note(entry.path())) in_dir.push_back(entry.path());
      }
      std::sort(in_dir.begin(), in_dir.end());  // a stable order makes logs comparable
      files.insert(files.end(), in_dir.begin(), in_dir.end());
    } else if (fs::is_regular_file(arg, ec)) {
      files.push_back(arg);
    } else {
      std::fprintf(stderr, "no such file or directory: %s\n", arg.c_str());
      bad_argument = true;
    }
  }
  if (bad_argument) return 2;
  if (files.empty()) {
    std::fprintf(stderr, "usage: %s FILE_OR_DIR... (replays each input; no inputs found)\n", argv[0]);
    return 2;
  }
  size_t replayed = 0;
  for (const auto& f : files) {
    if (!replay_file(f)) return 2;
    ++replayed;
  }
  std::fprintf(stderr, "replayed %zu inputs, all passed\n", replayed);
  return 0;
}
