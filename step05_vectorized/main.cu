// SPDX-License-Identifier: MIT
// step05_vectorized as a standalone program: verify on 1823x781, then the bandwidth sweep (--help for options).
#include "common/program.h"
#include "common/softmax.h"

namespace step05_vectorized {
const softmax::Step& step();
}

int main(int argc, char** argv) { return softmax::step_main(argc, argv, step05_vectorized::step()); }
