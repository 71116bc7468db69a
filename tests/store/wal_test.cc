// The write-ahead log on its own (store/wal.h): records and payloads round
// trip, a torn or corrupt tail is dropped (never the records before it),
// group commit writes concurrent records with shared writes and loses none,
// a failed write is retried into a new segment without duplicates, and
// rotation leaves the older segments to delete.
#include "store/wal.h"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "rocksdb/file_system.h"
#include "tests/testing/test_util.h"

namespace psdb::internal {
namespace {

namespace fs = std::filesystem;
using ::psdb::testing::ScratchDir;

struct Got {
  WalRecordType type;
  uint64_t lsn;
  std::string payload;
};

absl::StatusOr<std::vector<Got>> ReadAll(const std::string& dir,
                                         uint64_t wal_id,
                                         WalReadStats* stats = nullptr) {
  std::vector<Got> out;
  absl::StatusOr<WalReadStats> s =
      ReadWal(rocksdb::FileSystem::Default().get(), dir, wal_id,
              [&](const WalRecordView& r) {
                out.push_back({r.type, r.lsn, std::string(r.payload)});
                return absl::OkStatus();
              });
  if (!s.ok()) return s.status();
  if (stats != nullptr) *stats = *s;
  return out;
}

std::unique_ptr<Wal> OpenWal(const std::string& dir,
                             std::shared_ptr<rocksdb::FileSystem> fs = nullptr,
                             uint64_t next_lsn = 1, uint64_t next_seq = 1) {
  Wal::Options o;
  o.fs = fs != nullptr ? fs : rocksdb::FileSystem::Default();
  o.dir = dir;
  o.wal_id = 42;
  o.next_lsn = next_lsn;
  o.next_seq = next_seq;
  absl::StatusOr<std::unique_ptr<Wal>> w = Wal::Open(std::move(o));
  EXPECT_TRUE(w.ok()) << w.status();
  return w.ok() ? std::move(*w) : nullptr;
}

std::vector<std::string> Segments(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(WalTest, RecordsRoundTripInLsnOrder) {
  ScratchDir dir;
  const std::string wal_dir = dir.path() + "/wal";
  {
    auto wal = OpenWal(wal_dir, nullptr, /*next_lsn=*/7);
    EXPECT_EQ(wal->Append(WalRecordType::kCreateTable, "t"), 7u);
    EXPECT_EQ(wal->Append(WalRecordType::kAbort, std::string(8, 'x')), 8u);
    EXPECT_EQ(wal->Append(WalRecordType::kPush, ""), 9u);
    ASSERT_OK(wal->WaitWritten(9));
    // Three records buffered before one WaitWritten: one write.
    EXPECT_EQ(wal->groups(), 1u);
    EXPECT_EQ(wal->records(), 3u);
    EXPECT_EQ(wal->written_lsn(), 9u);
  }
  WalReadStats stats;
  ASSERT_OK_AND_ASSIGN(std::vector<Got> got, ReadAll(wal_dir, 42, &stats));
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].type, WalRecordType::kCreateTable);
  EXPECT_EQ(got[0].lsn, 7u);
  EXPECT_EQ(got[0].payload, "t");
  EXPECT_EQ(got[1].payload, std::string(8, 'x'));
  EXPECT_EQ(got[2].lsn, 9u);
  EXPECT_EQ(got[2].payload, "");
  EXPECT_EQ(stats.last_lsn, 9u);
  EXPECT_EQ(stats.torn_bytes, 0u);
  // Another database's log (other id) is stale: nothing is read from it.
  ASSERT_OK_AND_ASSIGN(std::vector<Got> other, ReadAll(wal_dir, 43, &stats));
  EXPECT_TRUE(other.empty());
  EXPECT_EQ(stats.stale_segments, 1u);
}

TEST(WalTest, PushAndPutRowsPayloadsDecode) {
  const std::vector<uint64_t> keys = {5, 1ull << 60};
  const std::vector<float> grads = {1, 2, 3, -0.0f, 5, 6};
  std::string p;
  EncodePushRecord("table.a", 99, keys, grads, 3, &p);
  ASSERT_EQ(p.substr(0, kWalRecordHeaderBytes),
            std::string(kWalRecordHeaderBytes, '\0'));  // room for a header
  p.erase(0, kWalRecordHeaderBytes);
  ASSERT_OK_AND_ASSIGN(WalRowsRecord r,
                       DecodeRowsRecord(WalRecordType::kPush, p));
  EXPECT_EQ(r.table, "table.a");
  EXPECT_EQ(r.step, 99);
  EXPECT_EQ(r.n, 2u);
  EXPECT_EQ(r.dim, 3u);
  EXPECT_EQ(WalKeys(r), keys);
  const std::vector<float> g = WalFloats(r.floats, 6);
  EXPECT_EQ(std::memcmp(g.data(), grads.data(), 24), 0);  // -0.0f kept

  RowBatch rows;
  rows.Resize(1, 2, 2);
  rows.values = {1.5f, 2.5f};
  rows.state = {1, 2, 3, 4};
  rows.headers[1] = RowHeader{7, 8, 9};
  EncodePutRowsRecord("t", keys, rows, &p);
  p.erase(0, kWalRecordHeaderBytes);
  ASSERT_OK_AND_ASSIGN(r, DecodeRowsRecord(WalRecordType::kPutRows, p));
  EXPECT_EQ(r.state_size, 2u);
  EXPECT_EQ(WalFloats(r.floats, 2), rows.values);
  EXPECT_EQ(WalFloats(r.floats + 8, 4), rows.state);
  int64_t step;
  std::memcpy(&step, r.headers + 24, 8);
  EXPECT_EQ(step, 7);

  // A payload cut short, or with bytes to spare, is DataLoss.
  EXPECT_EQ(DecodeRowsRecord(WalRecordType::kPutRows, p.substr(0, p.size() - 1))
                .status()
                .code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeRowsRecord(WalRecordType::kPutRows, p + "x").status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeRowsRecord(WalRecordType::kPush, "").status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(WalTest, PushSumsPayloadLeavesSkippedRowsOutAndDecodes) {
  const std::vector<uint64_t> keys = {5, 1ull << 60, 7};
  const std::vector<uint32_t> occ = {3, 1, 2};
  const std::vector<float> sums = {1, 2, 3, 4, 5, 6, -0.0f, 8, 9};
  std::string p;
  // Row 1 skipped (non-finite): rows 0 and 2 are written.
  EncodePushSumsRecord("table.a", 0, keys, occ, sums, 3, {0, 1, 0}, &p);
  ASSERT_EQ(p.substr(0, kWalRecordHeaderBytes),
            std::string(kWalRecordHeaderBytes, '\0'));  // room for a header
  const int64_t step = 1234567890123;
  std::memcpy(p.data() + WalPushStepOffset(7), &step, 8);
  p.erase(0, kWalRecordHeaderBytes);
  EXPECT_EQ(p.size(), 2 + 7 + 16 + 2 * (8 + 4 + 12));
  ASSERT_OK_AND_ASSIGN(WalRowsRecord r,
                       DecodeRowsRecord(WalRecordType::kPushSums, p));
  EXPECT_EQ(r.table, "table.a");
  EXPECT_EQ(r.step, step);
  EXPECT_EQ(r.n, 2u);
  EXPECT_EQ(r.dim, 3u);
  EXPECT_EQ(WalKeys(r), (std::vector<uint64_t>{5, 7}));
  EXPECT_EQ(WalU32s(r.occ, 2), (std::vector<uint32_t>{3, 2}));
  const std::vector<float> want = {1, 2, 3, -0.0f, 8, 9};
  const std::vector<float> got = WalFloats(r.floats, 6);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), 24), 0);  // -0.0f kept

