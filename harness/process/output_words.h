// A call's outputs as one word per element (out_type.h), held as narrowly as they came: a
// quantizer's Q and SFQ are bytes, and a huge case's 1.2 billion of them held as 32-bit words
// were 4.5 GB for each copy (a call's output, its read-back once the device was done, three calls
// a case). Immutable once made and shared by copies, so `c_later = c` and the outcome's copy of
// the judged output cost nothing.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

namespace nvfp4 {

class OutputWords {
 public:
  OutputWords() = default;
  // Words of any width (the GEMM family's outputs).
  OutputWords(std::vector<uint32_t> words)  // NOLINT(google-explicit-constructor): a drop-in for the word vector
      : s_(words.empty() ? nullptr : std::make_shared<Storage>()) {
    if (s_) s_->words = std::move(words);
  }
  // Outputs that are bytes (every word fits 8 bits), kept as bytes.
  static OutputWords of_bytes(std::vector<uint8_t> bytes) {
    OutputWords o;
    if (bytes.empty()) return o;
    o.s_ = std::make_shared<Storage>();
    o.s_->byte_wide = true;
    o.s_->bytes = std::move(bytes);
    return o;
  }

  size_t size() const { return !s_ ? 0 : s_->byte_wide ? s_->bytes.size() : s_->words.size(); }
  bool empty() const { return size() == 0; }
  uint32_t operator[](size_t e) const { return s_->byte_wide ? s_->bytes[e] : s_->words[e]; }
  // Held as bytes (of_bytes, or decoded from a channel where every word fit a byte).
  bool byte_wide() const { return s_ && s_->byte_wide; }
  // The bytes of a byte-wide output (empty otherwise).
  const std::vector<uint8_t>& bytes() const { return byte_wide() ? s_->bytes : empty_bytes(); }
  // The words as 32-bit words: byte-wide outputs are widened once, on first use (the GEMM
  // family's oracle reads words; a GEMM output that happened to fit bytes on the channel).
  const std::vector<uint32_t>& words() const {
    if (!s_) return empty_words();
    if (s_->byte_wide) std::call_once(s_->widened, [s = s_.get()] { s->words.assign(s->bytes.begin(), s->bytes.end()); });
    return s_->words;
  }
  const uint32_t* data() const { return words().data(); }
  // The same storage (a copy of this one): equal without a comparison.
  bool shares(const OutputWords& o) const { return s_ && s_ == o.s_; }

  // Element by element, whatever the storage.
  bool operator==(const OutputWords& o) const {
    if (s_ == o.s_) return true;
    if (size() != o.size()) return false;
    if (byte_wide() && o.byte_wide()) return std::memcmp(s_->bytes.data(), o.s_->bytes.data(), size()) == 0;
    if (!byte_wide() && !o.byte_wide()) return s_->words == o.s_->words;
    for (size_t e = 0; e < size(); ++e)
      if ((*this)[e] != o[e]) return false;
    return true;
  }
  bool operator!=(const OutputWords& o) const { return !(*this == o); }

 private:
  struct Storage {
    bool byte_wide = false;
    std::vector<uint8_t> bytes;
    std::vector<uint32_t> words;  // byte-wide: the widened copy, once asked for
    std::once_flag widened;
  };
  static const std::vector<uint8_t>& empty_bytes() {
    static const std::vector<uint8_t> none;
    return none;
  }
  static const std::vector<uint32_t>& empty_words() {
    static const std::vector<uint32_t> none;
    return none;
  }
  std::shared_ptr<Storage> s_;
};

}  // namespace nvfp4
