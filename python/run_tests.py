# SPDX-License-Identifier: MIT
"""The PyTorch package's tests as one CTest test: pytest over python/tests with the package built
into the build tree. Exit 77 (CTest: skipped) where torch sees no CUDA GPU, since then only the
host-side tests ran; the reason is printed."""
import subprocess
import sys
from pathlib import Path

import torch

here = Path(__file__).resolve().parent
rc = subprocess.call([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                      str(here / "tests")])
if rc == 0 and not torch.cuda.is_available():
    print("fastsoftmax.python: skipped: torch sees no CUDA GPU (torch.cuda.is_available() is "
          "False); only the host-side tests ran")
    sys.exit(77)
sys.exit(rc)
