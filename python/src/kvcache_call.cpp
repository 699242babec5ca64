#include "kvcache_call.hpp"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <vkattn/attention.hpp>
#include <vkattn/error.hpp>
#include <vkattn/kv_cache.hpp>

#include "context.hpp"
#include "device_array.hpp"
#include "device_tensors.hpp"
#include "errors.hpp"
#include "host_tensor.hpp"
#include "small_buffers.hpp"

namespace py = pybind11;

namespace vkattn::python {

namespace {

std::string str(int64_t value) { return std::to_string(value); }

// A K or V cache: (num_pages, page_size, kv_heads, dim), dense from its memory's start (the layout
// the library's PagedKvLayout describes). `argument` locates it as any tensor argument does.
struct CacheArgument {
  PagedKvLayout layout;
  TensorArgument argument;
};

CacheArgument cache_argument(const char* name, const py::handle& x, DType dtype, const PythonContext& context,
                             bool written) {
  CacheArgument cache;
  std::vector<int64_t> shape;
  if (is_device_array(x)) {
    const DeviceArray& a = as_device_array(x);
    // tensor_argument checks the Context and the dtype; the cache's own rules follow.
    if (a.shape.size() == 4) {
      cache.argument = tensor_argument(name, x, dtype, context, false);
    } else {
      throw Error(std::string(name) + ": expected 4 dimensions (num_pages, page_size, kv_heads, dim)");
    }
    if (!a.c_contiguous() || a.offset != 0) {
      throw Error(std::string(name) + ": a cache DeviceArray must be C-contiguous from its memory's start (not a view)");
    }
    shape = a.shape;
    cache.argument.bytes = static_cast<uint64_t>(a.size()) * dtype_size(dtype);
  } else {
    if (!py::isinstance<py::array>(x)) throw_type_error(std::string(name) + ": expected an array or a DeviceArray");
    const auto array = py::reinterpret_borrow<py::array>(x);
    if (array.ndim() != 4) throw Error(std::string(name) + ": expected 4 dimensions (num_pages, page_size, kv_heads, dim)");
    if (static_cast<std::size_t>(array.itemsize()) != dtype_size(dtype)) {
      throw_type_error(std::string(name) + ": " + str(array.itemsize()) + "-byte elements cannot hold " +
                       to_string(dtype));
    }
    if (!(array.flags() & py::array::c_style)) throw Error(std::string(name) + ": expected a C-contiguous array");
    if (written && !array.writeable()) throw Error(std::string(name) + ": the cache is read-only and k, v append to it");
    shape.assign(array.shape(), array.shape() + 4);
    cache.argument.host = const_cast<void*>(array.data());
    cache.argument.bytes = static_cast<uint64_t>(array.nbytes());
  }
  cache.layout = PagedKvLayout::dense(dtype, shape[0], shape[1], shape[2], shape[3]);
  return cache;
}

// A (batch, seq, heads, dim) tensor (FlashAttention's layout, as the caller has it) read in place as
// the (batch, heads, seq, dim) layout the library takes: the middle axes swapped in the layout
// rather than by a transposed view made on the Python side (one fewer object per tensor per call).
TensorArgument bshd_argument(const char* name, const py::handle& x, DType dtype, const PythonContext& context,
                             bool output) {
  TensorArgument argument = tensor_argument(name, x, dtype, context, output);
  TensorLayout& l = argument.layout;
  std::swap(l.heads, l.seq);
  std::swap(l.stride_head, l.stride_seq);
  return argument;
}

// An int32 array of `ndim` dimensions, C-contiguous (the Python side converts).
std::span<const int32_t> int32_array(const char* name, const py::array& array, py::ssize_t ndim) {
  if (array.ndim() != ndim) throw Error(std::string(name) + ": expected " + str(ndim) + " dimensions");
  const HostView<std::monostate> view = dense_view(name, array, 'i', 4);
  return {static_cast<const int32_t*>(view.data), view.bytes / sizeof(int32_t)};
}

// `bytes` rounded up to a multiple of `alignment` (a power of two, at least 16 here).
uint64_t round_up(uint64_t bytes, uint64_t alignment) {
  alignment = std::max<uint64_t>(alignment, 16);
  return (bytes + alignment - 1) / alignment * alignment;
}

// Whether the block table and lengths certainly pass check_paged_values: every length within
// [0, capacity - seq_new], every table entry a sequence uses within [0, num_pages), and no page used
// twice (then no two tokens share a row, so no appended row is shared). O(pages used); the library's
// check also proves rows unshared where pages are shared (read-only prefixes), through a map of
// every token (hundreds of microseconds at a few thousand tokens), so it runs only where this one
// cannot vouch, and gives the error messages.
// It reads the sizes from the spec, unchecked (the plan checks the layouts, before anything is
// uploaded), so that a call whose plan is cached is not checked twice.
bool plainly_valid(const AttentionSpec& spec, std::span<const int32_t> block_table, std::span<const int32_t> cache_lens) {
  const PagedKv& paged = std::get<PagedKv>(spec.kv);
  const int64_t batch = spec.q.batch, num_pages = paged.k_cache.num_pages, page_size = paged.k_cache.page_size;
  const int64_t max_pages = paged.max_pages, seq_new = paged.k_new ? paged.k_new->seq : 0;
  if (batch < 0 || num_pages <= 0 || page_size <= 0 || max_pages <= 0 || seq_new < 0 ||
      max_pages > INT32_MAX / page_size || static_cast<int64_t>(block_table.size()) != batch * max_pages ||
      static_cast<int64_t>(cache_lens.size()) != batch) {
    return false;
  }
  std::vector<bool> used(static_cast<std::size_t>(num_pages), false);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = cache_lens[static_cast<std::size_t>(b)];
    if (len < 0 || len + seq_new > max_pages * page_size) return false;
    const int64_t pages = (len + seq_new + page_size - 1) / page_size;
    for (int64_t i = 0; i < pages; ++i) {
      const int64_t page = block_table[static_cast<std::size_t>(b * max_pages + i)];
      if (page < 0 || page >= num_pages || used[static_cast<std::size_t>(page)]) return false;
      used[static_cast<std::size_t>(page)] = true;
    }
  }
  return true;
}

// What one call sends and gets back, gathered with the GIL held.
struct KvCacheCall {
  AttentionSpec spec;
  TensorArgument q, out;
  CacheArgument k_cache, v_cache;
  bool v_views_k = false;  // V is the first dim_v columns of K's rows: one cache, one Buffer (MLA)
  std::optional<TensorArgument> k_new, v_new, lse;
  std::optional<HostView<std::monostate>> alibi;
  std::span<const int32_t> block_table, cache_lens;
};

// The host caches' rows an append wrote, downloaded back into the caller's arrays: for each sequence,
// its tokens cache_lens[b] .. + seq_new - 1, one download per page they touch (a page's rows are
// contiguous in the (num_pages, page_size, kv_heads, dim) layout).
void download_appended_rows(const KvCacheCall& call, const CacheArgument& cache, const Buffer& buffer) {
  const PagedKv& paged = std::get<PagedKv>(call.spec.kv);
  const int64_t seq_new = paged.k_new->seq, page_size = cache.layout.page_size;
  const uint64_t row_bytes = static_cast<uint64_t>(cache.layout.kv_heads * cache.layout.dim) * dtype_size(cache.layout.dtype);
  for (std::size_t b = 0; b < call.cache_lens.size(); ++b) {
    const int64_t first = call.cache_lens[b], end = first + seq_new;
    for (int64_t token = first; token < end;) {
      const int64_t page = call.block_table[b * static_cast<std::size_t>(paged.max_pages) + static_cast<std::size_t>(token / page_size)];
      const int64_t run_end = std::min(end, (token / page_size + 1) * page_size);
      const uint64_t offset = static_cast<uint64_t>(page * page_size + token % page_size) * row_bytes;
      buffer.download(static_cast<char*>(cache.argument.host) + offset, static_cast<uint64_t>(run_end - token) * row_bytes,
                      offset);
      token = run_end;
    }
  }
}

// The calling thread's CPU time in microseconds: the host's own work in a call, which the device's
// time (on a CPU device, other threads') does not blur.
double thread_cpu_us() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) / 1e3;
}