  // No skip vector: every row, in one copy per field.
  EncodePushSumsRecord("t", 4, keys, occ, sums, 3, {}, &p);
  p.erase(0, kWalRecordHeaderBytes);
  ASSERT_OK_AND_ASSIGN(r, DecodeRowsRecord(WalRecordType::kPushSums, p));
  EXPECT_EQ(r.step, 4);
  EXPECT_EQ(WalKeys(r), keys);
  EXPECT_EQ(WalU32s(r.occ, 3), occ);
  const std::vector<float> all = WalFloats(r.floats, 9);
  EXPECT_EQ(std::memcmp(all.data(), sums.data(), 36), 0);

  // Cut short by one byte, or read as the raw-gradient kPush: DataLoss.
  EXPECT_EQ(
      DecodeRowsRecord(WalRecordType::kPushSums, p.substr(0, p.size() - 1))
          .status()
          .code(),
      absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeRowsRecord(WalRecordType::kPush, p).status().code(),
            absl::StatusCode::kDataLoss);
}

// Writes records 1..3 (payloads "a", "bb", "ccc") and returns the segment.
std::string WriteThree(const std::string& wal_dir) {
  auto wal = OpenWal(wal_dir);
  wal->Append(WalRecordType::kPush, "a");
  wal->Append(WalRecordType::kPush, "bb");
  wal->Append(WalRecordType::kPush, "ccc");
  EXPECT_OK(wal->WaitWritten(3));
  return Segments(wal_dir).at(0);
}

