// How one input tensor of a stale variant is the case's own tensor moved: row i of batch b comes
// from row (i + rows_by) % rows of batch (b + batches_by) % l, the first `blocks` blocks of
// `block_bytes` of every row are rotated left by blocks_by (block s from block (s + blocks_by) %
// blocks; the rest of the row stays), and every byte is XORed with flip (a negation). The judge
// derives the stale data with it on the host; the kernel's process also writes a tensor moved
// straight into a call's buffer, on the device from the buffer's copy where it keeps one
// (device_copy.h), so a medium case's megabytes are not derived, staged and sent a second time.
#pragma once

#include <cstdint>

namespace nvfp4 {

struct TensorRotation {
  int64_t l = 1, rows = 0, row_bytes = 0;
  int64_t block_bytes = 0, blocks = 0, blocks_by = 0;
  int64_t rows_by = 0, batches_by = 0;
  uint8_t flip = 0;

  int64_t bytes() const { return l * rows * row_bytes; }
  // The rotated part of a row and how far it moves, in bytes (0 and 0 with fewer than 2 blocks).
  int64_t span() const { return blocks >= 2 ? blocks * block_bytes : 0; }
  int64_t shift() const { return blocks >= 2 ? blocks_by % blocks * block_bytes : 0; }
};

// The move that undoes t (the flip is its own inverse).
TensorRotation undoing(TensorRotation t);

// Calls run(to, from, count) for the runs of bytes [to, to + count) of the moved tensor that come
// from [from, from + count) of the tensor (each byte XORed with t.flip), in the order of `to`:
// three a row (the rotated blocks' two pieces, the rest of the row), some of them empty.
template <class Run>
void each_rotated_run(const TensorRotation& t, Run&& run) {
  const int64_t span = t.span(), shift = t.shift();
  for (int64_t b = 0; b < t.l; ++b)
    for (int64_t i = 0; i < t.rows; ++i) {
      const int64_t from = (((b + t.batches_by) % t.l) * t.rows + (i + t.rows_by) % t.rows) * t.row_bytes;
      const int64_t to = (b * t.rows + i) * t.row_bytes;
      run(to, from + shift, span - shift);
      run(to + span - shift, from, shift);
      run(to + span, from + span, t.row_bytes - span);
    }
}

// to[0, t.bytes()) = from moved as t says, in one sequential pass (rotating in place follows
// cycles that jump a row apart at every byte).
void copy_rotated(const uint8_t* from, const TensorRotation& t, uint8_t* to);

}  // namespace nvfp4
