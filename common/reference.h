// SPDX-License-Identifier: MIT
// The CPU reference: softmax accumulated in double, with torch.softmax's answers for
// non-finite inputs.
#pragma once

#include <vector>

namespace softmax {

// ref[r][c] for a row-major rows x cols float matrix. Per row:
//   - a NaN or a +inf anywhere, or every entry -inf: the whole row is NaN;
//   - otherwise exp(x - max) / sum(exp(x - max)) in double; -inf entries give exactly 0.
std::vector<double> reference_softmax(const std::vector<float>& x, int rows, int cols);

}  // namespace softmax
