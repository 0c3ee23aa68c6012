// Case files and registered binary decoders behind one entry point for `replay`.
#include "harness/case_input.h"


#include "reference/case_file.h"

namespace nvfp4 {
namespace {

BinaryCaseDecoder& decoder_slot() {
  static BinaryCaseDecoder decoder;
  return decoder;
}

std::string read_bytes(const std::string& path) {
  static const InputLimit limit{case_file_limit().max_bytes, "a binary case", "that of case files"};
  return read_input_file(path, limit, false);
}

}  // namespace

void set_binary_case_decoder(BinaryCaseDecoder decoder) { decoder_slot() = std::move(decoder); }
bool have_binary_case_decoder() { return static_cast<bool>(decoder_slot()); }

Problem load_case_input(const std::string& path, const nvfp4_kernel_info* kernel, bool binary) {
  if (!binary) return read_case_file(path);
  const std::string bytes = read_bytes(path);
  if (!have_binary_case_decoder())
    throw CaseError(path + ": this nvfp4check has no decoder for binary inputs");
  std::string why;
  std::optional<Problem> p = decoder_slot()(bytes, kernel, &why);
  if (!p) throw CaseError(path + ": binary input not usable: " + (why.empty() ? "rejected by the decoder" : why));
  return *p;
}

}  // namespace nvfp4
