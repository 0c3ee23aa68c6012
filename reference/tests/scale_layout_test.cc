// The two scale layouts of SPEC.md section 2: offsets against the GPU MODE construction of the
// [32, 4, Mt, 4, Kt, l] tensor, and round trips through the converters.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "reference/scale_layout.h"

namespace nvfp4 {
namespace {

const int64_t kRows[] = {1, 2, 31, 32, 33, 127, 128, 129, 257};
const int64_t kBlocks[] = {1, 3, 4, 5, 7, 8, 9, 17};

// The GPU MODE problems allocate the permuted scales as a contiguous [l, Mt, Kt, 32, 4, 4] tensor
// and view it, permuted (3, 4, 1, 5, 2, 0), as [32, 4, Mt, 4, Kt, l], into which scale (i, s, b)
// goes at [i % 32, (i % 128) / 32, i / 128, s % 4, s / 4, b]. Walking the physical tensor in
// memory order with nested loops gives each cell's offset by counting, with no formula.
TEST(ScaleLayout, PermutedOffsetsMatchTheGpuModeTensor) {
  for (int64_t rows : kRows) {
    for (int64_t kb : kBlocks) {
      for (int64_t l : {1, 3}) {
        const int64_t mt = (rows + 127) / 128, kt = (kb + 3) / 4;
        const std::vector<bool> padding = sf_permuted_padding_mask(rows, kb, l);
        ASSERT_EQ(static_cast<int64_t>(padding.size()), l * mt * kt * 32 * 4 * 4);
        ASSERT_EQ(sf_permuted_bytes(rows, kb, l), l * mt * kt * 512);
        int64_t physical = 0, cells = 0;
        for (int64_t b = 0; b < l; ++b)
          for (int64_t mm = 0; mm < mt; ++mm)
            for (int64_t kk = 0; kk < kt; ++kk)
              for (int64_t mm32 = 0; mm32 < 32; ++mm32)
                for (int64_t mm4 = 0; mm4 < 4; ++mm4)
                  for (int64_t kk4 = 0; kk4 < 4; ++kk4, ++physical) {
                    const int64_t i = mm * 128 + mm4 * 32 + mm32;  // inverse of the index map
                    const int64_t s = kk * 4 + kk4;
                    const bool pad = i >= rows || s >= kb;
                    ASSERT_EQ(padding[physical], pad) << "rows " << rows << " kb " << kb << " offset " << physical;
                    if (pad) continue;
                    ++cells;
                    ASSERT_EQ(sf_permuted_offset(rows, kb, b, i, s), physical)
                        << "rows " << rows << " kb " << kb << " b " << b << " i " << i << " s " << s;
                  }
        EXPECT_EQ(cells, l * rows * kb);
      }
    }
  }
}

TEST(ScaleLayout, LinearOffsetsAreRowMajor) {
  EXPECT_EQ(sf_linear_offset(5, 3, 0, 0, 0), 0);
  EXPECT_EQ(sf_linear_offset(5, 3, 0, 0, 2), 2);
  EXPECT_EQ(sf_linear_offset(5, 3, 0, 1, 0), 3);
  EXPECT_EQ(sf_linear_offset(5, 3, 2, 4, 1), (2 * 5 + 4) * 3 + 1);
}

TEST(ScaleLayout, RoundTripsKeepDataAndPadWithTheChosenByte) {
  const uint64_t seed = 20261130;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  for (int64_t rows : kRows) {
    for (int64_t kb : kBlocks) {
      for (int64_t l : {1, 2}) {
        for (uint8_t pad : {uint8_t(0x7F), uint8_t(0x00)}) {
          std::vector<uint8_t> linear(static_cast<size_t>(l * rows * kb));
          for (auto& x : linear) x = static_cast<uint8_t>(rng());
          const std::vector<uint8_t> permuted = sf_to_permuted(linear.data(), rows, kb, l, pad);
          const std::vector<bool> padding = sf_permuted_padding_mask(rows, kb, l);
          ASSERT_EQ(permuted.size(), padding.size());
          int64_t pads = 0;
          for (size_t x = 0; x < permuted.size(); ++x) {
            if (!padding[x]) continue;
            ++pads;
            ASSERT_EQ(permuted[x], pad) << "padding cell " << x;
          }
          EXPECT_EQ(pads, static_cast<int64_t>(permuted.size()) - l * rows * kb);
          for (int64_t b = 0; b < l; ++b)
            for (int64_t i = 0; i < rows; ++i)
              for (int64_t s = 0; s < kb; ++s)
                ASSERT_EQ(permuted[sf_permuted_offset(rows, kb, b, i, s)],
                          linear[sf_linear_offset(rows, kb, b, i, s)]);
          EXPECT_EQ(sf_to_linear(permuted.data(), rows, kb, l), linear) << "rows " << rows << " kb " << kb;
        }
      }
    }
  }
}

TEST(ScaleLayout, RejectsEmptyDimensions) {
  const uint8_t byte = 0;
  EXPECT_THROW(sf_to_permuted(&byte, 0, 1, 1, 0), std::invalid_argument);
  EXPECT_THROW(sf_to_linear(&byte, 1, 0, 1), std::invalid_argument);
  EXPECT_THROW(sf_permuted_padding_mask(1, 1, 0), std::invalid_argument);
}

}  // namespace
}  // namespace nvfp4