// One timed run: wall-clock and calling-thread CPU microseconds.
using RunTime = std::pair<double, double>;

// Plans (through the plan cache), uploads, runs, downloads. With `time_iterations` > 0, runs the
// prepared call that many times instead of once, on the same buffers, and returns each run's times:
// the C++ side of bench/python_overhead.py, the call as a C++ program that keeps its plan and its
// buffers makes it (PreparedAttention::run: record, submit, wait). A single timed run is as the
// Python call's (after the caller's host work, not right after another run, whose warm caches and
// awake driver threads would flatter it).
std::vector<RunTime> run(PythonContext& context, const KvCacheCall& call, int time_iterations) {
  py::gil_scoped_release release;
  const std::shared_ptr<const PreparedAttention> prepared = context.plans.get(context.context, call.spec);
  DeviceTensors tensors(context.context);
  AttentionBuffers buffers;
  buffers.q = input_buffer(tensors, call.q);
  buffers.k = input_buffer(tensors, call.k_cache.argument);
  buffers.v = call.v_views_k ? buffers.k : input_buffer(tensors, call.v_cache.argument);
  buffers.out = output_buffer(tensors, call.out);
  // The block table and the lengths travel in one Buffer, kept by the Context for the next call: no
  // allocation, and one upload (where device memory is not mapped, each upload is a submit and a wait).
  const uint64_t lens_offset =
      round_up(call.block_table.size_bytes(), context.context.device_info().min_storage_buffer_offset_alignment);
  SmallBuffers::Lease values = context.small_buffers.acquire(context.context, lens_offset + call.cache_lens.size_bytes());
  values.buffer().upload(call.block_table.data(), call.block_table.size_bytes());
  values.buffer().upload(call.cache_lens.data(), call.cache_lens.size_bytes(), lens_offset);
  buffers.block_table = {&values.buffer(), 0};
  buffers.cache_lens = {&values.buffer(), lens_offset};
  if (call.k_new) {
    buffers.k_new = input_buffer(tensors, *call.k_new);
    if (call.v_new) buffers.v_new = input_buffer(tensors, *call.v_new);
  }
  if (call.lse) buffers.lse = {output_buffer(tensors, *call.lse), dense_offset_bytes(*call.lse)};
  if (call.alibi) buffers.alibi = tensors.input(call.alibi->data, call.alibi->bytes);
  std::vector<RunTime> times;
  if (time_iterations == 0) prepared->run(buffers);
  for (int i = 0; i < time_iterations; ++i) {  // the timed runs are the call's runs: none before them
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = thread_cpu_us();
    prepared->run(buffers);
    const double cpu = thread_cpu_us() - cpu_start;
    times.emplace_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count(), cpu);
  }
  tensors.download_outputs();
  if (call.k_new) {
    if (!call.k_cache.argument.device) download_appended_rows(call, call.k_cache, *buffers.k);
    if (!call.v_cache.argument.device && !call.v_views_k) download_appended_rows(call, call.v_cache, *buffers.v);
  }
  return times;
}

