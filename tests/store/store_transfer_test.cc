// Store: the encoded row transfer of live resharding (ReadEncodedRows,
// IngestRows) and the background deletes of a resharding source
// (DeleteRowsLater, WaitForDeletes).
#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "psdb/store.h"
#include "store/row_codec.h"
#include "tests/store/store_test_util.h"
#include "tests/testing/test_util.h"

namespace psdb {
namespace {

using optim::OptimizerKind;
using ::psdb::testing::MakeSpec;
using ::psdb::testing::ScratchDir;
using ::psdb::testing::SmallOptions;
using ::testing::HasSubstr;

constexpr int kDim = 3;

TableSpec Spec() {
  return MakeSpec("ada", kDim, OptimizerKind::kAdagrad, 0.1f,
                  InitKind::kUniform);
}

std::vector<uint64_t> AllKeys(Store& store, const std::string& table) {
  std::vector<uint64_t> keys;
  EXPECT_OK(store.ScanKeys(table, 7, [&](absl::Span<const uint64_t> batch) {
    keys.insert(keys.end(), batch.begin(), batch.end());
    return absl::OkStatus();
  }));
  std::sort(keys.begin(), keys.end());
  return keys;
}

// Decodes the encodings `rows` (back to back) of the keys `found` and
// expects each to be the row of `expect` (PullRows of `found`): values,
// state, update count and last update step. Returns the decoded headers.
std::vector<RowHeader> ExpectEncodingsAre(absl::string_view rows,
                                          const std::vector<uint64_t>& found,
                                          const RowBatch& expect) {
  const size_t row_bytes = EncodedRowSize(kDim, kDim);
  EXPECT_EQ(rows.size(), found.size() * row_bytes);
  std::vector<RowHeader> headers(found.size());
  for (size_t i = 0; i < found.size(); ++i) {
    std::vector<float> v(kDim), st(kDim);
    const absl::Status decoded =
        DecodeRow(rows.substr(i * row_bytes, row_bytes), kDim, kDim,
                  &headers[i], absl::MakeSpan(v), absl::MakeSpan(st));
    EXPECT_TRUE(decoded.ok()) << "key " << found[i] << ": " << decoded;
    if (!decoded.ok()) continue;
    EXPECT_EQ(v, std::vector<float>(expect.values.begin() + i * kDim,
                                    expect.values.begin() + (i + 1) * kDim))
        << "key " << found[i];
    EXPECT_EQ(st, std::vector<float>(expect.state.begin() + i * kDim,
                                     expect.state.begin() + (i + 1) * kDim))
        << "key " << found[i];
    EXPECT_EQ(headers[i].update_count, expect.headers[i].update_count)
        << "key " << found[i];
    EXPECT_EQ(headers[i].last_update_step, expect.headers[i].last_update_step)
        << "key " << found[i];
  }
  return headers;
}

// Keys 1..n pushed once each (key k with gradient k), then pushed again
// for the odd ones: rows with state and headers that differ per key.
void Fill(Store& store, uint64_t n) {
  for (uint64_t k = 1; k <= n; ++k) {
    const float g = static_cast<float>(k);
    ASSERT_OK(store.Push("ada", {k}, {g, -g, 0.5f}));
    if (k % 2 == 1) ASSERT_OK(store.Push("ada", {k}, {1, 1, 1}));
  }
}

class StoreTransferTest : public ::testing::Test {
 protected:
  // A source whose keys 1..20 are on disk only and 21..40 resident.
  void SetUp() override {
    {
      ASSERT_OK_AND_ASSIGN(auto s,
                           Store::Open(SmallOptions(), src_dir_.path()));
      ASSERT_OK(s->CreateTable(Spec()));
      Fill(*s, 40);
    }  // closing writes every row to RocksDB
    ASSERT_OK_AND_ASSIGN(src_, Store::Open(SmallOptions(), src_dir_.path()));
    std::vector<uint64_t> hot;
    for (uint64_t k = 21; k <= 40; ++k) hot.push_back(k);
    RowBatch ignored;
    ASSERT_OK(src_->PullRows("ada", hot, &ignored));  // now resident
    ASSERT_OK_AND_ASSIGN(dst_, Store::Open(SmallOptions(), dst_dir_.path()));
    ASSERT_OK(dst_->CreateTable(Spec()));
  }

