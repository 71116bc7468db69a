#include "cache/policy_sim.h"

#include <algorithm>
#include <cmath>
#include <queue>
#include <random>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "cache/slot_map.h"
#include "util/hash.h"

namespace psdb::cache {

std::vector<double> ZipfProbabilities(int64_t n, double alpha) {
  std::vector<double> p(n);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    p[i] = std::pow(static_cast<double>(i + 1), -alpha);
    sum += p[i];
  }
  for (double& x : p) x /= sum;
  return p;
}

std::vector<uint64_t> ZipfTrace(absl::Span<const double> probs, int64_t length,
                                uint64_t seed) {
  std::vector<double> cdf(probs.size());
  double acc = 0;
  for (size_t i = 0; i < probs.size(); ++i) cdf[i] = (acc += probs[i]);
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> trace(length);
  for (int64_t t = 0; t < length; ++t) {
    // 53 random bits -> [0, 1), scaled to the CDF's (rounded) total.
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * acc;
    size_t i = std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin();
    if (i >= cdf.size()) i = cdf.size() - 1;
    trace[t] = Mix64(i);
  }
  return trace;
}

double CheLruHitRate(absl::Span<const double> probs, int64_t capacity) {
  if (capacity >= static_cast<int64_t>(probs.size())) return 1.0;
  auto occupancy = [&](double t) {
    double s = 0;
    for (double p : probs) s += -std::expm1(-p * t);
    return s;
  };
  double lo = 0, hi = 1;
  while (occupancy(hi) < capacity) hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    (occupancy(mid) < capacity ? lo : hi) = mid;
  }
  const double t = 0.5 * (lo + hi);
  double h = 0;
  for (double p : probs) h += p * -std::expm1(-p * t);
  return h;
}

double StaticOptimumHitRate(absl::Span<const double> probs, int64_t capacity) {
  double h = 0;
  for (int64_t i = 0; i < capacity && i < static_cast<int64_t>(probs.size());
       ++i) {
    h += probs[i];
  }
  return h;
}

double BeladyHitRate(absl::Span<const uint64_t> trace, int64_t capacity,
                     int64_t warmup) {
  const int64_t n = static_cast<int64_t>(trace.size());
  constexpr int64_t kNever = INT64_MAX;
  std::vector<int64_t> next(n);
  {
    absl::flat_hash_map<uint64_t, int64_t> last;
    for (int64_t i = n - 1; i >= 0; --i) {
      auto [it, inserted] = last.try_emplace(trace[i], i);
      next[i] = inserted ? kNever : it->second;
      it->second = i;
    }
  }
  // Cached id -> its next use; a max-heap of (next use, id) with stale
  // entries skipped lazily.
  absl::flat_hash_map<uint64_t, int64_t> cached;
  std::priority_queue<std::pair<int64_t, uint64_t>> heap;
  int64_t counted = 0, hits = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t id = trace[i];
    auto it = cached.find(id);
    const bool hit = it != cached.end();
    if (i >= warmup) {
      ++counted;
      hits += hit;
    }
    if (hit) {
      it->second = next[i];
    } else {
      if (static_cast<int64_t>(cached.size()) >= capacity) {
        while (true) {
          auto [use, victim] = heap.top();
          heap.pop();
          auto v = cached.find(victim);
          if (v != cached.end() && v->second == use) {
            cached.erase(v);
            break;
          }
        }
      }
      cached.emplace(id, next[i]);
    }
    heap.emplace(next[i], id);
  }
  return counted == 0 ? 0.0 : static_cast<double>(hits) / counted;
}

absl::StatusOr<SimResult> SimulateHitRate(absl::Span<const uint64_t> trace,
                                          const SimOptions& options) {
  if (options.capacity < 1 || options.batch_size < 1) {
    return absl::InvalidArgumentError("capacity and batch_size must be >= 1");
  }
  const int64_t n = static_cast<int64_t>(trace.size());
  const int64_t b = options.batch_size;
  const int64_t batches = (n + b - 1) / b;
  auto batch_keys = [&](int64_t seq) {
    std::vector<SlotKey> keys;
    for (int64_t i = seq * b; i < std::min(n, (seq + 1) * b); ++i) {
      keys.push_back(SlotKey{0, trace[i]});
    }
    return keys;
  };
  SlotMap map(options.capacity, options.policy);
  // What the store's row headers would hold: sightings per id, updated when
  // a row leaves the cache (the cache writes its count back with the row).
  absl::flat_hash_map<uint64_t, uint64_t> stored_frequency;
  SimResult result;
  int64_t announced = 0;
  std::vector<int32_t> slots;
  absl::flat_hash_set<uint64_t> seen;
  for (int64_t seq = 0; seq < batches; ++seq) {
    if (options.policy == PolicyKind::kLookahead) {
      for (; announced < std::min(batches, seq + 1 + options.lookahead_batches);
           ++announced) {
        map.AddFuture(announced, batch_keys(announced));
      }
    }
    map.BeginBatch(seq);
    const int64_t begin = seq * b, end = std::min(n, begin + b);
    seen.clear();
    slots.clear();
    int64_t misses = 0;
    // Hits first, so the batch's resident rows are pinned before victims
    // are chosen for its misses.
    std::vector<uint64_t> missing;
    for (int64_t i = begin; i < end; ++i) {
      if (!seen.insert(trace[i]).second) continue;
      const int32_t slot = map.Find(SlotKey{0, trace[i]});
      if (slot >= 0) {
        map.PinAndAccess(slot);
        slots.push_back(slot);
      } else {
        missing.push_back(trace[i]);
      }
    }
    if (static_cast<int64_t>(missing.size()) > map.available()) {
      return absl::ResourceExhaustedError(
          absl::StrCat("batch ", seq, " has ", seen.size(),
                       " unique ids; capacity is ", options.capacity));
    }
    for (uint64_t id : missing) {
      std::optional<SlotKey> evicted;
      uint64_t evicted_frequency = 0;
      auto f = stored_frequency.find(id);
      const int32_t slot = map.Insert(
          SlotKey{0, id}, f == stored_frequency.end() ? 0 : f->second, &evicted,
          &evicted_frequency);
      if (evicted) stored_frequency[evicted->id] = evicted_frequency;
      slots.push_back(slot);
      ++misses;
    }
    for (int32_t s : slots) map.Unpin(s);
    if (begin >= options.warmup) {
      result.accesses += end - begin;
      result.misses += misses;
    }
  }
  return result;
}

}  // namespace psdb::cache
