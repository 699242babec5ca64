// The KV-cache call of the module (under vkattn.flash_attn_with_kvcache, vkattn/_kvcache.py):
// attention over a paged KV cache (vkattn/kv_cache.hpp) with new tokens optionally appended to it
// first, planned through the Context's plan cache and run with the GIL released. A dense cache
// (batch, seq_cache, kv_heads, dim) arrives as pages already: one page per sequence, an identity
// block table (the Python side builds it).
//
// The caches are read and written in place when they are DeviceArrays. Host caches are uploaded
// whole, and after an append the appended rows (only those) are downloaded back into them, so the
// caller's arrays hold the new tokens as FlashAttention's do.
#pragma once

#include <pybind11/pybind11.h>

namespace vkattn::python {

void register_kvcache_call(pybind11::module_& module);

}  // namespace vkattn::python
