#include "allocation_counter.hpp"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {

std::atomic<int> g_counting{0};
std::atomic<std::size_t> g_allocations{0};

}  // namespace

// The replaceable global allocation functions (the array and sized forms forward to these by
// default). Aligned new/delete keep the library's own pair.
void* operator new(std::size_t bytes) {
  if (g_counting.load(std::memory_order_relaxed) > 0) g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(bytes ? bytes : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace vkattn::test {

ScopedAllocationCount::ScopedAllocationCount() : start_(g_allocations.load()) { ++g_counting; }
ScopedAllocationCount::~ScopedAllocationCount() { --g_counting; }
std::size_t ScopedAllocationCount::count() const { return g_allocations.load() - start_; }

}  // namespace vkattn::test
