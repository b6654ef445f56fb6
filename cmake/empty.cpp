// cmake/empty.cpp — the one source of graphed_torch_pch, the target that owns the precompiled header.
