// psdb.VocabCache: psdb/vocab_cache.h's VocabCache over a psdb.Client.
// Batches are dicts {table: ids} (or sequences of (table, ids) pairs), in
// the order the C++ TableIds span would list them; looked-up rows come back
// as a list of float32 arrays (n_i, dim_i) in that order, without a copy
// (each array owns the vector the cache filled).
//
// Lifetime: the cache keeps its client alive; closing the client destroys
// the cache (waiting for its prefetch, without flushing) and later cache
// calls raise ValueError. cache.close() does the same for the cache alone.
//
// Thread-safety: calls are serialized by a mutex (the C++ cache is for one
// training thread at a time); each releases the GIL while C++ runs.
#ifndef PSDB_PYTHON_SRC_CACHE_H_
#define PSDB_PYTHON_SRC_CACHE_H_

#include <pybind11/pybind11.h>

namespace psdb::python {

// Registers psdb.VocabCache.
void RegisterCache(pybind11::module_& m);

}  // namespace psdb::python

#endif  // PSDB_PYTHON_SRC_CACHE_H_
