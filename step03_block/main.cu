// SPDX-License-Identifier: MIT
// step03_block as a standalone program: verify on 1823x781, then the bandwidth sweep (--help for options).
#include "common/program.h"
#include "common/softmax.h"

namespace step03_block {
const softmax::Step& step();
}

int main(int argc, char** argv) { return softmax::step_main(argc, argv, step03_block::step()); }
