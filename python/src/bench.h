// psdb._bench_loop: the C++ peer of the Python binding benchmark
// (tools/bench/python_bench.py): the same batches through the same
// ParameterClient, looped in C++ without Python in between.
//
// Thread-safety: REQUIRES the GIL (released while the loop runs).
#ifndef PSDB_PYTHON_SRC_BENCH_H_
#define PSDB_PYTHON_SRC_BENCH_H_

#include <pybind11/pybind11.h>

namespace psdb::python {

void RegisterBench(pybind11::module_& m);

}  // namespace psdb::python

#endif  // PSDB_PYTHON_SRC_BENCH_H_
