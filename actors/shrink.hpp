// Hash tables that give their buckets back after a burst.
//
// std::unordered_map never shrinks its bucket array: after a burst of 100,000
// queued jobs each per-job table keeps about 1 MB of empty buckets for good,
// and those live blocks pin the allocator's pages, so the scheduler's RSS
// stays far above its idle value once every job has ended
// (docs/performance.md, "memory after jobs end"). shrink_if_sparse(t), called
// after erasing from `t`, rehashes it to its current size once it holds an
// eighth of what its buckets allow; the O(size) rehash is paid only after the
// table lost 7/8 of its peak, so it is amortized over those erases.
#pragma once

#include <cstddef>

namespace troupe {

template <class Table>
void shrink_if_sparse(Table& t) {
  constexpr std::size_t kSmall = 1024;  // tables this small are left alone
  const std::size_t buckets = t.bucket_count();
  if (buckets > kSmall &&
      static_cast<double>(t.size()) * 8.0 < static_cast<double>(buckets) * t.max_load_factor())
    t.rehash(0);
}

}  // namespace troupe
