# SPDX-License-Identifier: MIT
# The PyTorch package: pip install --no-build-isolation ./python (against the torch installed).
#
# It compiles the library's sources (../fastsoftmax/src) with the op (csrc/ops.cpp), or, when
# FASTSOFTMAX_BUILD_DIR names a CMake build of the repository, links the library built there
# (what the CMake build does, so that the op runs the very kernels the C++ tests and benchmark
# measure). FASTSOFTMAX_CUDA_ARCHS (default "80;90") picks the GPU architectures compiled for.
import os
import pathlib
import re

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

here = pathlib.Path(__file__).resolve().parent
library = here.parent / "fastsoftmax"
build_base = pathlib.Path(os.environ.get("FASTSOFTMAX_BUILD_BASE", here / "build")).resolve()
build_base.mkdir(parents=True, exist_ok=True)


def library_version() -> str:
    text = (library / "CMakeLists.txt").read_text()
    return re.search(r"set\(FASTSOFTMAX_VERSION ([0-9.]+)\)", text).group(1)


def generated_headers() -> pathlib.Path:
    """fastsoftmax/version.h, as CMake's configure_file writes it from version.h.in."""
    version = library_version()
    major, minor, patch = version.split(".")
    text = (library / "include" / "fastsoftmax" / "version.h.in").read_text()
    for key, value in (("PROJECT_VERSION_MAJOR", major), ("PROJECT_VERSION_MINOR", minor),
                       ("PROJECT_VERSION_PATCH", patch), ("PROJECT_VERSION", version)):
        text = text.replace(f"@{key}@", value)
    out = build_base / "generated"
    (out / "fastsoftmax").mkdir(parents=True, exist_ok=True)
    target = out / "fastsoftmax" / "version.h"
    if not target.exists() or target.read_text() != text:
        target.write_text(text)
    return out


archs = os.environ.get("FASTSOFTMAX_CUDA_ARCHS", "80;90").split(";")
archs = [a for a in archs if a]
gencode = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]
gencode.append(f"-gencode=arch=compute_{archs[-1]},code=compute_{archs[-1]}")
prebuilt = os.environ.get("FASTSOFTMAX_BUILD_DIR")
include_dirs = [str(library / "include")]
if prebuilt:
    build = pathlib.Path(prebuilt).resolve()
    sources = ["csrc/ops.cpp"]
    include_dirs.append(str(build / "fastsoftmax" / "include"))
    extra_objects = [str(build / "fastsoftmax" / "libfastsoftmax.a")]
else:
    sources = ["csrc/ops.cpp"] + [os.path.relpath(p, here)
                                  for p in sorted((library / "src").glob("*.cu"))]
    include_dirs += [str(generated_headers()), str(library / "src")]
    extra_objects = []

setup(
    name="fastsoftmax",
    version=library_version(),
    description="Row-wise softmax at the memory-bandwidth limit, as a PyTorch op",
    packages=["fastsoftmax"],
    ext_modules=[
        CUDAExtension(
            "fastsoftmax._C",
            sources,
            include_dirs=include_dirs,
            extra_objects=extra_objects,
            extra_compile_args={"cxx": ["-O3"], "nvcc": ["-O3", "-lineinfo", *gencode]},
        )
    ],
    cmdclass={"build_ext": BuildExtension},
    options={"build": {"build_base": str(build_base)},
             "egg_info": {"egg_base": str(build_base)}},
    python_requires=">=3.9",
)
