#include "store/seqno_properties.h"

#include <algorithm>
#include <limits>
#include <string>

#include "absl/strings/numbers.h"

namespace psdb {
namespace {

class SeqnoCollector final : public rocksdb::TablePropertiesCollector {
 public:
  rocksdb::Status AddUserKey(const rocksdb::Slice& /*key*/,
                             const rocksdb::Slice& /*value*/,
                             rocksdb::EntryType /*type*/,
                             rocksdb::SequenceNumber seq,
                             uint64_t /*file_size*/) override {
    min_ = std::min<uint64_t>(min_, seq);
    max_ = std::max<uint64_t>(max_, seq);
    any_ = true;
    return rocksdb::Status::OK();
  }
  rocksdb::Status Finish(rocksdb::UserCollectedProperties* out) override {
    if (any_) {
      (*out)[kSeqnoMinProperty] = std::to_string(min_);
      (*out)[kSeqnoMaxProperty] = std::to_string(max_);
    }
    return rocksdb::Status::OK();
  }
  rocksdb::UserCollectedProperties GetReadableProperties() const override {
    return {};
  }
  const char* Name() const override { return "PsdbSeqnoCollector"; }

 private:
  uint64_t min_ = std::numeric_limits<uint64_t>::max();
  uint64_t max_ = 0;
  bool any_ = false;
};

class SeqnoCollectorFactory final
    : public rocksdb::TablePropertiesCollectorFactory {
 public:
  rocksdb::TablePropertiesCollector* CreateTablePropertiesCollector(
      rocksdb::TablePropertiesCollectorFactory::Context /*context*/) override {
    return new SeqnoCollector();
  }
  const char* Name() const override { return "PsdbSeqnoCollectorFactory"; }
};

}  // namespace

std::shared_ptr<rocksdb::TablePropertiesCollectorFactory>
NewSeqnoPropertiesCollectorFactory() {
  return std::make_shared<SeqnoCollectorFactory>();
}

std::optional<SeqnoRange> SeqnoRangeOf(const rocksdb::TableProperties& props) {
  const auto& user = props.user_collected_properties;
  auto lo = user.find(kSeqnoMinProperty);
  auto hi = user.find(kSeqnoMaxProperty);
  SeqnoRange range;
  if (lo == user.end() || hi == user.end() ||
      !absl::SimpleAtoi(lo->second, &range.min) ||
      !absl::SimpleAtoi(hi->second, &range.max) || range.min > range.max) {
    return std::nullopt;
  }
  return range;
}

}  // namespace psdb
