// e^x in long double from IEEE-rounded additions, multiplications and divisions alone, for the
// dual GEMM reference's silu. libm's expl on x86-64 rests on x87's f2xm1, whose last bits differ
// between processor makers: the same dual case had one reference on an AMD host and another on an
// Intel one (their long double silu differed in the last bits, and with it the golden hashes of
// every dual schedule), and a word within 2^-60 of a rounding midpoint could differ too. These
// operations round the same everywhere, so a case's reference is the same on every host.
// Within 0.8 ulp of e^x (0.797 at most on the tests' 400,000 arguments; libm's expl: 1.13), so
// silu(G) * U keeps its 2^-60 relative error.
#pragma once

#include <cmath>

#include "reference/long_double_bits.h"

namespace nvfp4 {

namespace exp_detail {
constexpr long double inverse_factorial(int k) {
  long double f = 1;
  for (int i = 2; i <= k; ++i) f *= i;  // exact: 17! < 2^64
  return 1.0L / f;
}
// 1/k!, k = 0..17, each rounded once by the compiler (the same constants on every host).
inline constexpr long double kInverseFactorial[18] = {
    1, 1, inverse_factorial(2), inverse_factorial(3), inverse_factorial(4), inverse_factorial(5),
    inverse_factorial(6), inverse_factorial(7), inverse_factorial(8), inverse_factorial(9), inverse_factorial(10),
    inverse_factorial(11), inverse_factorial(12), inverse_factorial(13), inverse_factorial(14), inverse_factorial(15),
    inverse_factorial(16), inverse_factorial(17)};
}  // namespace exp_detail

// e^x; +Inf past 11357 (long double's largest is e^11356.52) and +0 below -11400 (under half the
// smallest subnormal, e^-11399.5), as libm gives them, without its overflow path's cost.
inline long double exp_ld(long double x) {
  if (x != x) return x;
  if (x > 11357.0L) return HUGE_VALL;
  if (x < -11400.0L) return 0.0L;
  if constexpr (!kX87LongDouble) return std::exp(x);  // libm in software where long double is not x87's
  // x = n ln2 + r, |r| <= ln2/2 + 2^-40. ln2's high part has 48 bits, so n * kLn2Hi (|n| < 2^15)
  // is exact, and so is x - n * kLn2Hi: a multiple of 2^-65 below 2^-1. The low part's product
  // and what ln2 has beyond both parts err by less than 2^-98, r's last rounding by 2^-66 at
  // most: an absolute error in r is the same relative error in e^r.
  constexpr long double kLog2e = 0x1.71547652b82fe1777d0ffda0d23a7d12p+0L;
  constexpr long double kLn2Hi = 0xb17217f7d1cfp-48L, kLn2Lo = 0xf35793c7673007e6p-113L;
  const long double t = x * kLog2e;
  const int n = static_cast<int>(t + (t < 0 ? -0.5L : 0.5L));
  const long double r = (x - n * kLn2Hi) - n * kLn2Lo;
  // e^r = 1 + r + r^2 q, q = 1/2 + r/6 + ... to r^15/17! (the next term is below 2^-80 of e^r),
  // by Estrin's scheme (in pairs: a chain of 8 operations where Horner's is 30); 1 + r as a
  // rounded sum and its exact error (|r| < 1), which the small terms join before the one last
  // rounding.
  const long double* c = exp_detail::kInverseFactorial;
  const long double r2 = r * r, r4 = r2 * r2, r8 = r4 * r4;
  const long double p0 = c[2] + c[3] * r, p1 = c[4] + c[5] * r, p2 = c[6] + c[7] * r, p3 = c[8] + c[9] * r;
  const long double p4 = c[10] + c[11] * r, p5 = c[12] + c[13] * r, p6 = c[14] + c[15] * r, p7 = c[16] + c[17] * r;
  const long double q = ((p0 + p1 * r2) + (p2 + p3 * r2) * r4) + ((p4 + p5 * r2) + (p6 + p7 * r2) * r4) * r8;
  const long double hi = 1 + r, lo = (1 - hi) + r;
  const long double e = hi + (lo + r2 * q);
  // e * 2^n: exact in range; past it one rounding, to a subnormal or to +Inf.
  if (n > 16000) return e * pow2l(n - 16000) * pow2l(16000);
  if (n < -16000) return e * pow2l(n + 16000) * pow2l(-16000);
  return e * pow2l(n);
}

}  // namespace nvfp4
