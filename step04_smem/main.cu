// SPDX-License-Identifier: MIT
// step04_smem as a standalone program: verify on 1823x781, then the bandwidth sweep (--help for options).
#include "common/program.h"
#include "common/softmax.h"

namespace step04_smem {
const softmax::Step& step();
}

int main(int argc, char** argv) { return softmax::step_main(argc, argv, step04_smem::step()); }