TEST(WalTest, TornTailIsDroppedAtEveryCut) {
  ScratchDir dir;
  const std::string wal_dir = dir.path() + "/wal";
  const std::string seg = WriteThree(wal_dir);
  std::string bytes;
  {
    std::ifstream in(seg, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const size_t r1 = kWalSegmentHeaderBytes + kWalRecordHeaderBytes + 1;
  const size_t r2 = r1 + kWalRecordHeaderBytes + 2;
  ASSERT_EQ(bytes.size(), r2 + kWalRecordHeaderBytes + 3);
  // Cut the file at every length: the complete records survive, the
  // partial one is dropped and counted.
  for (size_t len = 0; len <= bytes.size(); ++len) {
    {
      std::ofstream out(seg, std::ios::binary | std::ios::trunc);
      out.write(bytes.data(), static_cast<std::streamsize>(len));
    }
    WalReadStats stats;
    ASSERT_OK_AND_ASSIGN(std::vector<Got> got, ReadAll(wal_dir, 42, &stats));
    const size_t want = len >= bytes.size() ? 3
                        : len >= r2         ? 2
                        : len >= r1         ? 1
                                            : 0;
    ASSERT_EQ(got.size(), want) << "cut at " << len;
    const size_t whole = want == 3   ? bytes.size()
                         : want == 2 ? r2
                         : want == 1 ? r1
                                     : 0;
    if (len >= kWalSegmentHeaderBytes) {
      EXPECT_EQ(stats.torn_bytes, len - std::max(whole, kWalSegmentHeaderBytes))
          << "cut at " << len;
    }
  }
}

TEST(WalTest, CorruptByteEndsTheSegmentThere) {
  ScratchDir dir;
  const std::string wal_dir = dir.path() + "/wal";
  const std::string seg = WriteThree(wal_dir);
  std::string bytes;
  {
    std::ifstream in(seg, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const size_t r1 = kWalSegmentHeaderBytes + kWalRecordHeaderBytes + 1;
  // Flip each byte of record 2 (header or payload) in turn: record 1 is
  // read, record 2 and everything after it are not.
  for (size_t at = r1; at < r1 + kWalRecordHeaderBytes + 2; ++at) {
    std::string bad = bytes;
    bad[at] ^= 0x20;
    {
      std::ofstream out(seg, std::ios::binary | std::ios::trunc);
      out.write(bad.data(), static_cast<std::streamsize>(bad.size()));
    }
    ASSERT_OK_AND_ASSIGN(std::vector<Got> got, ReadAll(wal_dir, 42));
    ASSERT_EQ(got.size(), 1u) << "byte " << at;
    EXPECT_EQ(got[0].payload, "a");
  }
}

TEST(WalTest, GroupCommitUnderThreadsLosesAndDuplicatesNothing) {
  ScratchDir dir;
  const std::string wal_dir = dir.path() + "/wal";
  constexpr int kThreads = 8;
  constexpr int kPerThread = 300;
  uint64_t groups = 0;
  {
    auto wal = OpenWal(wal_dir);
    std::vector<std::thread> threads;
    std::atomic<int> errors{0};
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kPerThread; ++i) {
          const uint64_t lsn =
              wal->Append(WalRecordType::kPush, absl::StrCat(t, ":", i));
          if (!wal->WaitWritten(lsn).ok()) ++errors;
          // Acknowledged means written: it can be read back now.
          if (wal->written_lsn() < lsn) ++errors;
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(errors.load(), 0);
    EXPECT_EQ(wal->records(), uint64_t{kThreads} * kPerThread);
    groups = wal->groups();
    EXPECT_LE(groups, wal->records());
  }
  ASSERT_OK_AND_ASSIGN(std::vector<Got> got, ReadAll(wal_dir, 42));
  ASSERT_EQ(got.size(), size_t{kThreads} * kPerThread);
  std::vector<std::vector<int>> next(kThreads, std::vector<int>(1, 0));
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].lsn, i + 1);  // consecutive, in order
    const size_t colon = got[i].payload.find(':');
    const int t = std::stoi(got[i].payload.substr(0, colon));
    const int n = std::stoi(got[i].payload.substr(colon + 1));
    // Each thread's records appear once each, in its own order.
    ASSERT_EQ(n, next[t][0]) << got[i].payload;
    ++next[t][0];
  }
  std::printf("group commit: %d records in %llu writes\n",
              kThreads * kPerThread, static_cast<unsigned long long>(groups));
}

// Fails every Append of files it opened while `fail` is set.
class FailingFileSystem : public rocksdb::FileSystemWrapper {
 public:
  explicit FailingFileSystem(std::shared_ptr<rocksdb::FileSystem> base)
      : rocksdb::FileSystemWrapper(std::move(base)) {}
  static const char* kClassName() { return "FailingFileSystem"; }
  const char* Name() const override { return kClassName(); }

  class File : public rocksdb::FSWritableFileOwnerWrapper {
   public:
    File(std::unique_ptr<rocksdb::FSWritableFile> f, std::atomic<bool>* fail)
        : rocksdb::FSWritableFileOwnerWrapper(std::move(f)), fail_(fail) {}
    rocksdb::IOStatus Append(const rocksdb::Slice& data,
                             const rocksdb::IOOptions& o,
                             rocksdb::IODebugContext* dbg) override {
      if (fail_->load()) {
        // Half the bytes reach the file, as with a disk filling up.
        (void)target()->Append(rocksdb::Slice(data.data(), data.size() / 2), o,
                               dbg);
        return rocksdb::IOStatus::NoSpace("injected");
      }
      return target()->Append(data, o, dbg);
    }

   private:
    std::atomic<bool>* fail_;
  };

  rocksdb::IOStatus NewWritableFile(
      const std::string& fname, const rocksdb::FileOptions& o,
      std::unique_ptr<rocksdb::FSWritableFile>* result,
      rocksdb::IODebugContext* dbg) override {
    std::unique_ptr<rocksdb::FSWritableFile> f;
    rocksdb::IOStatus s = target()->NewWritableFile(fname, o, &f, dbg);
    if (s.ok()) result->reset(new File(std::move(f), &fail));
    return s;
  }

  std::atomic<bool> fail{false};
};

TEST(WalTest, FailedWriteIsRetriedInANewSegmentWithoutDuplicates) {
  ScratchDir dir;
  const std::string wal_dir = dir.path() + "/wal";
  auto failing =
      std::make_shared<FailingFileSystem>(rocksdb::FileSystem::Default());
  {
    auto wal = OpenWal(wal_dir, failing);
    ASSERT_OK(wal->WaitWritten(wal->Append(WalRecordType::kPush, "one")));
    failing->fail = true;
    const uint64_t two = wal->Append(WalRecordType::kPush, "two");
    const absl::Status s = wal->WaitWritten(two);
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
    EXPECT_EQ(wal->written_lsn(), 1u);
    failing->fail = false;
    // Space is back: the next write carries "two" again, in a new segment.
    const uint64_t three = wal->Append(WalRecordType::kPush, "three");
    ASSERT_OK(wal->WaitWritten(three));
    ASSERT_OK(wal->WaitWritten(two));
  }
  EXPECT_EQ(Segments(wal_dir).size(), 2u);
  WalReadStats stats;
  ASSERT_OK_AND_ASSIGN(std::vector<Got> got, ReadAll(wal_dir, 42, &stats));
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].payload, "one");
  EXPECT_EQ(got[1].payload, "two");
  EXPECT_EQ(got[2].payload, "three");
  EXPECT_GT(stats.torn_bytes, 0u);  // the half-written group
}

TEST(WalTest, RotateStartsANewSegmentAndOlderOnesCanGo) {
  ScratchDir dir;
  const std::string wal_dir = dir.path() + "/wal";
  auto wal = OpenWal(wal_dir, nullptr, 1, /*next_seq=*/5);
  ASSERT_OK(wal->WaitWritten(wal->Append(WalRecordType::kPush, "old")));
  const Wal::Cut cut = wal->Rotate();
  EXPECT_EQ(cut.lsn, 1u);
  EXPECT_EQ(cut.keep_seq, 6u);
  ASSERT_OK(wal->WaitWritten(wal->Append(WalRecordType::kPush, "new")));
  EXPECT_EQ(Segments(wal_dir).size(), 2u);
  ASSERT_OK(RemoveWalSegments(rocksdb::FileSystem::Default().get(), wal_dir,
                              cut.keep_seq));
  ASSERT_EQ(Segments(wal_dir).size(), 1u);
  ASSERT_OK_AND_ASSIGN(std::vector<Got> got, ReadAll(wal_dir, 42));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].payload, "new");
  EXPECT_EQ(got[0].lsn, 2u);
}

}  // namespace
}  // namespace psdb::internal
