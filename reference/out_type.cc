// Output words as bytes and as text (out_type.h).
#include "reference/out_type.h"

#include <charconv>
#include <cstdio>
#include <stdexcept>

namespace nvfp4 {

std::vector<uint8_t> words_to_bytes(OutType t, const std::vector<uint32_t>& words) {
  const int n = out_word_bytes(t);
  std::vector<uint8_t> bytes(words.size() * static_cast<size_t>(n));
  for (size_t i = 0; i < words.size(); ++i) {
    for (int b = 0; b < n; ++b) bytes[i * n + b] = static_cast<uint8_t>(words[i] >> (8 * b));  // little-endian
  }
  return bytes;
}

std::vector<uint32_t> bytes_to_words(OutType t, const uint8_t* bytes, size_t size) {
  const size_t n = static_cast<size_t>(out_word_bytes(t));
  if (size % n != 0)
    throw std::invalid_argument("bytes_to_words: " + std::to_string(size) + " bytes is not a whole number of " +
                                std::to_string(n) + "-byte words");
  std::vector<uint32_t> words(size / n);
  for (size_t i = 0; i < words.size(); ++i) {
    uint32_t w = 0;
    for (size_t b = 0; b < n; ++b) w |= static_cast<uint32_t>(bytes[i * n + b]) << (8 * b);
    words[i] = w;
  }
  return words;
}

std::vector<uint32_t> widen_words(const uint16_t* c, size_t count) { return std::vector<uint32_t>(c, c + count); }

std::vector<uint16_t> narrow_words(const std::vector<uint32_t>& words) {
  std::vector<uint16_t> out(words.size());
  for (size_t i = 0; i < words.size(); ++i) out[i] = static_cast<uint16_t>(words[i]);
  return out;
}

std::string word_hex(OutType t, uint32_t word) {
  char buf[16];
  std::snprintf(buf, sizeof buf, out_word_bytes(t) == 4 ? "%08x" : "%04x", static_cast<unsigned>(word));
  return buf;
}

std::string word_text(OutType t, uint32_t word) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, decode_out(t, word));
  return std::string(buf, res.ptr) + " (0x" + word_hex(t, word) + ")";
}

}  // namespace nvfp4
