#!/usr/bin/env bash
# Throwaway driver (1 GPU): after grouped_experts and the paged stash's ffn came to share one pass, build the training GPU
# tests and run full_iteration against eager on moe-small made grouped dropless.
export PATH="$PATH:/usr/local/cuda/bin" TORCH_CUDA_ARCH_LIST=9.0a
prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
date -u +%FT%TZ; nvidia-smi --query-gpu=name --format=csv,noheader
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" -DGRAPHED_DEPS_DIR="$PWD/.deps" > /tmp/configure.log 2>&1 && echo "configure ok"
start=$(date +%s)
if ninja -C build-gpu train_cuda_tests > /tmp/build.log 2>&1; then echo "build ok in $(( $(date +%s) - start )) s"; else echo "BUILD FAILED"; grep -A8 error /tmp/build.log | head -30; fi
./build-gpu/tests/train_cuda_tests --gtest_filter="*FiftyStepsEqualEager*grouped*" 2>&1 | grep -E "^\[ +(OK|FAILED|PASSED) |Failure" | head -20
date -u +%FT%TZ
