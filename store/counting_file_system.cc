#include "store/counting_file_system.h"

#include <utility>

#include "store/file_io_rocksdb.h"

namespace psdb::internal {
namespace {

using Counter = std::shared_ptr<std::atomic<uint64_t>>;

void Add(const Counter& counter, const rocksdb::IOStatus& s, size_t n) {
  if (s.ok()) counter->fetch_add(n, std::memory_order_relaxed);
}

class CountingSequentialFile final
    : public rocksdb::FSSequentialFileOwnerWrapper {
 public:
  CountingSequentialFile(std::unique_ptr<rocksdb::FSSequentialFile> file,
                         Counter counter)
      : FSSequentialFileOwnerWrapper(std::move(file)),
        counter_(std::move(counter)) {}

  rocksdb::IOStatus Read(size_t n, const rocksdb::IOOptions& options,
                         rocksdb::Slice* result, char* scratch,
                         rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = target()->Read(n, options, result, scratch, dbg);
    Add(counter_, s, result->size());
    return s;
  }
  rocksdb::IOStatus PositionedRead(uint64_t offset, size_t n,
                                   const rocksdb::IOOptions& options,
                                   rocksdb::Slice* result, char* scratch,
                                   rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s =
        target()->PositionedRead(offset, n, options, result, scratch, dbg);
    Add(counter_, s, result->size());
    return s;
  }

 private:
  const Counter counter_;
};

class CountingRandomAccessFile final
    : public rocksdb::FSRandomAccessFileOwnerWrapper {
 public:
  CountingRandomAccessFile(std::unique_ptr<rocksdb::FSRandomAccessFile> file,
                           Counter counter)
      : FSRandomAccessFileOwnerWrapper(std::move(file)),
        counter_(std::move(counter)) {}

  rocksdb::IOStatus Read(uint64_t offset, size_t n,
                         const rocksdb::IOOptions& options,
                         rocksdb::Slice* result, char* scratch,
                         rocksdb::IODebugContext* dbg) const override {
    rocksdb::IOStatus s =
        target()->Read(offset, n, options, result, scratch, dbg);
    Add(counter_, s, result->size());
    return s;
  }
  rocksdb::IOStatus MultiRead(rocksdb::FSReadRequest* reqs, size_t num_reqs,
                              const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = target()->MultiRead(reqs, num_reqs, options, dbg);
    for (size_t i = 0; i < num_reqs; ++i) {
      Add(counter_, reqs[i].status, reqs[i].result.size());
    }
    return s;
  }
  // Asynchronous reads fall back to Read (FSRandomAccessFile's default),
  // so they are counted there.
  rocksdb::IOStatus ReadAsync(
      rocksdb::FSReadRequest& req, const rocksdb::IOOptions& opts,
      std::function<void(const rocksdb::FSReadRequest&, void*)> cb,
      void* cb_arg, void** io_handle, rocksdb::IOHandleDeleter* del_fn,
      rocksdb::IODebugContext* dbg) override {
    return FSRandomAccessFile::ReadAsync(req, opts, std::move(cb), cb_arg,
                                         io_handle, del_fn, dbg);
  }

 private:
  const Counter counter_;
};

}  // namespace

CountingFileSystem::CountingFileSystem(
    std::shared_ptr<rocksdb::FileSystem> base)
    : FileSystemWrapper(FileSystemOr(std::move(base))),
      bytes_read_(std::make_shared<std::atomic<uint64_t>>(0)) {}

rocksdb::IOStatus CountingFileSystem::NewSequentialFile(
    const std::string& fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSSequentialFile>* result,
    rocksdb::IODebugContext* dbg) {
  std::unique_ptr<rocksdb::FSSequentialFile> file;
  rocksdb::IOStatus s = target()->NewSequentialFile(fname, options, &file, dbg);
  if (s.ok()) {
    *result =
        std::make_unique<CountingSequentialFile>(std::move(file), bytes_read_);
  }
  return s;
}

rocksdb::IOStatus CountingFileSystem::NewRandomAccessFile(
    const std::string& fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSRandomAccessFile>* result,
    rocksdb::IODebugContext* dbg) {
  std::unique_ptr<rocksdb::FSRandomAccessFile> file;
  rocksdb::IOStatus s =
      target()->NewRandomAccessFile(fname, options, &file, dbg);
  if (s.ok()) {
    *result = std::make_unique<CountingRandomAccessFile>(std::move(file),
                                                         bytes_read_);
  }
  return s;
}

}  // namespace psdb::internal
