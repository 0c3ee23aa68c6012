// Linked into every GPU test binary: when ctest hands the test a GPU from a resource spec
// (CTEST_RESOURCE_GROUP_0_GPUS = "id:N,slots:1", see scripts/ctest-resource-spec.sh), make N the
// only device this process and its worker processes see. Runs before main, so before CUDA starts.
#include <cstdlib>
#include <string>

namespace {

const bool kGpuSelected = [] {
  const char* group = std::getenv("CTEST_RESOURCE_GROUP_0_GPUS");
  if (!group) return false;
  const std::string text = group;
  const size_t id = text.find("id:");
  if (id == std::string::npos) return false;
  const std::string device = text.substr(id + 3, text.find(',', id) - (id + 3));
  setenv("CUDA_VISIBLE_DEVICES", device.c_str(), 1);
  return true;
}();

}  // namespace
