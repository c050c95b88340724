// SPDX-License-Identifier: MIT
// The tour: every step of the table in order, as its own program runs it (verification on
// 1823x781, then the bandwidth sweep), followed by a summary. Same options as the step programs.
#include "common/program.h"
#include "common/step_table.h"

int main(int argc, char** argv) { return softmax::tour_main(argc, argv, softmax::all_implementations()); }
