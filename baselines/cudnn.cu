// SPDX-License-Identifier: MIT
// cuDNN's softmax as a baseline: cudnnSoftmaxForward(ACCURATE, MODE_INSTANCE) on an M x N x 1 x 1
// NCHW tensor, i.e. a softmax over each row. Built only when CMake finds cuDNN.
#include <stdexcept>
#include <string>

#include "baselines/baselines.h"
#include "common/cuda_check.h"

#ifdef SOFTMAX_HAVE_CUDNN
#include <cudnn.h>
#endif

namespace baselines {

#ifdef SOFTMAX_HAVE_CUDNN
namespace {

void cudnn_check(cudnnStatus_t status, const char* call) {
  if (status != CUDNN_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuDNN error ") + cudnnGetErrorString(status) + " in " + call);
}
#define CUDNN_CHECK(call) cudnn_check((call), #call)

// The handle and descriptors are made once and reused, so a timed launch enqueues the kernel and
// nothing else.
struct CudnnState {
  cudnnHandle_t handle = nullptr;
  cudnnTensorDescriptor_t desc = nullptr;
  int rows = 0, cols = 0;
  CudnnState() {
    CUDNN_CHECK(cudnnCreate(&handle));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&desc));
  }
};

void launch(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  softmax::check_launch_args("cudnn", x, y, rows, cols, softmax::kNoColLimit);
  static CudnnState st;
  if (rows != st.rows || cols != st.cols) {
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(st.desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, rows, cols, 1, 1));
    st.rows = rows;
    st.cols = cols;
  }
  CUDNN_CHECK(cudnnSetStream(st.handle, stream));
  const float one = 1.f, zero = 0.f;
  CUDNN_CHECK(cudnnSoftmaxForward(st.handle, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_INSTANCE,
                                  &one, st.desc, x, &zero, st.desc, y));
  CUDA_CHECK_LAUNCH();
}

int max_cols() { return softmax::kNoColLimit; }
softmax::Traffic traffic(int /*cols*/) { return softmax::kIdealTraffic; }  // unknown; assume fused

}  // namespace

bool have_cudnn() { return true; }

const softmax::Step& cudnn() {
  static const softmax::Step s{"cudnn", "cudnnSoftmaxForward, ACCURATE, per row", launch, max_cols,
                               traffic};
  return s;
}

#else

bool have_cudnn() { return false; }

const softmax::Step& cudnn() {
  throw std::runtime_error("this build found no cuDNN (see CMake's configure output)");
}

#endif

}  // namespace baselines