// The most query rows a sequence may put against each KV head (GQA group x seq_q) for the call to
// take the cascade on its own. The cascade pays where each sequence's rows alone are a decode tile
// (the decode form's, up to 16 rows): stacking every sequence's rows against the prefix then reads it
// once for all of them, on lavapipe at the prefill kernel's rate. Past that a sequence's rows already
// fill prefill tiles, and the extra passes cost: 8 sequences, a 4096-token shared prefix and 256 of
// their own, GQA 32/8, d128 f16, 3.1-3.2x faster with it at 4, 8 and 16 rows, 0.98x at 32
// (bench/results, cascade-crossover, lavapipe Mesa 22.3.6, 2026-12-03).
constexpr int64_t kCascadeMaxRowsPerSequence = 16;

// The host has the block table, so it can see a prefix every sequence's table shares (a prompt the
// batch shares) and have the call read it once (cascade: the same answers). `cascade` unset: where
// that pays (kCascadeMaxRowsPerSequence), and where the call's options leave the prefix hidden from
// some row (a window, ALiBi, top-left causal, ...), check_paged_attention refuses it and the call runs
// without. True: whenever the tables share a prefix, an Error where the options refuse it. False: never.
void use_shared_prefix(KvCacheCall& call, std::optional<bool> cascade) {
  if (cascade == false) return;
  PagedKv& paged = std::get<PagedKv>(call.spec.kv);
  const int64_t kv_heads = paged.k_cache.kv_heads;
  if (kv_heads <= 0 || call.spec.q.heads % kv_heads != 0) return;  // (the call's own check names it)
  if (!cascade.has_value() && call.spec.q.heads / kv_heads * call.spec.q.seq > kCascadeMaxRowsPerSequence) return;
  const int64_t shared = shared_prefix_pages(call.block_table, call.cache_lens, paged.max_pages, paged.k_cache.page_size);
  if (shared == 0) return;  // nothing shared: the call is the same without
  paged.shared_prefix_pages = shared;
  try {
    check_paged_attention(call.spec.paged_layouts());
  } catch (const Error& e) {
    paged.shared_prefix_pages = 0;  // not for this call's options or layout
    if (cascade.has_value())
      throw Error(e.code(), std::string("cascade: True, but the call cannot read its shared prefix once: ") + e.what());
  }
}