  ScratchDir src_dir_, dst_dir_;
  std::unique_ptr<Store> src_, dst_;
};

TEST_F(StoreTransferTest, EncodedRowsOfBothTiersArriveBitIdentical) {
  // 0 and 99 have no row; they are skipped, and not created.
  const std::vector<uint64_t> keys = {0, 3, 30, 99, 17, 40, 21, 1};
  std::vector<uint64_t> found;
  std::string bytes;
  ASSERT_OK(src_->ReadEncodedRows("ada", keys, &found, &bytes));
  std::vector<uint64_t> sorted_found = found;
  std::sort(sorted_found.begin(), sorted_found.end());
  EXPECT_EQ(sorted_found, (std::vector<uint64_t>{1, 3, 17, 21, 30, 40}));
  const size_t row_bytes = EncodedRowSize(kDim, kDim);
  ASSERT_EQ(bytes.size(), found.size() * row_bytes);
  EXPECT_EQ(AllKeys(*src_, "ada").size(), 40u);  // nothing created

  // Each encoding is the row PullRows gives (values, state, header).
  RowBatch expect;
  ASSERT_OK(src_->PullRows("ada", found, &expect));
  const std::vector<RowHeader> headers =
      ExpectEncodingsAre(bytes, found, expect);
  for (size_t i = 0; i < found.size(); ++i) {
    // PullRows above counted one more sighting than the encoding saw.
    EXPECT_EQ(headers[i].frequency + 1, expect.headers[i].frequency);
  }

  const uint64_t created_before = dst_->Stats().tables[0].created;
  ASSERT_OK(dst_->IngestRows("ada", found, bytes));
  EXPECT_EQ(AllKeys(*dst_, "ada"), sorted_found);
  // The destination held none of them: each ingested row is a new row.
  EXPECT_EQ(dst_->Stats().tables[0].created, created_before + found.size());
  RowBatch got, want;
  ASSERT_OK(dst_->PullRows("ada", found, &got));
  ASSERT_OK(src_->PullRows("ada", found, &want));
  EXPECT_EQ(got.values, want.values);
  EXPECT_EQ(got.state, want.state);
  for (size_t i = 0; i < found.size(); ++i) {
    EXPECT_EQ(got.headers[i].update_count, want.headers[i].update_count);
    EXPECT_EQ(got.headers[i].last_update_step,
              want.headers[i].last_update_step);
  }
  // The next push continues identically on both.
  ASSERT_OK(src_->Push("ada", {3}, {1, 2, 3}, PushOptions{.step = 9}));
  ASSERT_OK(dst_->Push("ada", {3}, {1, 2, 3}, PushOptions{.step = 9}));
  RowBatch a, b;
  ASSERT_OK(src_->PullRows("ada", {3}, &a));
  ASSERT_OK(dst_->PullRows("ada", {3}, &b));
  EXPECT_EQ(a.values, b.values);
  EXPECT_EQ(a.state, b.state);
}

// Resident rows are read a stripe at a time: the encodings still come in
// the order of the keys given (a key twice, twice), followed by the rows
// read from disk, with absent keys squeezed out between them.
TEST_F(StoreTransferTest, EncodedRowsComeInTheOrderOfTheKeys) {
  const std::vector<uint64_t> keys = {40, 5,  99, 22, 21, 0,
                                      33, 22, 17, 38, 24, 23};
  std::vector<uint64_t> found;
  std::string bytes = "xyz";  // appended to
  ASSERT_OK(src_->ReadEncodedRows("ada", keys, &found, &bytes));
  const std::vector<uint64_t> want_found = {40, 22, 21, 33, 22,
                                            38, 24, 23, 5,  17};
  ASSERT_EQ(found, want_found);
  EXPECT_EQ(bytes.substr(0, 3), "xyz");
  RowBatch expect;
  ASSERT_OK(src_->PullRows("ada", found, &expect));
  ExpectEncodingsAre(absl::string_view(bytes).substr(3), found, expect);
}

TEST_F(StoreTransferTest, IngestOverwritesRowsOfBothTiersAndSurvivesReopen) {
  std::vector<uint64_t> found;
  std::string bytes;
  ASSERT_OK(src_->ReadEncodedRows("ada", {5, 25}, &found, &bytes));
  ASSERT_EQ(found.size(), 2u);
  // The destination already holds other versions of 5 and 25: one only on
  // disk after a reopen, one resident.
  {
    ASSERT_OK(dst_->Push("ada", {5, 25}, {9, 9, 9, 9, 9, 9}));
    dst_.reset();
    ASSERT_OK_AND_ASSIGN(dst_, Store::Open(SmallOptions(), dst_dir_.path()));
    RowBatch ignored;
    ASSERT_OK(dst_->PullRows("ada", {25}, &ignored));
  }
  // Duplicates: the last occurrence wins, as in PutRows.
  std::vector<uint64_t> keys = found;
  keys.push_back(found[0]);
  std::string twice = bytes + bytes.substr(0, EncodedRowSize(kDim, kDim));
  const uint64_t created_before = dst_->Stats().tables[0].created;
  ASSERT_OK(dst_->IngestRows("ada", keys, twice));
  // Both rows existed (5 only on disk): overwritten, neither created.
  EXPECT_EQ(dst_->Stats().tables[0].created, created_before);
  RowBatch want;
  ASSERT_OK(src_->PullRows("ada", found, &want));
  dst_.reset();  // the ingested rows are dirty: closing writes them
  ASSERT_OK_AND_ASSIGN(dst_, Store::Open(SmallOptions(), dst_dir_.path()));
  RowBatch got;
  ASSERT_OK(dst_->PullRows("ada", found, &got));
  EXPECT_EQ(got.values, want.values);
  EXPECT_EQ(got.state, want.state);
  EXPECT_EQ(AllKeys(*dst_, "ada"), (std::vector<uint64_t>{5, 25}));
}

// A table created in this session skips IngestRows's disk lookups only
// until its first row goes to disk: rows it evicted since still count as
// existing (overwritten, not created) and keep their keys.
TEST(StoreIngestTest, RowsEvictedFromANewTableAreOverwrittenNotCreated) {
  ScratchDir dir;
  // Room for about a thousand of these rows in memory.
  ASSERT_OK_AND_ASSIGN(auto store,
                       Store::Open(SmallOptions(64 << 10), dir.path()));
  ASSERT_OK(store->CreateTable(Spec()));
  constexpr uint64_t kKeys = 3000;
  std::vector<uint64_t> keys;
  for (uint64_t k = 1; k <= kKeys; ++k) {
    keys.push_back(k);
    // One call each: a call may exceed the budget by its own rows.
    ASSERT_OK(store->Push("ada", {k}, {static_cast<float>(k), 1, -1}));
  }
  ASSERT_OK_AND_ASSIGN(std::vector<uint64_t> resident,
                       store->ResidentKeys("ada", kKeys));
  ASSERT_LT(resident.size(), kKeys / 2);  // most rows are on disk only
  const uint64_t created = store->Stats().tables[0].created;
  ASSERT_EQ(created, kKeys);

  // Every row, read and ingested back: all existed.
  std::vector<uint64_t> found;
  std::string bytes;
  ASSERT_OK(store->ReadEncodedRows("ada", keys, &found, &bytes));
  ASSERT_EQ(found.size(), kKeys);
  RowBatch before;
  ASSERT_OK(store->PullRows("ada", found, &before));
  ASSERT_OK(store->IngestRows("ada", found, bytes));
  EXPECT_EQ(store->Stats().tables[0].created, created);
  RowBatch after;
  ASSERT_OK(store->PullRows("ada", found, &after));
  EXPECT_EQ(after.values, before.values);
  EXPECT_EQ(after.state, before.state);
  EXPECT_EQ(AllKeys(*store, "ada"), keys);
}

TEST_F(StoreTransferTest, BadIngestChangesNothing) {
  std::vector<uint64_t> found;
  std::string bytes;
  ASSERT_OK(src_->ReadEncodedRows("ada", {2, 22}, &found, &bytes));
  ASSERT_EQ(found.size(), 2u);
  // One flipped byte in the second row: DataLoss naming its key.
  std::string bad = bytes;
  bad[bad.size() - 10] ^= 0x40;
  const absl::Status corrupt = dst_->IngestRows("ada", found, bad);
  EXPECT_THAT(corrupt, StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(std::string(corrupt.message()),
              HasSubstr(absl::StrCat("key ", found[1])));
  // Lengths that do not match the keys.
  EXPECT_THAT(dst_->IngestRows("ada", found, bytes.substr(1)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(dst_->IngestRows("ada", {found[0]}, bytes),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // Rows of another shape (a dim-4 table's encoding).
  std::string other;
  EncodeRow(RowHeader{}, std::vector<float>(4), std::vector<float>(2), &other);
  other.resize(EncodedRowSize(kDim, kDim), '\0');
  EXPECT_THAT(dst_->IngestRows("ada", {7}, other),
              StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(dst_->IngestRows("nope", found, bytes),
              StatusIs(absl::StatusCode::kNotFound));
  // A well-formed row (valid checksum) holding a NaN in its state.
  std::string nan_row;
  std::vector<float> state(kDim, 0.1f);
  state[1] = std::numeric_limits<float>::quiet_NaN();
  EncodeRow(RowHeader{}, std::vector<float>(kDim), state, &nan_row);
  const absl::Status nan = dst_->IngestRows(
      "ada", {found[0], 9}, bytes.substr(0, nan_row.size()) + nan_row);
  EXPECT_THAT(nan, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(nan.message()),
              HasSubstr("key 9 at position 1 is not finite"));
  EXPECT_TRUE(AllKeys(*dst_, "ada").empty());
}

TEST_F(StoreTransferTest, BackgroundDeletesAreDoneBeforeAnyReaderLooks) {
  // Rows of both tiers, one key listed twice.
  std::vector<uint64_t> gone;
  for (uint64_t k = 1; k <= 40; k += 3) gone.push_back(k);
  gone.push_back(4);
  src_->DeleteRowsLater("ada", gone);
  // ScanKeys, ResidentKeys and Stats wait for it: none sees a doomed row.
  std::vector<uint64_t> left = AllKeys(*src_, "ada");
  std::vector<uint64_t> want;
  for (uint64_t k = 1; k <= 40; ++k) {
    if ((k - 1) % 3 != 0) want.push_back(k);
  }
  EXPECT_EQ(left, want);
  src_->DeleteRowsLater("ada", {2, 23});
  ASSERT_OK_AND_ASSIGN(std::vector<uint64_t> resident,
                       src_->ResidentKeys("ada", 1000));
  EXPECT_EQ(std::count(resident.begin(), resident.end(), 23), 0);
  ASSERT_OK(src_->WaitForDeletes());
  EXPECT_EQ(AllKeys(*src_, "ada").size(), want.size() - 2);
  // Deleted rows are gone from both tiers.
  RowBatch rows;
  std::vector<uint8_t> present;
  ASSERT_OK(src_->ReadRows("ada", {1, 23, 40, 5}, &rows, &present));
  EXPECT_EQ(present, (std::vector<uint8_t>{0, 0, 0, 1}));
  // A delete queued just before the store closes is finished by the close.
  src_->DeleteRowsLater("ada", {5, 6});
  src_.reset();
  ASSERT_OK_AND_ASSIGN(src_, Store::Open(SmallOptions(), src_dir_.path()));
  ASSERT_OK(src_->ReadRows("ada", {5, 6, 8}, &rows, &present));
  EXPECT_EQ(present, (std::vector<uint8_t>{0, 0, 1}));
  EXPECT_EQ(AllKeys(*src_, "ada").size(), want.size() - 4);
}

}  // namespace
}  // namespace psdb
