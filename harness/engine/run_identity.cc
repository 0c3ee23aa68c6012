// Identities of a build, a plugin and a shard's share of the schedule (see run_identity.h).
#include "harness/engine/run_identity.h"

#include <fstream>
#include <system_error>
#include <filesystem>

#include <fmt/format.h>

#include "harness/draw/schedule.h"
#include "reference/stable_hash.h"

namespace nvfp4 {

std::string file_identity(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return "";
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  // FNV-1a over the bytes, chunk by chunk: the same as fnv1a() of the whole file.
  uint64_t h = 0xcbf29ce484222325ull;
  std::string chunk(1 << 20, '\0');
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    for (std::streamsize x = 0; x < in.gcount(); ++x) {
      h ^= static_cast<unsigned char>(chunk[static_cast<size_t>(x)]);
      h *= 0x100000001b3ull;
    }
  }
  if (in.bad()) return "";
  return fmt::format("fnv1a64:{:016x}", h);
}

std::string origin_identity(const std::string& origin) {
  if (origin == "builtin") return "";
  std::string id = file_identity(origin);
  const size_t colon = origin.rfind(':');
  if (id.empty() && colon != std::string::npos) id = file_identity(origin.substr(0, colon));
  return id;
}

const std::string& program_identity() {
  static const std::string id = file_identity("/proc/self/exe");
  return id;
}

std::string schedule_digest(uint64_t seed, const std::string& kernel_name, const Shard& shard, int64_t walked) {
  uint64_t h = splitmix64(static_cast<uint64_t>(walked));
  if (walked > 0) {
    h = splitmix64(h ^ schedule_case_seed(seed, kernel_name, shard.case_index(0)));
    h = splitmix64(h ^ schedule_case_seed(seed, kernel_name, shard.case_index(walked - 1)));
  }
  return fmt::format("{:016x}", h);
}

}  // namespace nvfp4