std::vector<RunTime> kvcache_attention(PythonContext& context, const py::object& q, const py::object& k_cache,
                       const py::object& v_cache, const py::object& out, const std::string& dtype_name,
                       const py::array& block_table, const py::array& cache_lens, const std::optional<py::object>& k_new,
                       const std::optional<py::object>& v_new, const std::optional<py::object>& lse,
                       const std::optional<py::array>& alibi, std::optional<float> scale, const std::string& causal,
                       std::optional<std::pair<int64_t, int64_t>> window, std::optional<float> softcap,
                       int64_t dim_v, std::optional<bool> cascade, int time_iterations) {
  const DType dtype = parse_dtype(dtype_name);
  KvCacheCall call;
  // No v_cache: V is the first dim_v columns of k_cache's rows (multi-head latent attention's one
  // cache), bound as one Buffer; an append then writes k alone.
  call.v_views_k = v_cache.is_none();
  if (call.v_views_k ? v_new.has_value() : k_new.has_value() != v_new.has_value())
    throw Error(call.v_views_k ? "v: V is a view of k_cache's rows (no v_cache), so only k is appended"
                               : "k, v: give both or neither");
  const bool append = k_new.has_value();
  call.q = bshd_argument("q", q, dtype, context, false);
  call.out = bshd_argument("out", out, dtype, context, true);
  call.k_cache = cache_argument("k_cache", k_cache, dtype, context, append);
  if (call.v_views_k) {
    if (dim_v < 1 || dim_v > call.k_cache.layout.dim)
      throw Error("head_dim_v: " + str(dim_v) + " is not in [1, " + str(call.k_cache.layout.dim) +
                  "] (V is the first head_dim_v columns of k_cache's rows)");
    call.v_cache = call.k_cache;
    call.v_cache.layout = call.k_cache.layout.prefix_view(dim_v);
  } else {
    call.v_cache = cache_argument("v_cache", v_cache, dtype, context, append);
  }
  call.block_table = int32_array("block_table", block_table, 2);
  call.cache_lens = int32_array("cache_seqlens", cache_lens, 1);

  PagedKv paged;
  paged.k_cache = call.k_cache.layout;
  paged.v_cache = call.v_cache.layout;
  paged.max_pages = block_table.shape(1);
  if (append) {
    call.k_new = bshd_argument("k", *k_new, dtype, context, false);
    paged.k_new = call.k_new->layout;
    if (v_new) {
      call.v_new = bshd_argument("v", *v_new, dtype, context, false);
      paged.v_new = call.v_new->layout;
    }
  }
  call.spec.q = call.q.layout;
  call.spec.out = call.out.layout;
  call.spec.kv = paged;
  call.spec.options.scale = scale;
  call.spec.options.causal = parse_causal(causal);
  if (window) call.spec.options.window = Window{window->first, window->second};
  call.spec.options.softcap = softcap;
  if (lse) {
    call.spec.lse = true;
    call.lse = dense_argument("softmax_lse", *lse, 'f', context,
                              call.q.layout.batch * call.q.layout.heads * call.q.layout.seq, true);
  }
  if (alibi) {
    if (alibi->ndim() == 1) {
      call.spec[PerHeadTensor::alibi] = HeadValuesLayout{1, alibi->shape(0), 0};
    } else if (alibi->ndim() == 2) {
      call.spec[PerHeadTensor::alibi] = HeadValuesLayout{alibi->shape(0), alibi->shape(1), 0};
    } else {
      throw Error("alibi_slopes: expected 1 or 2 dimensions, got " + str(alibi->ndim()));
    }
    call.alibi = dense_view("alibi_slopes", *alibi, 'f', 4);
  }
  // The device clamps what breaks the contract; the host has the values, so a wrong one is an error
  // here (before anything is uploaded or appended) rather than wrong keys or overwritten rows.
  if (!plainly_valid(call.spec, call.block_table, call.cache_lens)) {
    check_paged_values(check_paged_attention(call.spec.paged_layouts()), call.block_table, call.cache_lens);
  }
  use_shared_prefix(call, cascade);
  return run(context, call, time_iterations);
}

}  // namespace

void register_kvcache_call(py::module_& module) {
  module.def("kvcache_attention", &kvcache_attention, py::arg("context"), py::arg("q"), py::arg("k_cache"),
             py::arg("v_cache"), py::arg("out"), py::arg("dtype"), py::arg("block_table"), py::arg("cache_lens"),
             py::kw_only(), py::arg("k_new") = py::none(), py::arg("v_new") = py::none(), py::arg("lse") = py::none(),
             py::arg("alibi") = py::none(), py::arg("scale") = py::none(), py::arg("causal") = "none",
             py::arg("window") = py::none(), py::arg("softcap") = py::none(), py::arg("dim_v") = 0,
             py::arg("cascade") = py::none(), py::arg("time_iterations") = 0,
             "Attention over a paged KV cache, appending k_new and v_new first: q, out, k_new, v_new "
             "(batch, seq, heads, dim), caches (num_pages, page_size, kv_heads, dim) C-contiguous (v_cache None: "
             "V the first dim_v columns of k_cache's rows, k_new appended alone), int32 "
             "block_table (batch, max_pages) and cache_lens (batch); lse (batch, heads, seq_q); cascade None (where "
             "it pays), True or False: read a prefix the tables share once. The internal call "
             "under vkattn.flash_attn_with_kvcache. Returns [] (with time_iterations > 0, the (wall, thread CPU) "
             "microseconds of that many runs instead of one of the prepared call on the same buffers: bench/python_overhead.py).");
}

}  // namespace vkattn::python
