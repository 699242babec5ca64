#include "allocation_counter.hpp"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {

std::atomic<int> g_counting{0};
std::atomic<std::size_t> g_allocations{0};

}  // namespace

// Every replaceable global allocation function that is not over-aligned, so that each allocation
// and its release go through malloc and free together. libstdc++'s own array and nothrow forms
// would forward to the plain ones, but a sanitizer runtime replaces every form it is not given:
// with only the plain forms defined here, AddressSanitizer's nothrow new met this file's delete
// (alloc-dealloc-mismatch, in the validation layer). Aligned new/delete keep the library's own pair.
namespace {

void* counted_malloc(std::size_t bytes) noexcept {
  if (g_counting.load(std::memory_order_relaxed) > 0) g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(bytes ? bytes : 1);
}

}  // namespace

void* operator new(std::size_t bytes) {
  if (void* p = counted_malloc(bytes)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t bytes) {
  if (void* p = counted_malloc(bytes)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t bytes, const std::nothrow_t&) noexcept { return counted_malloc(bytes); }
void* operator new[](std::size_t bytes, const std::nothrow_t&) noexcept { return counted_malloc(bytes); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace vkattn::test {

ScopedAllocationCount::ScopedAllocationCount() : start_(g_allocations.load()) { ++g_counting; }
ScopedAllocationCount::~ScopedAllocationCount() { --g_counting; }
std::size_t ScopedAllocationCount::count() const { return g_allocations.load() - start_; }

}  // namespace vkattn::test
